"""An in-process stand-in for the queue and its workers, without Redis, for the gather properties
(tests/bridge/queue/test_source.py) and the service's request tests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from bridge.knowledge.attachments import (
    AttachmentRef,
    ExtractedAttachment,
    Outcome,
    extract_attachment,
)
from bridge.knowledge.errors import ExtractionFailed, IngestionRejected
from bridge.queue.envelope import StoredAnswer, answer_envelope, read_stored
from bridge.queue.jobs import job_from_wire
from bridge.queue.source import QueuedJob


class FakeParser:
    """Text from the payload, with the debris real parsers produce; '!' makes it fail."""

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        if payload.startswith(b"!"):
            raise ValueError(f"cannot parse {payload[:20]!r}\nline two")
        return payload.decode("latin-1").replace("|", "\r\n")


class WorkerInProcess:
    def __init__(self, unanswered: frozenset[int] = frozenset()) -> None:
        self.unanswered = unanswered
        self.published: list[QueuedJob] = []

    def extract(self, jobs: Sequence[QueuedJob], deadline: float) -> list[StoredAnswer | None]:
        answers: list[StoredAnswer | None] = []
        for queued in jobs:
            index = len(self.published)
            self.published.append(queued)
            if index in self.unanswered:
                answers.append(None)
                continue
            job = job_from_wire(json.loads(json.dumps(queued.job.to_wire())))
            ref = AttachmentRef(job.label, job.kind, job.media_type, queued.payload)
            outcome: Outcome
            try:
                outcome = extract_attachment(ref, FakeParser(), job.limits)
            except (IngestionRejected, ExtractionFailed) as exc:
                outcome = exc
            answer = outcome if isinstance(outcome, ExtractedAttachment) else outcome.failure
            envelope = answer_envelope(answer, job.label, job.sha256)
            meta: dict[str, object] = {
                "status": "SUCCESS",
                "result": envelope,
                "traceback": None,
                "children": [],
            }
            answers.append(read_stored(json.dumps(meta).encode(), job.limits))
        return answers
