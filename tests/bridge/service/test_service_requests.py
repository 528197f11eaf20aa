"""The bridge service's requests: the wire format, its JSON Schemas, and the service's delivery
rules against real Redis streams with an in-process stand-in for the workers.

Each test uses streams and request ids of its own, so nothing here flushes the database.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, fields
from typing import Any, cast, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis import Redis, ResponseError

from bridge.knowledge.attachments import (
    DEFAULT_LIMITS,
    AttachmentRef,
    AttachmentSource,
    ExtractionLimits,
)
from bridge.knowledge.contracts import ContextRequest
from bridge.queue.claim_check import sha256_hex, store_payloads
from bridge.queue.envelope import StoredAnswer
from bridge.queue.jobs import payload_key
from bridge.queue.source import DEFAULT_DEADLINE_SECONDS, QueuedJob, QueueUnavailable
from bridge.service.config import ServiceConfig, default_consumer
from bridge.service.schema import (
    MAX_ATTACHMENTS,
    MAX_DEADLINE_SECONDS,
    ClaimCheck,
    ErrorType,
    InvalidRequest,
    parse_request,
    request_bytes,
    schemas,
)
from bridge.service.server import BridgeService
from bridge.service.streams import selection_key
from tests.bridge.service.schema_check import REQUEST_SCHEMA, RESULT_SCHEMA, SCHEMAS, schema_errors
from tests.bridge.worker_in_process import FakeParser, WorkerInProcess
from tests.helpers import selection_as_json
from worker.config import ConfigurationError, Settings


def b64(payload: bytes) -> str:
    return base64.b64encode(payload).decode()


def inline(label: str = "a.txt", payload: bytes = b"hello", kind: str = "text") -> dict[str, Any]:
    return {"label": label, "kind": kind, "media_type": "text/plain", "payload_b64": b64(payload)}


def request_doc(
    request_id: str = "r-1", *attachments: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "v": 1,
        "request_id": request_id,
        "attachments": list(attachments) or [inline()],
        **extra,
    }


def raw(document: object) -> bytes:
    return json.dumps(document).encode()


# --- the request format ---------------------------------------------------------------------


def test_inline_and_claim_check_attachments_with_defaults() -> None:
    digest = sha256_hex(b"stored")
    stored = {"label": "s.pdf", "kind": "pdf", "media_type": "application/pdf", "sha256": digest}
    request = parse_request(raw(request_doc("chat:42.a_b-c", inline(), stored)))
    assert request.request_id == "chat:42.a_b-c"
    assert request.attachments == (
        AttachmentRef("a.txt", "text", "text/plain", b"hello"),
        ClaimCheck("s.pdf", "pdf", "application/pdf", digest),
    )
    assert request.limits == DEFAULT_LIMITS
    assert (request.on_rejection, request.deadline_seconds) == ("omit", 30.0)


def test_the_deployments_ceilings_are_the_default_and_the_most_a_request_gets() -> None:
    """AIRLOCK_MAX_PAGES=117 lets a request ask for 117 pages (the refusal of a 117-page book
    names that variable), and a request without limits gets the deployment's."""
    ceilings = ExtractionLimits(max_pages=117)
    assert parse_request(raw(request_doc()), ceilings).limits == ceilings
    asked = parse_request(raw(request_doc(limits={"max_pages": 117})), ceilings)
    assert asked.limits.max_pages == 117
    with pytest.raises(InvalidRequest, match="at most 117"):
        parse_request(raw(request_doc(limits={"max_pages": 118})), ceilings)


def test_a_request_names_its_ocr_language_or_leaves_the_workers_own() -> None:
    assert parse_request(raw(request_doc())).ocr_language is None
    assert parse_request(raw(request_doc(ocr_language="eng,hin"))).ocr_language == "eng,hin"


def test_limits_may_tighten_and_integers_are_json_schema_integers() -> None:
    doc = request_doc(limits={"max_pages": 5.0, "max_expansion_ratio": 50}, deadline_seconds=2)
    request = parse_request(raw({**doc, "on_rejection": "raise"}))
    assert request.limits == ExtractionLimits(max_pages=5, max_expansion_ratio=50)
    assert type(request.limits.max_pages) is int
    assert (request.on_rejection, request.deadline_seconds) == ("raise", 2.0)


#: Documents the parser refuses, each with the request id its refusal is addressed to and words
#: of the reason. The request schema must refuse every one of them too.
MALFORMED_DOCUMENTS: list[tuple[object, str | None, str]] = [
    ([1, 2], None, "JSON object"),
    (request_doc("has space"), None, "request_id"),
    (request_doc("x" * 129), None, "request_id"),
    ({**request_doc(), "request_id": 7}, None, "request_id"),
    ({**request_doc(), "v": 2}, "r-1", "v must be 1"),
    ({**request_doc(), "v": True}, "r-1", "v must be 1"),
    ({**request_doc(), "extra": 1}, "r-1", "nothing else"),
    ({"v": 1, "request_id": "r-1"}, "r-1", "must have the keys"),
    ({**request_doc(), "attachments": []}, "r-1", "1 to 32"),
    ({**request_doc(), "attachments": [inline()] * (MAX_ATTACHMENTS + 1)}, "r-1", "1 to 32"),
    ({**request_doc(), "attachments": "a.txt"}, "r-1", "1 to 32"),
    (request_doc("r-1", {**inline(), "extra": 1}), "r-1", "exactly the keys"),
    (request_doc("r-1", {**inline(), "sha256": "0" * 64}), "r-1", "exactly the keys"),
    (request_doc("r-1", {**inline(), "label": 5}), "r-1", "attachments[0].label"),
    (request_doc("r-1", {**inline(), "kind": "k" * 1025}), "r-1", "attachments[0].kind"),
    (request_doc("r-1", {**inline(), "payload_b64": "aGVsbG8"}), "r-1", "base64"),
    (request_doc("r-1", {**inline(), "payload_b64": "aGVs\nbG8="}), "r-1", "base64"),
    (request_doc("r-1", {**inline(), "payload_b64": "aGVsbG8=x"}), "r-1", "base64"),
    (request_doc("r-1", {**inline(), "payload_b64": "é"}), "r-1", "base64"),
    (request_doc("r-1", {**inline(), "payload_b64": None}), "r-1", "base64"),
    (
        request_doc("r-1", {"label": "a", "kind": "pdf", "media_type": "", "sha256": "AB"}),
        "r-1",
        "sha256",
    ),
    (request_doc(limits={"max_pages": 21}), "r-1", "limits.max_pages"),
    (request_doc(limits={"max_pages": 0}), "r-1", "limits.max_pages"),
    (request_doc(limits={"max_pages": 2.5}), "r-1", "limits.max_pages"),
    (request_doc(limits={"max_pages": True}), "r-1", "limits.max_pages"),
    (request_doc(limits={"max_expansion_ratio": 0}), "r-1", "max_expansion_ratio"),
    (request_doc(limits={"max_pagez": 1}), "r-1", "some of the keys"),
    (request_doc(limits=[]), "r-1", "some of the keys"),
    (request_doc(on_rejection="ignore"), "r-1", "on_rejection"),
    (request_doc(deadline_seconds=0), "r-1", "deadline_seconds"),
    (request_doc(deadline_seconds=601), "r-1", "deadline_seconds"),
    (request_doc(deadline_seconds="5"), "r-1", "deadline_seconds"),
    (request_doc(deadline_seconds=10**400), "r-1", "deadline_seconds"),
    # Where a decoder built on types could be laxer than the hand-written checks were.
    ({**request_doc(), "v": 1.5}, "r-1", "v must be 1"),
    ({**request_doc(), "v": "1"}, "r-1", "v must be 1"),
    (request_doc("r-1", {"label": "a", "kind": "text", "media_type": ""}), "r-1", "exactly the"),
    (request_doc("r-1", {**inline(), "label": [[["a"]]]}), "r-1", "attachments[0].label"),
    (request_doc("r-1", inline(), {**inline(), "extra": 1}), "r-1", "attachments[1] must be"),
    (
        request_doc("r-1", {"label": "a", "kind": "", "media_type": "", "sha256": "a" * 64 + "\n"}),
        "r-1",
        "sha256",
    ),
    (request_doc(limits={"max_pages": 2**64}), "r-1", "limits.max_pages"),
    (request_doc(limits={"max_pages": 1e300}), "r-1", "limits.max_pages"),
    (request_doc(limits={"max_pages": "5"}), "r-1", "limits.max_pages"),
    (request_doc(limits={"max_expansion_ratio": True}), "r-1", "max_expansion_ratio"),
    (request_doc(limits={"max_expansion_ratio": 1e300}), "r-1", "max_expansion_ratio"),
    (request_doc(deadline_seconds=True), "r-1", "deadline_seconds"),
    (request_doc(deadline_seconds=[5]), "r-1", "deadline_seconds"),
    (request_doc(on_rejection=None), "r-1", "on_rejection"),
    # The OCR language reaches tesseract's command line: model names only, bounded.
    (request_doc(ocr_language="-l deu"), "r-1", "ocr_language must be tesseract language names"),
    (request_doc(ocr_language="eng\n"), "r-1", "ocr_language"),
    (request_doc(ocr_language="../tessdata/eng"), "r-1", "ocr_language"),
    (request_doc(ocr_language=""), "r-1", "ocr_language"),
    (request_doc(ocr_language=None), "r-1", "ocr_language"),
    (request_doc(ocr_language=["eng"]), "r-1", "ocr_language"),
    (request_doc(ocr_language="scripts"), "r-1", "'scripts' neither first"),
    (request_doc(ocr_language="a+b+c+d+e"), "r-1", "at most 4"),
    (request_doc(ocr_language=",".join("abcde")), "r-1", "at most 4;"),
    (request_doc(ocr_language="eng+scripts"), "r-1", "neither first nor joined"),
    (request_doc(ocr_language="eng,osd"), "r-1", "not 'osd'"),
]

#: Refusals below the level of a JSON document, which a schema cannot see.
MALFORMED_BYTES: list[tuple[bytes, str | None, str]] = [
    (b"not json", None, "not a JSON document"),
    (b"\xff\xfe{}", None, "not UTF-8"),
    ('{"v":1}'.encode("utf-16"), None, "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, None, "not a JSON document"),
    (b'{"v":1,"request_id":"a","request_id":"b","attachments":[]}', None, "repeats a key"),
    (raw(request_doc()).replace(b'"v": 1', b'"v": 1, "deadline_seconds": NaN'), None, "NaN"),
    (raw(request_doc()).replace(b'"v": 1', b'"v": 1, "deadline_seconds": 1e999'), "r-1", "deadl"),
    # The schema's pattern refuses this too (ECMA-262's `$` is the end of the string), but
    # Python's jsonschema reads `$` as Python does, which also matches before a final newline.
    (raw(request_doc("r\n")), None, "request_id"),
    (
        raw(request_doc()).replace(b'"v": 1', b'"v": 1, "limits": {"max_pages": -Infinity}'),
        None,
        "Inf",
    ),
    (
        raw(request_doc("r-1", {**inline(), "kind": "text", "label": "a"})).replace(
            b'"label": "a"', b'"label": "a", "label": "b"'
        ),
        None,
        "repeats a key",
    ),
    (
        raw(request_doc()).replace(b'"v": 1', b'"v": 1, "x": ' + b"[" * 5000 + b"]" * 5000),
        None,
        "not a JSON",
    ),
]


@pytest.mark.parametrize(
    ("untrusted_raw", "request_id", "words"),
    [(raw(doc), request_id, words) for doc, request_id, words in MALFORMED_DOCUMENTS]
    + MALFORMED_BYTES,
)
def test_malformed_requests_are_refused_with_the_id_when_it_can_be_recovered(
    untrusted_raw: bytes, request_id: str | None, words: str
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_request(untrusted_raw)
    assert refused.value.request_id == request_id
    assert words in refused.value.reason


def test_an_entry_must_hold_one_bounded_request_field() -> None:
    assert request_bytes({b"request": b"{}"}, 2) == b"{}"
    for untrusted_fields in ({}, {b"req": b"{}"}, {b"request": b"{}", b"extra": b""}):
        with pytest.raises(InvalidRequest, match="exactly one field"):
            request_bytes(untrusted_fields, 100)
    with pytest.raises(InvalidRequest, match="3 bytes; at most 2"):
        request_bytes({b"request": b"{ }"}, 2)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
# Valid requests with at most one field replaced or removed, so that a document fails on one
# rule at a time. No newlines in strings: see the note on `$` above.
_declared = {key: st.text(max_size=8) for key in ("label", "kind", "media_type")}
valid_requests = st.fixed_dictionaries(
    {
        "v": st.just(1),
        "request_id": st.sampled_from(["r", "chat:7.x_y-z"]),
        "attachments": st.lists(
            st.fixed_dictionaries(
                {**_declared, "payload_b64": st.sampled_from(["", "QUJD", "QUI=", "QQ=="])}
            )
            | st.fixed_dictionaries({**_declared, "sha256": st.just(sha256_hex(b"x"))}),
            min_size=1,
            max_size=3,
        ),
    },
    optional={
        "limits": st.dictionaries(
            st.sampled_from(["max_pages", "max_bytes", "max_expansion_ratio"]),
            st.integers(1, 20) | st.floats(0.5, 20.0),
        ),
        "on_rejection": st.sampled_from(["omit", "raise"]),
        "deadline_seconds": st.floats(0.001, 600) | st.integers(1, 600),
    },
)
replacements = (
    st.none()
    | st.sampled_from([0, 1, 1.0, 2.5, 600, 601, -1, True, "", "omit", "QUJD", "AB", [], {}])
    | json_values
)


@st.composite
def near_requests(draw: st.DrawFn) -> dict[str, Any]:
    document: dict[str, Any] = draw(valid_requests)
    where = draw(st.sampled_from(["nowhere", "request", "attachment", "limits"]))
    if where == "nowhere":
        return document
    if where == "request":
        target = document
    elif where == "attachment":
        target = document["attachments"][0]
    else:
        target = document.setdefault("limits", {})
    key = draw(st.sampled_from([*target, "max_pages", "payload_b64", "sha256", "extra"]))
    if key in target and draw(st.booleans()):
        del target[key]
    else:
        target[key] = draw(replacements)
    return document


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=200), json_values.map(raw), near_requests().map(raw)))
@pytest.mark.slow
def test_nothing_but_invalid_request_escapes_the_parser(untrusted_raw: bytes) -> None:
    try:
        parse_request(untrusted_raw)
    except InvalidRequest as exc:
        assert exc.reason


# --- the JSON Schemas ------------------------------------------------------------------------

VALID_DOCUMENTS: list[dict[str, Any]] = [
    request_doc(),
    request_doc(limits={"max_pages": 5.0, "max_expansion_ratio": 2.5}, deadline_seconds=600),
    request_doc(on_rejection="raise", deadline_seconds=0.5),
    request_doc("r", {"label": "", "kind": "x", "media_type": "", "sha256": sha256_hex(b"x")}),
    request_doc("r", inline(payload=b"")),
    request_doc("r", *[inline()] * MAX_ATTACHMENTS),
    {**request_doc("r" * 128, inline(label="l" * 1024)), "v": 1.0},
    request_doc(limits={"max_bytes": 1e3}, deadline_seconds=1e-3),
    request_doc(ocr_language="deu"),
    request_doc(ocr_language="eng+deu+fra+spa,hin,scripts,osdx"),
    request_doc(ocr_language=",".join("abcd")),
]


def _accepted_by_parser(document: object) -> bool:
    try:
        parse_request(raw(document))
    except InvalidRequest:
        return False
    return True


def test_the_request_schema_accepts_what_the_parser_accepts() -> None:
    documents = VALID_DOCUMENTS + [doc for doc, _, _ in MALFORMED_DOCUMENTS]
    for document, errors in zip(documents, schema_errors(REQUEST_SCHEMA, documents), strict=True):
        assert (errors == []) == _accepted_by_parser(document), (document, errors)
    assert all(_accepted_by_parser(document) for document in VALID_DOCUMENTS)


@settings(max_examples=10, deadline=None)
@given(st.lists(near_requests(), min_size=20, max_size=20))
@pytest.mark.slow
def test_the_request_schema_and_the_parser_agree_on_near_misses(
    documents: list[dict[str, Any]],
) -> None:
    for document, errors in zip(documents, schema_errors(REQUEST_SCHEMA, documents), strict=True):
        assert (errors == []) == _accepted_by_parser(document), (document, errors)


def test_the_committed_schemas_are_the_generated_ones() -> None:
    """docs/schemas/ is written by ``python -m bridge.service.schema`` from the decoder's types."""
    generated = schemas()
    assert sorted(path.name for path in SCHEMAS.iterdir()) == sorted(generated)
    for name, text in generated.items():
        assert (SCHEMAS / name).read_text() == text, f"{name}: run python -m bridge.service.schema"


def test_the_schemas_name_the_service_bounds() -> None:
    request_schema = json.loads(REQUEST_SCHEMA.read_text())
    result_schema = json.loads(RESULT_SCHEMA.read_text())
    limits = request_schema["$defs"]["limits"]["properties"]
    assert list(limits) == [f.name for f in fields(ExtractionLimits)]
    for name, rule in limits.items():
        assert rule["maximum"] == getattr(DEFAULT_LIMITS, name)
    assert request_schema["properties"]["attachments"]["maxItems"] == MAX_ATTACHMENTS
    assert request_schema["properties"]["deadline_seconds"]["maximum"] == MAX_DEADLINE_SECONDS
    assert request_schema["properties"]["deadline_seconds"]["default"] == DEFAULT_DEADLINE_SECONDS
    assert result_schema["properties"]["error"] == {"$ref": "#/$defs/ResultError"}
    error_types = result_schema["$defs"]["ResultError"]["properties"]["type"]["enum"]
    assert error_types == list(get_args(ErrorType))


# --- the service, against real streams, with the workers in process -------------------------

REQUEST = ContextRequest("attachments")


class SlowQueue(WorkerInProcess):
    """The in-process workers, taking ``seconds`` per call, as a long extraction does."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def extract(self, jobs: Sequence[QueuedJob], deadline: float) -> list[StoredAnswer | None]:
        time.sleep(self.seconds)
        return super().extract(jobs, deadline)


class FailingQueue(WorkerInProcess):
    """Raises ``errors`` in turn on the first calls, then works."""

    def __init__(self, *errors: Exception) -> None:
        super().__init__()
        self.errors = list(errors)
        self.calls = 0

    def extract(self, jobs: Sequence[QueuedJob], deadline: float) -> list[StoredAnswer | None]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return super().extract(jobs, deadline)


@pytest.fixture
def tag(redis: Redis) -> Iterator[str]:
    """A prefix for this test's streams and request ids; its keys are deleted afterwards."""
    tag = f"t{uuid.uuid4().hex[:8]}"
    yield tag
    for pattern in (f"svc:{tag}:*", f"airlock:selection:{tag}-*"):
        keys = list(redis.scan_iter(match=pattern))
        if keys:
            redis.delete(*keys)


def config_for(tag: str, **overrides: Any) -> ServiceConfig:
    values: dict[str, Any] = {
        "request_stream": f"svc:{tag}:requests",
        "result_stream": f"svc:{tag}:results",
        "consumer": "alive",
        "claim_idle_seconds": 0.3,
        **overrides,
    }
    return ServiceConfig(**values)


class Running:
    """A service on a thread of its own, stopped (and joined) by :meth:`stop`."""

    def __init__(self, service: BridgeService) -> None:
        self.event = threading.Event()
        self.thread = threading.Thread(target=service.run, args=(self.event,), daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 20) -> None:
        self.event.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the service did not stop"


@pytest.fixture
def start(redis: Redis) -> Iterator[Callable[..., Running]]:
    started: list[Running] = []

    def run(config: ServiceConfig, queue: WorkerInProcess | None = None) -> Running:
        running = Running(BridgeService(redis, redis, queue or WorkerInProcess(), config))
        started.append(running)
        # Its consumer group exists before the test looks at pending entries (XPENDING on a
        # stream without the group is an error, and the service creates it on its thread).
        wait_for(lambda: has_group(redis, config))
        return running

    yield run
    for running in started:
        running.stop()


def has_group(redis: Redis, config: ServiceConfig) -> bool:
    try:
        groups = redis.xinfo_groups(config.request_stream)
    except ResponseError:  # no stream yet
        return False
    return any(group["name"] == config.group.encode() for group in groups)


def send(redis: Redis, config: ServiceConfig, document: object) -> str:
    untrusted_raw = document if isinstance(document, bytes) else raw(document)
    return cast(bytes, redis.xadd(config.request_stream, {"request": untrusted_raw})).decode()


def results(redis: Redis, config: ServiceConfig) -> list[dict[str, Any]]:
    entries: Any = redis.xrange(config.result_stream)  # bytes replies; redis-py types both modes
    return [json.loads(fields_[b"result"]) for _, fields_ in entries]


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def wait_for_results(redis: Redis, config: ServiceConfig, count: int) -> list[dict[str, Any]]:
    wait_for(lambda: redis.xlen(config.result_stream) >= count)
    return results(redis, config)


def settled(redis: Redis, config: ServiceConfig) -> bool:
    """Every entry answered or dead-lettered: none left in the stream, none pending."""
    pending = redis.xpending(config.request_stream, config.group)["pending"]
    return redis.xlen(config.request_stream) == 0 and pending == 0


def local_selection(refs: list[AttachmentRef], limits: ExtractionLimits) -> dict[str, Any]:
    return selection_as_json(AttachmentSource(refs, FakeParser(), limits).select(REQUEST))


@pytest.mark.integration
@pytest.mark.redis
def test_requests_sent_before_any_bridge_ran_are_answered_as_attachment_source_selects(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag)
    refs = [
        AttachmentRef("notes.txt", "text", "text/plain", b"line one|line two"),
        AttachmentRef("../evil\n.txt", "text", "text/plain", b"\x1b[31mred"),
        AttachmentRef("broken.pdf", "pdf", "application/pdf", b"!boom"),
        AttachmentRef("empty.txt", "text", "text/plain", b""),
        AttachmentRef("run.exe", "executable", "application/octet-stream", b"MZ"),
        AttachmentRef("long.txt", "text", "text/plain", b"x" * 80),
    ]
    attachments = [
        {
            "label": r.label,
            "kind": r.kind,
            "media_type": r.media_type,
            "payload_b64": b64(r.payload),
        }
        for r in refs
    ]
    limits = ExtractionLimits(max_text_chars=60, max_total_chars=50)
    send(redis, config, request_doc(f"{tag}-1", *attachments))
    send(redis, config, request_doc(f"{tag}-2", *attachments, limits=asdict(limits)))
    start(config)
    answers = {r["request_id"]: r for r in wait_for_results(redis, config, 2)}
    assert answers[f"{tag}-1"]["selection"] == local_selection(refs, ExtractionLimits())
    assert answers[f"{tag}-2"]["selection"] == local_selection(refs, limits)
    # The same document is kept under the request id, with the result TTL.
    stored = redis.get(selection_key(f"{tag}-1"))
    assert stored is not None and json.loads(stored) == answers[f"{tag}-1"]
    assert 0 < redis.ttl(selection_key(f"{tag}-1")) <= config.result_ttl
    wait_for(lambda: settled(redis, config))


@pytest.mark.integration
@pytest.mark.redis
def test_malformed_entries_are_answered_or_dead_lettered_and_do_not_block_the_stream(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag, max_request_bytes=2000)
    dead = [
        cast(bytes, redis.xadd(config.request_stream, {"req": "{}"})).decode(),
        send(redis, config, b"not json"),
        send(redis, config, request_doc("bad id")),
        send(redis, config, request_doc(f"{tag}-big", inline(payload=b"x" * 2000))),
    ]
    send(redis, config, {**request_doc(f"{tag}-extra"), "priority": 1})
    send(redis, config, request_doc(f"{tag}-b64", {**inline(), "payload_b64": "!!"}))
    send(redis, config, request_doc(f"{tag}-types", {**inline(), "label": ["a"]}))
    send(redis, config, request_doc(f"{tag}-good"))
    start(config)
    # Dead letters are written after their entries are acknowledged: wait for both.
    wait_for(lambda: settled(redis, config) and redis.xlen(config.dead_letter_stream) == len(dead))
    answers = {r["request_id"]: r for r in results(redis, config)}
    assert answers[f"{tag}-good"]["selection"]["text"] == "ATTACHMENT [a.txt]\nhello"
    for name, words in (("extra", "nothing else"), ("b64", "base64"), ("types", "label")):
        error = answers[f"{tag}-{name}"]["error"]
        assert error["type"] == "InvalidRequest" and words in error["reason"]
    # Entries run side by side, so letters arrive in any order.
    dead_letters: Any = redis.xrange(config.dead_letter_stream)
    letters = {
        fields_[b"entry_id"].decode(): fields_[b"reason"].decode() for _, fields_ in dead_letters
    }
    assert sorted(letters) == sorted(dead)
    assert "exactly one field" in letters[dead[0]]
    assert "not a JSON document" in letters[dead[1]]
    assert "request_id" in letters[dead[2]]
    assert "at most 2000 are accepted" in letters[dead[3]]


@pytest.mark.integration
@pytest.mark.redis
def test_an_entry_that_repeats_a_field_is_dead_lettered_not_guessed_at(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag)
    first, last = raw(request_doc(f"{tag}-first")), raw(request_doc(f"{tag}-last"))
    # redis-py's xadd takes a dict, which cannot repeat a field: the command as a client sends it.
    command = ("XADD", config.request_stream, "*", "request", first, "request", last)
    added = redis.execute_command(*command)  # type: ignore[no-untyped-call]
    entry_id = cast(bytes, added).decode()
    send(redis, config, request_doc(f"{tag}-good"))
    start(config)
    wait_for(lambda: settled(redis, config) and redis.xlen(config.dead_letter_stream) == 1)
    dead_letters: Any = redis.xrange(config.dead_letter_stream)
    [(_, letter)] = dead_letters
    assert letter[b"entry_id"].decode() == entry_id
    assert "must not repeat a field name" in letter[b"reason"].decode()
    assert [r["request_id"] for r in results(redis, config)] == [f"{tag}-good"]


@pytest.mark.integration
@pytest.mark.redis
def test_claim_checks_are_redeemed_verified_and_bounded(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag)
    stored = f"stored for {tag}".encode()
    planted = sha256_hex(f"planted for {tag}".encode())
    missing = sha256_hex(f"never stored {tag}".encode())
    store_payloads(redis, {sha256_hex(stored): stored}, 60)
    redis.set(payload_key(planted), b"other bytes", ex=60)

    def check(digest: str, label: str = "s.txt") -> dict[str, str]:
        return {"label": label, "kind": "text", "media_type": "text/plain", "sha256": digest}

    send(redis, config, request_doc(f"{tag}-ok", inline(), check(sha256_hex(stored))))
    send(redis, config, request_doc(f"{tag}-missing", check(missing)))
    send(redis, config, request_doc(f"{tag}-planted", check(planted)))
    send(
        redis, config, request_doc(f"{tag}-big", check(sha256_hex(stored)), limits={"max_bytes": 5})
    )
    start(config)
    wait_for(lambda: settled(redis, config))
    answers = {r["request_id"]: r for r in results(redis, config)}
    refs = [
        AttachmentRef("a.txt", "text", "text/plain", b"hello"),
        AttachmentRef("s.txt", "text", "text/plain", stored),
    ]
    assert answers[f"{tag}-ok"]["selection"] == local_selection(refs, ExtractionLimits())
    assert answers[f"{tag}-missing"]["error"]["type"] == "PayloadUnavailable"
    assert "no payload is stored" in answers[f"{tag}-missing"]["error"]["reason"]
    assert answers[f"{tag}-planted"]["error"]["type"] == "PayloadUnavailable"
    assert "do not hash to it" in answers[f"{tag}-planted"]["error"]["reason"]
    big = answers[f"{tag}-big"]["error"]
    assert big["type"] == "InvalidRequest" and "at most 5" in big["reason"]
    redis.delete(payload_key(sha256_hex(stored)), payload_key(planted))


@pytest.mark.integration
@pytest.mark.redis
def test_a_request_id_is_answered_once_and_never_run_again(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag)
    queue = WorkerInProcess()
    start(config, queue)
    send(redis, config, request_doc(f"{tag}-1"))
    wait_for_results(redis, config, 1)
    wait_for(lambda: settled(redis, config))
    send(redis, config, request_doc(f"{tag}-1", inline(payload=b"different")))
    wait_for(lambda: settled(redis, config))
    assert len(results(redis, config)) == 1
    assert len(queue.published) == 1


@pytest.mark.integration
@pytest.mark.redis
def test_error_results_follow_the_result_schema(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag)
    start(config, FailingQueue(RuntimeError("a bug")))
    send(redis, config, request_doc(f"{tag}-bug"))
    wait_for_results(redis, config, 1)
    send(redis, config, request_doc(f"{tag}-parser", inline(payload=b"!x"), on_rejection="raise"))
    send(redis, config, request_doc(f"{tag}-guard", inline(payload=b""), on_rejection="raise"))
    send(redis, config, request_doc(f"{tag}-omit", inline(payload=b""), inline("b.txt")))
    send(redis, config, {**request_doc(f"{tag}-v2"), "v": 2})
    wait_for(lambda: settled(redis, config))
    documents = results(redis, config)
    answers = {r["request_id"]: r for r in documents}
    assert answers[f"{tag}-bug"]["error"]["type"] == "InternalError"
    assert answers[f"{tag}-parser"]["error"]["type"] == "ExtractionFailed"
    assert "ValueError: cannot parse" in answers[f"{tag}-parser"]["error"]["reason"]
    assert answers[f"{tag}-guard"]["error"]["type"] == "IngestionRejected"
    assert answers[f"{tag}-omit"]["selection"]["dropped"][0][0] == "a.txt"
    assert answers[f"{tag}-v2"]["error"]["type"] == "InvalidRequest"
    assert schema_errors(RESULT_SCHEMA, documents) == [[] for _ in documents]
    forged = [{**documents[0], "extra": 1}, {"v": 1, "request_id": "r"}]
    assert all(schema_errors(RESULT_SCHEMA, forged))


@pytest.mark.integration
@pytest.mark.redis
def test_an_unreachable_queue_leaves_the_request_pending_until_its_lease_lapses(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag)
    queue = FailingQueue(QueueUnavailable("broker down"), ConnectionError("reset"))
    start(config, queue)
    started = time.monotonic()
    send(redis, config, request_doc(f"{tag}-1"))
    (answer,) = wait_for_results(redis, config, 1)
    assert answer["selection"]["text"] == "ATTACHMENT [a.txt]\nhello"
    assert queue.calls == 3
    # Each retry waited for the lease to lapse: a broken broker is not hammered.
    assert time.monotonic() - started >= 2 * config.claim_idle_seconds
    wait_for(lambda: settled(redis, config))


@pytest.mark.integration
@pytest.mark.redis
def test_a_dead_consumers_requests_are_taken_over_but_a_live_ones_are_not(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    # One request at a time: while the slow one runs, this bridge reads nothing more, so the
    # orphan below is certainly read by the dead consumer and not by this one. The idle period
    # is long enough that a loaded machine cannot stall the live bridge's renewals past it:
    # at the suite's usual 0.3 s, a fresh-clone run saw the rescuer take the slow request too.
    config = config_for(tag, consumer="slow", concurrency=1, claim_idle_seconds=1.5)
    slow = start(config, SlowQueue(7.5))
    send(redis, config, request_doc(f"{tag}-slow", inline(payload=b"slow")))
    wait_for(lambda: redis.xpending(config.request_stream, config.group)["pending"] == 1)
    # A bridge that read a request and died: its entry is pending, and nobody renews it.
    dead_config = config_for(tag, consumer="dead")
    send(redis, config, request_doc(f"{tag}-orphan", inline(payload=b"orphan")))
    redis.xreadgroup(config.group, dead_config.consumer, {config.request_stream: ">"}, count=1)
    rescuer_queue = WorkerInProcess()
    start(config_for(tag, consumer="rescuer", claim_idle_seconds=1.5), rescuer_queue)
    answers = {r["request_id"]: r for r in wait_for_results(redis, config, 2)}
    assert answers[f"{tag}-orphan"]["selection"]["text"].endswith("orphan")
    assert answers[f"{tag}-slow"]["selection"]["text"].endswith("slow")
    # The slow request's lease was renewed for 7.5 s, five idle periods: nobody took it over.
    assert [q.payload for q in rescuer_queue.published] == [b"orphan"]
    slow.stop()
    assert len(results(redis, config)) == 2
    wait_for(lambda: settled(redis, config))


@pytest.mark.integration
@pytest.mark.redis
def test_a_restart_under_the_same_name_resumes_its_own_pending_entries_first(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag, consumer="same", claim_idle_seconds=600)
    redis.xgroup_create(config.request_stream, config.group, id="0", mkstream=True)
    send(redis, config, request_doc(f"{tag}-1"))
    deleted = send(redis, config, request_doc(f"{tag}-2"))
    redis.xreadgroup(config.group, config.consumer, {config.request_stream: ">"}, count=2)
    redis.xdel(config.request_stream, deleted)  # deleted while pending: nothing to answer
    started = time.monotonic()
    start(config)
    wait_for(lambda: settled(redis, config))
    assert time.monotonic() - started < 5  # not after the 600 s claim idle time
    assert [r["request_id"] for r in results(redis, config)] == [f"{tag}-1"]
    # Deleted while pending: nothing to answer and nothing to report, only acknowledged.
    assert redis.xrange(config.dead_letter_stream) == []


@pytest.mark.integration
@pytest.mark.redis
def test_stop_finishes_the_requests_in_flight_and_reads_no_more(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    config = config_for(tag, concurrency=3)
    queue = SlowQueue(0.8)
    running = start(config, queue)
    for index in range(3):
        send(redis, config, request_doc(f"{tag}-{index}"))
    wait_for(lambda: len(queue.published) == 3)
    running.stop()
    assert len(results(redis, config)) == 3
    assert settled(redis, config)
    send(redis, config, request_doc(f"{tag}-late"))
    time.sleep(0.3)
    assert redis.xlen(config.request_stream) == 1  # left for the next bridge


@pytest.mark.integration
@pytest.mark.redis
def test_requests_run_concurrently_each_with_its_own_deadline(
    redis: Redis, tag: str, start: Callable[..., Running]
) -> None:
    delay, requests = 1.0, 4
    config = config_for(tag, concurrency=requests)
    start(config, SlowQueue(delay))
    started = time.monotonic()
    for index in range(requests):
        send(redis, config, request_doc(f"{tag}-{index}"))
    wait_for_results(redis, config, requests)
    # One after another they would take requests x delay; side by side, about one delay.
    assert time.monotonic() - started < (requests - 1) * delay


# --- configuration ---------------------------------------------------------------------------


def test_the_environment_configures_the_service() -> None:
    service = Settings.from_env(
        {
            "AIRLOCK_REQUEST_STREAM": "in",
            "AIRLOCK_RESULT_STREAM": "out",
            "AIRLOCK_BRIDGE_GROUP": "g",
            "AIRLOCK_BRIDGE_CONSUMER": "c",
            "AIRLOCK_RESULT_TTL": "7200",
            "AIRLOCK_RESULT_STREAM_MAXLEN": "50",
            "AIRLOCK_BRIDGE_CLAIM_IDLE": "30",
            "AIRLOCK_BRIDGE_CONCURRENCY": "8",
            "AIRLOCK_BRIDGE_MAX_REQUEST_MB": "2",
            "AIRLOCK_BRIDGE_CLIENT_QUOTA": "3",
        }
    ).bridge_service
    assert service == ServiceConfig("in", "out", "g", "c", 7200, 50, 30.0, 8, 2 * 1024 * 1024, 3)
    assert service.dead_letter_stream == "in:dead"
    defaults = Settings.from_env({}).bridge_service
    assert defaults.consumer == default_consumer()
    assert defaults == ServiceConfig(consumer=defaults.consumer)


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"AIRLOCK_RESULT_STREAM": "airlock:requests"}, "AIRLOCK_RESULT_STREAM"),
        ({"AIRLOCK_RESULT_STREAM": "airlock:requests:dead"}, "AIRLOCK_RESULT_STREAM"),
        ({"AIRLOCK_RESULT_TTL": "600"}, "AIRLOCK_RESULT_TTL"),
        ({"AIRLOCK_BRIDGE_CLAIM_IDLE": "2"}, "AIRLOCK_BRIDGE_CLAIM_IDLE"),
        ({"AIRLOCK_BRIDGE_CONCURRENCY": "0"}, "AIRLOCK_BRIDGE_CONCURRENCY"),
        ({"AIRLOCK_BRIDGE_MAX_REQUEST_MB": "0.5"}, "AIRLOCK_BRIDGE_MAX_REQUEST_MB"),
        ({"AIRLOCK_BRIDGE_CLIENT_QUOTA": "0"}, "AIRLOCK_BRIDGE_CLIENT_QUOTA"),
    ],
)
def test_settings_that_break_a_delivery_rule_are_refused(
    env: dict[str, str], variable: str
) -> None:
    with pytest.raises(ConfigurationError, match=variable):
        Settings.from_env(env)
