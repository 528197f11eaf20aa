"""The answer a worker gives for one job, and how the bridge turns it back into an outcome.

An answer crossed a trust boundary: whoever can write to the result backend (a compromised
worker, anyone with the Redis password) can put anything under a task's key. So the bridge
believes nothing in it but the extracted text itself, and that only after :func:`admit_text`
re-normalised it and re-checked its ceiling. The label is re-derived from the caller's own
ref; a failure is re-worded through :func:`extraction_failure` with the caller's label; a shape
this module does not know is refused with a reason, never rendered raw.

Envelope shapes (exact key sets, exact JSON types)::

    {"ok": true,  "sha256": str, "label": str, "text": str, "byte_size": int}
    {"ok": false, "sha256": str, "label": str, "error": "IngestionRejected"|"ExtractionFailed",
     "type": str, "reason": str}
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bridge.knowledge.attachments import (
    AttachmentRef,
    ExtractedAttachment,
    ExtractionLimits,
    Outcome,
    admit_text,
    extraction_failure,
    quoted,
)
from bridge.knowledge.errors import ExtractionFailed, IngestionRejected
from bridge.knowledge.failures import Failure
from bridge.knowledge.labels import MAX_LABEL_CHARS

_OK_KEYS = frozenset({"ok", "sha256", "label", "text", "byte_size"})
_ERROR_KEYS = frozenset({"ok", "sha256", "label", "error", "type", "reason"})
_ERROR_CLASSES = {"IngestionRejected": IngestionRejected, "ExtractionFailed": ExtractionFailed}

#: A reason longer than this is not one a worker of this version writes.
MAX_REASON_CHARS = 2000
_MAX_TYPE_CHARS = 100

#: Room around the text in a stored result: keys, hash, label, reason, Celery's own fields.
_ANSWER_OVERHEAD_BYTES = 64 * 1024

#: Celery's states in which a task's stored meta is its final word. Not IGNORED: a task that
#: handed its job on (``Task.replace``) is ignored, and its replacement answers under the same id.
_FINAL_STATES = frozenset({"SUCCESS", "FAILURE", "REVOKED", "REJECTED"})


def answer_size_cap(limits: ExtractionLimits) -> int:
    """The most bytes a legitimate stored answer takes (12 per character: a ``\\u`` pair)."""
    return 12 * limits.max_text_chars + _ANSWER_OVERHEAD_BYTES


def answer_envelope(
    answer: ExtractedAttachment | Failure, label: str, sha256: str
) -> dict[str, object]:
    """The envelope a worker stores for one job: the text, or the failure as plain data.

    A failure travels as its code and reason, not worded: the bridge words it with the
    caller's label exactly as the local path does.
    """
    if isinstance(answer, ExtractedAttachment):
        return {
            "ok": True,
            "sha256": sha256,
            "label": answer.label,
            "text": answer.text,
            "byte_size": answer.byte_size,
        }
    return {
        "ok": False,
        "sha256": sha256,
        "label": label,
        "error": answer.error,
        "type": answer.code[:_MAX_TYPE_CHARS],
        "reason": answer.reason[:MAX_REASON_CHARS],
    }


@dataclass(frozen=True)
class StoredAnswer:
    """A task's final stored meta, parsed but not yet believed; or why it could not be parsed."""

    untrusted_meta: object
    refusal: str | None = None


def read_stored(untrusted_raw: bytes, limits: ExtractionLimits) -> StoredAnswer | None:
    """Parse a value from the result backend; ``None`` while the task has not finished.

    The size is checked before parsing: a forged answer of a gigabyte is refused by its
    length, not after the client built it into objects.
    """
    if len(untrusted_raw) > answer_size_cap(limits):
        return StoredAnswer(None, "the stored result exceeds the size any legitimate answer has")
    try:
        untrusted_meta = json.loads(untrusted_raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return StoredAnswer(None, "the stored result is not JSON")
    if type(untrusted_meta) is not dict or type(untrusted_meta.get("status")) is not str:
        return StoredAnswer(None, "the stored result is not a task state")
    if untrusted_meta["status"] not in _FINAL_STATES:
        return None
    return StoredAnswer(untrusted_meta)


def _malformed(ref: AttachmentRef, why: str) -> ExtractionFailed:
    return extraction_failure(
        ref, Failure("MalformedAnswer", f"the worker's answer was refused: {why}")
    )


def outcome_from_stored(
    ref: AttachmentRef, stored: StoredAnswer, limits: ExtractionLimits, sha256: str
) -> Outcome:
    """Re-validate one final task meta into the outcome the local path would have produced."""
    untrusted_meta = stored.untrusted_meta
    if stored.refusal is not None or type(untrusted_meta) is not dict:
        return _malformed(ref, stored.refusal or "the stored result is not a task state")
    status = untrusted_meta["status"]
    if status == "SUCCESS":
        return _outcome_from_envelope(ref, untrusted_meta.get("result"), limits, sha256)
    if status == "FAILURE":
        return extraction_failure(
            ref, Failure("WorkerError", _task_exception(untrusted_meta.get("result")))
        )
    return extraction_failure(
        ref, Failure("WorkerError", f"the task ended in state {status} without an answer")
    )


def _task_exception(untrusted_result: object) -> str:
    """What a task that raised left behind, as a quotable message."""
    if type(untrusted_result) is not dict:
        return "the task raised an exception that left no readable description"
    untrusted_type = untrusted_result.get("exc_type")
    untrusted_message = untrusted_result.get("exc_message")
    type_name = untrusted_type if type(untrusted_type) is str else "Exception"
    if type(untrusted_message) is list:
        parts = [part for part in untrusted_message if type(part) is str]
        message = "; ".join(parts)
    elif type(untrusted_message) is str:
        message = untrusted_message
    else:
        message = ""
    described = quoted(message, MAX_REASON_CHARS)
    return f"the task raised {quoted(type_name)}" + (f": {described}" if described else "")


def _outcome_from_envelope(
    ref: AttachmentRef, untrusted_envelope: object, limits: ExtractionLimits, sha256: str
) -> Outcome:
    if type(untrusted_envelope) is not dict:
        return _malformed(ref, "the envelope is not a JSON object")
    untrusted_ok = untrusted_envelope.get("ok")
    expected_keys = _OK_KEYS if untrusted_ok is True else _ERROR_KEYS
    if (untrusted_ok is not True and untrusted_ok is not False) or set(
        untrusted_envelope
    ) != expected_keys:
        return _malformed(ref, "the envelope does not have the exact keys of a known answer")
    untrusted_label = untrusted_envelope["label"]
    if type(untrusted_label) is not str or len(untrusted_label) > MAX_LABEL_CHARS:
        return _malformed(ref, "the envelope's label is not a short string")
    if untrusted_envelope["sha256"] != sha256:
        # A replayed or misdirected answer for some other payload must not stand in for this one.
        return _malformed(ref, "the envelope answers for a different payload")
    if untrusted_ok is True:
        untrusted_size = untrusted_envelope["byte_size"]
        if type(untrusted_size) is not int or untrusted_size != len(ref.payload):
            return _malformed(ref, "the envelope's byte_size is not the payload's size")
        # The label in the envelope is ignored: the caller's own ref names the attachment.
        try:
            return admit_text(ref, untrusted_envelope["text"], limits)
        except (IngestionRejected, ExtractionFailed) as exc:
            return exc
    untrusted_error = untrusted_envelope["error"]
    untrusted_type = untrusted_envelope["type"]
    untrusted_reason = untrusted_envelope["reason"]
    if (
        type(untrusted_error) is not str
        or untrusted_error not in _ERROR_CLASSES
        or type(untrusted_type) is not str
        or not untrusted_type.isidentifier()
        or len(untrusted_type) > _MAX_TYPE_CHARS
        or type(untrusted_reason) is not str
        or len(untrusted_reason) > MAX_REASON_CHARS
    ):
        return _malformed(ref, "the envelope's error fields have the wrong types or sizes")
    if untrusted_error == "ExtractionFailed":
        return extraction_failure(ref, Failure(untrusted_type, untrusted_reason))
    # A worker-side guard refusal: its wording is the worker's, so it is quoted (one line, no
    # invisible characters) rather than trusted. Legitimate reasons pass through unchanged.
    return IngestionRejected(quoted(untrusted_reason, MAX_REASON_CHARS))
