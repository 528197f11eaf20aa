"""Accounting under load: 1,000 attachments from concurrent clients, each accounted for once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from bridge.knowledge.contracts import IngestSelection
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import gather
from tests.integration.conftest import WorkerProcess

pytestmark = [pytest.mark.integration, pytest.mark.redis]

CLIENTS = 4
PER_CLIENT = 250
LIMITS = ExtractionLimits(max_text_chars=500)

# What each kind of ref must end as: admitted, or dropped with a reason containing this.
_EXPECTED = {
    "text": None,
    "empty": "empty payload",
    "exe": "not extractable",
    "long": "500-character ceiling",
    "broken": "ParserError",
    "blank": "whitespace",
}
_KINDS = sorted(_EXPECTED)


def mixed_ref(client: int, index: int) -> AttachmentRef:
    kind = _KINDS[index % len(_KINDS)]
    label = f"c{client}-{index:03d}-{kind}.txt"
    unique = f"client {client} file {index}".encode()
    if kind == "text":
        return AttachmentRef(label, "text", "text/plain", unique)
    if kind == "empty":
        return AttachmentRef(label, "text", "text/plain", b"")
    if kind == "exe":
        return AttachmentRef(label, "executable", "application/octet-stream", unique)
    if kind == "long":
        return AttachmentRef(label, "text", "text/plain", unique + b" x" * 300)
    if kind == "broken":
        return AttachmentRef(label, "pdf", "application/pdf", b"%PDF-1.4 " + unique)
    return AttachmentRef(label, "text", "text/plain", b" \n\t " * (index % 7 + 1))


@pytest.mark.slow
def test_a_thousand_attachments_from_concurrent_clients_are_each_accounted_once(
    shared_worker: WorkerProcess, client: CeleryQueue
) -> None:
    """Four request threads share one client, as a web app's handlers would."""
    batches = [[mixed_ref(c, i) for i in range(PER_CLIENT)] for c in range(CLIENTS)]

    def submit(refs: list[AttachmentRef]) -> IngestSelection:
        return gather(refs, client, limits=LIMITS, deadline=180, use_cache=False)

    with ThreadPoolExecutor(CLIENTS) as pool:
        selections = list(pool.map(submit, batches))

    total = 0
    for refs, selection in zip(batches, selections, strict=True):
        admitted = [entry.rpartition(":")[0] for entry in selection.revision.split("|")]
        dropped = [label for label, _ in selection.dropped]
        assert sorted(admitted + dropped) == sorted(ref.label for ref in refs)  # each once
        reasons = dict(selection.dropped)
        for ref in refs:
            expected = _EXPECTED[ref.label.rsplit("-", 1)[1].removesuffix(".txt")]
            if expected is None:
                assert ref.label in admitted
                assert f"ATTACHMENT [{ref.label}]\n{ref.payload.decode()}" in selection.text
            else:
                assert expected in reasons[ref.label], reasons[ref.label]
        total += len(admitted) + len(dropped)
    assert total == CLIENTS * PER_CLIENT
