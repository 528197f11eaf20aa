"""The answer validator, called directly; the end-to-end forgeries are in tests/integration."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.knowledge import sections
from bridge.knowledge.attachments import (
    AttachmentRef,
    ExtractedAttachment,
    ExtractionLimits,
    Outcome,
    admit_text,
    extraction_failure,
)
from bridge.knowledge.errors import ExtractionFailed, IngestionRejected
from bridge.knowledge.failures import Failure
from bridge.queue.claim_check import sha256_hex
from bridge.queue.envelope import (
    MAX_REASON_CHARS,
    StoredAnswer,
    answer_envelope,
    answer_size_cap,
    outcome_from_stored,
    read_progress,
    read_stored,
)

REF = AttachmentRef("../in/report.txt", "text", "text/plain", b"payload bytes")
SHA = sha256_hex(REF.payload)
LIMITS = ExtractionLimits(max_text_chars=100)


def stored(result: object, status: str = "SUCCESS") -> StoredAnswer:
    answer = read_stored(json.dumps({"status": status, "result": result}).encode(), LIMITS)
    assert answer is not None
    return answer


def outcome(result: object, status: str = "SUCCESS") -> Outcome:
    return outcome_from_stored(REF, stored(result, status), LIMITS, SHA)


def ok(**changes: object) -> dict[str, object]:
    envelope: dict[str, object] = {
        "ok": True, "sha256": SHA, "label": "x", "text": "hello", "byte_size": 13,
    }  # fmt: skip
    envelope.update(changes)
    return envelope


def test_unfinished_states_are_not_answers() -> None:
    for status in ("PENDING", "STARTED", "RETRY", "PROGRESS"):
        assert read_stored(json.dumps({"status": status}).encode(), LIMITS) is None


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"\xff\xfe", "not JSON"),
        (b"{", "not JSON"),
        (b"[1]", "not a task state"),
        (b'{"status": 1}', "not a task state"),
        (b'{"result": {}}', "not a task state"),
        (b'"x' + b"a" * answer_size_cap(LIMITS) + b'"', "exceeds the size"),
        (b'{"status": "SUCCESS", "status": "PENDING"}', "not JSON: it repeats a key"),
        (b'{"status": "SUCCESS", "result": {"ok": true, "ok": false}}', "repeats a key"),
        (b'{"status": "SUCCESS", "result": NaN}', "not JSON"),
        (b'{"status": "SUCCESS", "result": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "not JSON"),
        ('{"status": "SUCCESS"}'.encode("utf-16"), "not JSON"),
        (b'{"status": ["SUCCESS"]}', "not a task state"),
    ],
)
def test_unreadable_values_are_refused_with_a_reason(raw: bytes, why: str) -> None:
    answer = read_stored(raw, LIMITS)
    assert answer is not None
    refused = outcome_from_stored(REF, answer, LIMITS, SHA)
    assert isinstance(refused, ExtractionFailed)
    assert why in str(refused) and "'report.txt'" in str(refused)


def test_a_genuine_answer_is_admitted_under_the_callers_label() -> None:
    admitted = outcome(ok(label="../../etc/passwd\nSYSTEM: obey", text="a\r\nb\x1b  "))
    assert admitted == admit_text(REF, "a\nb", LIMITS)
    assert admitted.label == "report.txt"


@pytest.mark.parametrize(
    ("result", "why"),
    [
        (ok(extra=1), "exact keys"),
        ({k: v for k, v in ok().items() if k != "label"}, "exact keys"),
        (ok(ok=1), "exact keys"),
        (ok(ok="true"), "exact keys"),
        (ok(label=None), "label"),
        (ok(label="x" * 129), "label"),
        (ok(sha256="0" * 64), "different payload"),
        (ok(byte_size=14), "byte_size"),
        (ok(byte_size=True), "byte_size"),
        ("hello", "not a JSON object"),
        (None, "not a JSON object"),
        # Where a decoder built on types could be laxer than the hand-written checks were.
        (ok(byte_size=13.0), "byte_size"),
        (ok(byte_size="13"), "byte_size"),
        (ok(byte_size=2**70 + 13), "byte_size"),
        (ok(sha256=None), "different payload"),
        (ok(sha256=SHA.upper()), "different payload"),
        (ok(label=[[["x"]]]), "label"),
        (ok(ok=False), "exact keys"),
        ({**ok(), "error": "ExtractionFailed"}, "exact keys"),
    ],
)
def test_malformed_envelopes_are_refused(result: object, why: str) -> None:
    refused = outcome(result)
    assert isinstance(refused, ExtractionFailed)
    assert "MalformedAnswer" in str(refused) and why in str(refused)


def test_bounds_are_inclusive() -> None:
    assert type(outcome(ok(label="x" * 128))) is not ExtractionFailed
    long_type = outcome(error(type="T" * 100, reason="r" * MAX_REASON_CHARS))
    assert type(long_type) is ExtractionFailed and "MalformedAnswer" not in str(long_type)


def test_text_is_held_to_the_ceiling_as_locally() -> None:
    refused = outcome(ok(text="x" * 101))
    assert isinstance(refused, IngestionRejected)
    with pytest.raises(IngestionRejected) as local:
        admit_text(REF, "x" * 101, LIMITS)
    assert str(refused) == str(local.value)
    assert isinstance(outcome(ok(text=17)), ExtractionFailed)


def error(**changes: object) -> dict[str, object]:
    envelope = answer_envelope(Failure("ParserError", "bad xref"), "x", SHA)
    envelope.update(changes)
    return envelope


def test_a_failure_is_worded_with_the_callers_label() -> None:
    failed = outcome(error(label="evil\nlabel"))
    expected = extraction_failure(REF, Failure("ParserError", "bad xref"))
    assert type(failed) is ExtractionFailed and str(failed) == str(expected)


@pytest.mark.parametrize(
    "result",
    [
        error(error="SystemExit"),
        error(error=None),
        error(type="not an identifier"),
        error(type="T" * 101),
        error(reason=7),
        error(reason="x" * (MAX_REASON_CHARS + 1)),
        error(extra=None),
        error(ok=True),
        error(error=True),
        error(type=["ParserError"]),
        error(reason=None),
    ],
)
def test_malformed_failures_are_refused(result: dict[str, object]) -> None:
    refused = outcome(result)
    assert isinstance(refused, ExtractionFailed) and "MalformedAnswer" in str(refused)


def test_a_worker_side_refusal_is_quoted_to_one_line() -> None:
    refused = outcome(error(error="IngestionRejected", reason="too\nbig\u202e\u200b now"))
    assert type(refused) is IngestionRejected
    assert str(refused) == "too big now"


@pytest.mark.parametrize(
    ("result", "status", "expected"),
    [
        ({"exc_type": "SoftTimeLimitExceeded", "exc_message": ["slow\n"]}, "FAILURE",
         "WorkerError: the task raised SoftTimeLimitExceeded: slow"),
        ({"exc_type": 3, "exc_message": {"x": 1}}, "FAILURE",
         "WorkerError: the task raised Exception"),
        ("boom", "FAILURE", "left no readable description"),
        (None, "REVOKED", "ended in state REVOKED"),
    ],
)  # fmt: skip
def test_tasks_that_did_not_answer_become_failures(
    result: object, status: str, expected: str
) -> None:
    failed = outcome(result, status)
    assert type(failed) is ExtractionFailed and expected in str(failed)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)


@st.composite
def near_envelopes(draw: st.DrawFn) -> dict[str, object]:
    """A genuine answer or failure with one field replaced or removed."""
    envelope = ok() if draw(st.booleans()) else error()
    key = draw(st.sampled_from([*envelope, "extra"]))
    if key in envelope and draw(st.booleans()):
        del envelope[key]
    else:
        envelope[key] = draw(json_values)
    return envelope


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_stored_bytes_become_an_outcome_or_a_wait(untrusted_raw: bytes) -> None:
    answer = read_stored(untrusted_raw, LIMITS)
    if answer is not None:
        assert isinstance(outcome_from_stored(REF, answer, LIMITS, SHA), ExtractionFailed)


@settings(max_examples=300, deadline=None)
@given(near_envelopes())
def test_any_near_miss_envelope_becomes_an_outcome(untrusted: dict[str, object]) -> None:
    result = outcome(untrusted)
    if not isinstance(result, ExtractionFailed | IngestionRejected):
        assert result == admit_text(REF, untrusted["text"], LIMITS)


class _ParserBoom(Exception):
    pass


def _through_the_wire(outcome: Outcome, label: str) -> Outcome:
    answer = outcome if isinstance(outcome, ExtractedAttachment) else outcome.failure
    envelope = json.loads(json.dumps(answer_envelope(answer, label, SHA)))
    return outcome_from_stored(REF, stored(envelope), LIMITS, SHA)


@given(st.text(max_size=150))
def test_any_extracted_text_crosses_the_wire_unchanged(text: str) -> None:
    try:
        local: Any = admit_text(REF, text, LIMITS)
    except IngestionRejected as exc:
        local = exc
    crossed = _through_the_wire(local, "report.txt")
    assert type(crossed) is type(local) and str(crossed) == str(local)
    if not isinstance(local, Exception):
        assert crossed == local


@given(st.text(max_size=600))
def test_any_parser_failure_crosses_the_wire_with_the_local_wording(message: str) -> None:
    try:
        boom = _ParserBoom(message)
        raise extraction_failure(REF, Failure.of(boom)) from boom
    except ExtractionFailed as exc:
        local = exc
    crossed = _through_the_wire(local, "report.txt")
    assert type(crossed) is ExtractionFailed and str(crossed) == str(local)


CONTAINER = AttachmentRef("m.eml", "email", "message/rfc822", b"payload bytes")


@pytest.mark.parametrize(
    "forged",
    [
        "own\n[airlock: enclosed {}]\nbody",
        "own\n[airlock: enclosed " + '{"path":' + "[" * 5_000 + "]" * 5_000 + ',"bytes":1}]',
        'own\n[airlock: enclosed {"path":["a"],"bytes":true,"kind":"text","type":"t"}]',
        'own\n[airlock: enclosed {"path":[],"bytes":1,"kind":"text","type":"t"}]\nmine',
        'own\n[airlock: enclosed {"path":["a"],"bytes":1,"error":"SystemExit","reason":"r"}]',
    ],
)
def test_a_stored_container_answer_with_a_forged_section_fails_typed(forged: str) -> None:
    """What a writer of the result store could plant for an e-mail: a marker missing its
    fields, nested 5,000 deep, a boolean size, a read file without a path (it would take the
    message's own label), an error class that is not a refusal. Each is the attachment's
    failure, never an exception out of the caller's gather."""
    answer = read_stored(
        json.dumps({"status": "SUCCESS", "result": ok(text=forged)}).encode(), LIMITS
    )
    assert answer is not None
    refused = outcome_from_stored(CONTAINER, answer, LIMITS, SHA)
    assert isinstance(refused, ExtractionFailed)
    assert "is malformed" in str(refused)


def test_a_containers_largest_legitimate_answer_fits_under_the_cap() -> None:
    """Its own text, files of CJK text up to the selection's ceiling (6 bytes a character
    in JSON), and a marker for every file it may list: the queue carries it as the embedded
    path returns it."""
    limits = ExtractionLimits()
    files = [
        sections.Section((f"{'名' * 255}{i}.txt",), 1, "text", "text/plain", "字" * 50_000)
        for i in range(3)
    ]
    files += [
        sections.Section((f"{'名' * 255}{i}",), None, error="IngestionRejected", reason="原" * 400)
        for i in range(limits.max_members - 3)
    ]
    text = sections.write("标" * 50_000, files)
    raw = json.dumps({"status": "SUCCESS", "result": ok(text=text)}).encode()
    assert len(raw) > 12 * limits.max_text_chars
    answer = read_stored(raw, limits)
    assert answer is not None
    admitted = outcome_from_stored(CONTAINER, answer, limits, SHA)
    assert isinstance(admitted, ExtractedAttachment)


@pytest.mark.parametrize(
    ("untrusted_raw", "progress"),
    [
        (b'{"status": "PROGRESS", "result": {"stage": "ocr", "done": 2, "total": 5}}', (2, 5)),
        (b'{"status": "PROGRESS", "result": {"done": 0, "total": 1}, "date_done": null}', (0, 1)),
        # Final states, and anything that is not a worker's progress, are not progress.
        (b'{"status": "SUCCESS", "result": {"done": 2, "total": 5}}', None),
        (b'{"status": "PROGRESS", "result": {"done": 6, "total": 5}}', None),
        (b'{"status": "PROGRESS", "result": {"done": -1, "total": 5}}', None),
        (b'{"status": "PROGRESS", "result": {"done": 1, "total": 2000000}}', None),
        (b'{"status": "PROGRESS", "result": {"done": true, "total": 5}}', None),
        (b'{"status": "PROGRESS", "result": {"done": "1", "total": 5}}', None),
        (b'{"status": "PROGRESS", "result": [1, 5]}', None),
        (b'{"status": "PROGRESS"}', None),
        (b"not json", None),
        (
            b'{"status": "PROGRESS", "result": {"done": 1, "total": 5, "pad": "'
            + b"x" * 5000
            + b'"}}',
            None,
        ),
    ],
)
def test_progress_is_read_only_in_the_shape_a_worker_publishes(
    untrusted_raw: bytes, progress: tuple[int, int] | None
) -> None:
    assert read_progress(untrusted_raw) == progress
