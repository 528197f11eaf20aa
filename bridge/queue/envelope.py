"""The answer a worker gives for one job, and how the bridge turns it back into an outcome.

Nothing in a stored answer is believed but the text, re-admitted by ``admit_text``; its shape
is held to the types below by the shared decoder (bridge.wire). See docs/queue.md, The trust
boundaries, for the envelope shapes and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec

from bridge.knowledge import sections
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
from bridge.knowledge.failures import EXTRACTION_FAILED, MALFORMED_ANSWER, WORKER_ERROR, Failure
from bridge.wire import Label, WireError, decode, parse_json

#: A reason longer than this is not one a worker of this version writes.
MAX_REASON_CHARS = 2000
_MAX_TYPE_CHARS = 100

#: Room around the text in a stored result: keys, hash, label, reason, Celery's own fields.
_ANSWER_OVERHEAD_BYTES = 64 * 1024

#: Celery's states in which a task's stored meta is its final word. Not IGNORED: a task that
#: handed its job on (``Task.replace``) is ignored, and its replacement answers under the same id.
_FINAL_STATES = frozenset({"SUCCESS", "FAILURE", "REVOKED", "REJECTED"})


def answer_size_cap(limits: ExtractionLimits) -> int:
    """The most bytes a legitimate stored answer takes (12 per character: a ``\\u`` pair).

    An e-mail's or archive's text holds its own and its files' (the last file read may pass
    ``max_total_chars`` by up to ``max_text_chars``) and a marker per file listed, at most
    ``max_members`` of them, and for each container in it (at most one a file) the refusals
    of its own text and of its uncounted files.
    """
    markers = (3 * limits.max_members + 2) * sections.marker_bytes(limits.max_nesting_depth)
    text = 2 * limits.max_text_chars + limits.max_total_chars
    return 12 * text + markers + _ANSWER_OVERHEAD_BYTES


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


#: A progress state is a few dozen bytes; the page counts are those a job can have.
_MAX_PROGRESS_BYTES = 4096
_MAX_PROGRESS_PAGES = 1_000_000


class TaskMeta(msgspec.Struct):
    """Celery's stored meta: other fields (traceback, children, date_done) are Celery's own."""

    status: str
    result: Any = None


class _Extracted(msgspec.Struct, forbid_unknown_fields=True):
    ok: Literal[True]
    sha256: str
    label: Label
    text: Any  # admit_text refuses what is not text, with the local path's reason
    byte_size: int


class _Failed(msgspec.Struct, forbid_unknown_fields=True):
    ok: Literal[False]
    sha256: str
    label: Label
    error: Literal["IngestionRejected", "ExtractionFailed"]
    type: Annotated[str, msgspec.Meta(max_length=_MAX_TYPE_CHARS)]
    reason: Annotated[str, msgspec.Meta(max_length=MAX_REASON_CHARS)]


_NOT_AN_ANSWER = "the envelope does not have the exact keys of a known answer"
_BAD_ERROR = "the envelope's error fields have the wrong types or sizes"
#: Why an envelope was refused, by the field the decoder stopped at ("": the key set).
_REFUSALS = {
    "": _NOT_AN_ANSWER,
    "ok": _NOT_AN_ANSWER,
    "label": "the envelope's label is not a short string",
    "sha256": "the envelope answers for a different payload",
    "byte_size": "the envelope's byte_size is not the payload's size",
    "error": _BAD_ERROR,
    "type": _BAD_ERROR,
    "reason": _BAD_ERROR,
}


@dataclass(frozen=True)
class StoredAnswer:
    """A task's final stored meta, parsed but not yet believed; or why it could not be parsed."""

    untrusted_meta: TaskMeta | None
    refusal: str | None = None


def read_stored(untrusted_raw: bytes, limits: ExtractionLimits) -> StoredAnswer | None:
    """Parse a value from the result backend; ``None`` while the task has not finished.

    The size is checked before parsing: a forged answer of a gigabyte is refused by its
    length, not after the client built it into objects.
    """
    if len(untrusted_raw) > answer_size_cap(limits):
        return StoredAnswer(None, "the stored result exceeds the size any legitimate answer has")
    try:
        untrusted_doc = parse_json(untrusted_raw)
    except WireError as exc:
        return StoredAnswer(None, f"the stored result is not JSON: it {exc.detail}")
    try:
        untrusted_meta = decode(untrusted_doc, TaskMeta)
    except WireError:
        return StoredAnswer(None, "the stored result is not a task state")
    if untrusted_meta.status not in _FINAL_STATES:
        return None
    return StoredAnswer(untrusted_meta)


class _Progress(msgspec.Struct):
    """A running task's PROGRESS meta, as worker.tasks publishes it (its stage besides)."""

    done: Annotated[int, msgspec.Meta(ge=0, le=_MAX_PROGRESS_PAGES)]
    total: Annotated[int, msgspec.Meta(ge=1, le=_MAX_PROGRESS_PAGES)]


def read_progress(untrusted_raw: bytes) -> tuple[int, int] | None:
    """Pages done of total from a running task's stored state, or None for anything else.

    Anyone who can write the result backend can publish one, so it is held to the shape
    and bounds a worker publishes (a few dozen bytes, done within total) and used only to
    show progress, never to decide anything.
    """
    if len(untrusted_raw) > _MAX_PROGRESS_BYTES:
        return None
    try:
        untrusted_meta = decode(parse_json(untrusted_raw), TaskMeta)
        if untrusted_meta.status != "PROGRESS":
            return None
        progress = decode(untrusted_meta.result, _Progress)
    except WireError:
        return None
    return (progress.done, progress.total) if progress.done <= progress.total else None


def _malformed(ref: AttachmentRef, why: str) -> ExtractionFailed:
    return extraction_failure(
        ref, Failure(MALFORMED_ANSWER, f"the worker's answer was refused: {why}")
    )


def outcome_from_stored(
    ref: AttachmentRef, stored: StoredAnswer, limits: ExtractionLimits, sha256: str
) -> Outcome:
    """Re-validate one final task meta into the outcome the local path would have produced."""
    untrusted_meta = stored.untrusted_meta
    if stored.refusal is not None or untrusted_meta is None:
        return _malformed(ref, stored.refusal or "the stored result is not a task state")
    untrusted_status = untrusted_meta.status
    if untrusted_status == "SUCCESS":
        return _outcome_from_envelope(ref, untrusted_meta.result, limits, sha256)
    if untrusted_status == "FAILURE":
        return extraction_failure(
            ref, Failure(WORKER_ERROR, _task_exception(untrusted_meta.result))
        )
    return extraction_failure(
        ref, Failure(WORKER_ERROR, f"the task ended in state {untrusted_status} without an answer")
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
    if untrusted_ok is not True and untrusted_ok is not False:
        return _malformed(ref, _NOT_AN_ANSWER)
    envelope: _Extracted | _Failed
    try:
        if untrusted_ok:
            envelope = decode(untrusted_envelope, _Extracted)
        else:
            envelope = decode(untrusted_envelope, _Failed)
    except WireError as exc:
        return _malformed(ref, _REFUSALS.get(exc.field, _NOT_AN_ANSWER))
    if envelope.sha256 != sha256:
        # A replayed or misdirected answer for some other payload must not stand in for this one.
        return _malformed(ref, _REFUSALS["sha256"])
    if isinstance(envelope, _Extracted):
        if envelope.byte_size != len(ref.payload):
            return _malformed(ref, _REFUSALS["byte_size"])
        # The label in the envelope is ignored: the caller's own ref names the attachment.
        try:
            return admit_text(ref, envelope.text, limits)
        except (IngestionRejected, ExtractionFailed) as exc:
            return exc
    if not envelope.type.isidentifier():
        return _malformed(ref, _BAD_ERROR)
    if envelope.error == EXTRACTION_FAILED:
        return extraction_failure(ref, Failure(envelope.type, envelope.reason))
    # A worker-side guard refusal: its wording is the worker's, so it is quoted (one line, no
    # invisible characters) rather than trusted. Legitimate reasons pass through unchanged.
    return IngestionRejected(quoted(envelope.reason, MAX_REASON_CHARS, keep_runs=True))
