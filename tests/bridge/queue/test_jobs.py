from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.knowledge.attachments import ExtractionLimits
from bridge.queue.jobs import (
    LIGHT_QUEUE,
    OCR_QUEUE,
    PAGE_TASK_NAME,
    PAGES_QUEUE,
    TASK_NAME,
    ExtractionJob,
    MalformedJob,
    PageJob,
    Stage,
    first_stage,
    job_from_wire,
    page_job_from_wire,
    page_task_id,
    payload_key,
    queue_for,
    route,
    wire_settings,
)

JOB = ExtractionJob(
    sha256="ab" * 32,
    size=12,
    label="report.pdf",
    kind="pdf",
    media_type="application/pdf",
    limits=ExtractionLimits(max_pages=3),
    stage=Stage.LIGHT,
    use_cache=True,
)


def wire(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(JOB.to_wire()))
    body.update(changes)
    return body


def test_a_job_survives_json_unchanged() -> None:
    assert job_from_wire(wire()) == JOB
    assert job_from_wire(wire(limits={**wire()["limits"], "max_expansion_ratio": 50})).limits == (
        ExtractionLimits(max_pages=3, max_expansion_ratio=50.0)
    )


def test_hand_off_changes_only_the_stage() -> None:
    handed = JOB.handed_on(Stage.OCR)
    assert handed.stage is Stage.OCR
    assert handed.to_wire() | {"stage": "light"} == JOB.to_wire()
    asked = replace(JOB, ocr_language="eng,hin")
    assert asked.handed_on(Stage.OCR).ocr_language == "eng,hin"


def test_a_job_names_its_ocr_language_only_when_its_caller_asked_for_one() -> None:
    """A job without one is the message earlier releases read, key for key; one with a
    language carries it through the wire unchanged."""
    assert "ocr_language" not in JOB.to_wire()
    assert set(JOB.to_wire()) == {
        "sha256", "size", "label", "kind", "media_type", "limits", "stage", "use_cache"
    }  # fmt: skip
    for ocr_language in ("deu", "eng+deu", "eng,scripts", "chi_sim_vert,Japanese_vert"):
        asked = replace(JOB, ocr_language=ocr_language)
        assert asked.to_wire()["ocr_language"] == ocr_language
        assert job_from_wire(json.loads(json.dumps(asked.to_wire()))) == asked


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "job",
        {k: v for k, v in wire().items() if k != "size"},
        wire(extra=1),
        wire(sha256="AB" * 32),
        wire(sha256="ab" * 31),
        wire(sha256=None),
        wire(size=0),
        wire(size=True),
        wire(size=1.5),
        wire(size="12"),
        wire(label=7),
        wire(label="x" * 129),
        wire(kind=["pdf"]),
        wire(media_type="x" * 1025),
        wire(stage="gpu"),
        wire(use_cache=1),
        wire(limits=None),
        wire(limits={**wire()["limits"], "max_pages": True}),
        wire(limits={**wire()["limits"], "max_pages": 2.0}),
        wire(limits={**wire()["limits"], "max_pages": 0}),
        wire(limits={**wire()["limits"], "max_expansion_ratio": -1}),
        wire(limits={**wire()["limits"], "unknown": 1}),
        # Where a decoder built on types could be laxer than the hand-written checks were.
        wire(sha256="ab" * 32 + "\n"),
        wire(size=12.0),
        wire(size=-(2**70)),
        wire(label=[[[["report.pdf"]]]]),
        wire(kind={"pdf": True}),
        wire(use_cache="true"),
        wire(stage=None),
        wire(limits={**wire()["limits"], "max_pages": "3"}),
        wire(limits={**wire()["limits"], "max_expansion_ratio": float("nan")}),
        wire(limits={**wire()["limits"], "max_expansion_ratio": True}),
        wire(limits={k: v for k, v in wire()["limits"].items() if k != "max_pages"}),
        # kombu's JSON decoder turns {"__type__": ..., "__value__": ...} into Python objects.
        wire(size=Decimal(12)),
        wire(label=datetime(2026, 1, 1, tzinfo=UTC)),
        wire(media_type=b"application/pdf"),
        # The OCR language reaches tesseract's command line: names only, bounded.
        wire(ocr_language=None),
        wire(ocr_language=""),
        wire(ocr_language="-l"),
        wire(ocr_language="--tessdata-dir /tmp"),
        wire(ocr_language="../../tmp/evil"),
        wire(ocr_language="eng\n"),
        wire(ocr_language="eng,"),
        wire(ocr_language="eng+deu+fra+spa+ita"),
        wire(ocr_language=",".join(["eng"] * 9)),
        wire(ocr_language="scripts"),
        wire(ocr_language="scripts,eng"),
        wire(ocr_language="x" * 33),
        wire(ocr_language=["eng"]),
    ],
)
def test_malformed_messages_are_refused(body: object) -> None:
    with pytest.raises(MalformedJob):
        job_from_wire(body)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)


@st.composite
def near_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """A genuine job with one field of it, or of its limits, replaced or removed."""
    body = wire()
    target = body if draw(st.booleans()) else body["limits"]
    key = draw(st.sampled_from([*target, "extra"]))
    if key in target and draw(st.booleans()):
        del target[key]
    else:
        target[key] = draw(json_values)
    return body


@settings(max_examples=300, deadline=None)
@given(json_values | near_jobs())
def test_nothing_but_malformed_job_escapes_the_decoder(untrusted: object) -> None:
    try:
        job = job_from_wire(untrusted)
    except MalformedJob:
        return
    assert job.to_wire() == untrusted


def test_a_refused_message_names_the_field() -> None:
    with pytest.raises(MalformedJob, match="size"):
        job_from_wire(wire(size=True))
    with pytest.raises(MalformedJob, match=r"limits\.max_pages"):
        job_from_wire(wire(limits={**wire()["limits"], "max_pages": 0}))
    with pytest.raises(MalformedJob, match="unknown field `extra`"):
        job_from_wire(wire(extra=1))


def test_routing_by_stage() -> None:
    assert first_stage("image") is Stage.OCR
    assert {first_stage(kind) for kind in ("pdf", "docx", "text")} == {Stage.LIGHT}
    assert (queue_for(Stage.LIGHT), queue_for(Stage.OCR)) == (LIGHT_QUEUE, OCR_QUEUE)
    assert route(TASK_NAME, [JOB.to_wire()], {}, {}) == {"queue": LIGHT_QUEUE}
    ocr_job = JOB.handed_on(Stage.OCR).to_wire()
    assert route(TASK_NAME, (ocr_job,), {}, {}) == {"queue": OCR_QUEUE}
    assert route("other.task", [ocr_job], {}, {}) is None


def test_the_wire_is_json_only() -> None:
    settings = wire_settings()
    assert settings["accept_content"] == ["json"] == settings["result_accept_content"]
    assert settings["task_serializer"] == "json" == settings["result_serializer"]
    assert payload_key("ab" * 32) == "airlock:payload:" + "ab" * 32


PAGE = PageJob("d0c" * 10, 3, 24, "cd" * 32, 4096, "5e" * 16)


def test_a_page_job_survives_json_unchanged_and_goes_to_the_pages_queue() -> None:
    assert page_job_from_wire(json.loads(json.dumps(PAGE.to_wire()))) == PAGE
    assert route(PAGE_TASK_NAME, [PAGE.to_wire()], {}, {}) == {"queue": PAGES_QUEUE}
    assert page_task_id("abc", 3) == "abc.page-3"


@pytest.mark.parametrize(
    "changes",
    [
        {"page": 25},  # past the document's last page
        {"page": 0},
        {"pages": 0},
        {"document_id": "abc:def"},  # characters no task id of ours has (a key separator)
        {"document_id": ""},
        {"document_id": "a" * 201},
        {"sha256": "AB" * 32},
        {"publication": "../" * 11},
        {"size": 0},
        {"page": True},
        {"shell": "rm -rf /"},
    ],
)
def test_malformed_page_messages_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(MalformedJob, match="page job"):
        page_job_from_wire({**PAGE.to_wire(), **changes})
