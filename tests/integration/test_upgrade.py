"""A rolling upgrade: a worker of the previous release and a current one share the queues.

During an upgrade old and new workers always overlap. A worker must never consume a message it
cannot run: one from before fan-out, on the OCR queue, discarded 129 page tasks as unregistered
and the documents were answered WorkerLost. Here an earlier release (from this repository's
history: the previous one, and the last one before fan-out) runs from its own source tree
beside a current worker, both fanning out where they can, with scans and small texts in
flight: every answer is the embedded path's, the current release's or, for a scan the earlier
worker put together, the earlier release's (the answer's format changed in 0.2.0: page
markers), and nothing is lost.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from bridge.knowledge.contracts import IngestSelection
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import gather
from tests.conftest import REPO_ROOT
from tests.integration.conftest import PYTHON, WorkerFactory
from tests.integration.refs import counted_ref, local_selection
from tests.redis_server import RedisServer
from tests.scanned_pdfs import scanned_pdf

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

#: The last commit whose workers put page tasks on the OCR queue (the previous release), and
#: the last one without page tasks at all (the release the upgrade to fan-out started from).
RELEASES = {
    "previous": "dce71e166bc291e3b8122fcd1c2884e2aa64ad25",
    "before-fan-out": "9480600210ba5203699e02b99a1a6c677c591c73",
}
FAN_OUT = {"AIRLOCK_FAN_OUT_PAGES": "2"}
LIMITS = ExtractionLimits(max_pages=30)
# A release's own embedded selection of one PDF, run from its source tree.
_EMBEDDED = """
import json, sys
from dataclasses import asdict
from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from tests.integration.refs import local_selection
ref = AttachmentRef(sys.argv[1], "pdf", "application/pdf", sys.stdin.buffer.read())
print(json.dumps(asdict(local_selection([ref], ExtractionLimits(max_pages=int(sys.argv[2]))))))
"""


@pytest.fixture(params=sorted(RELEASES))
def previous_release(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """An earlier release's source tree, from git (a clone has the history)."""
    name: str = request.param
    commit = RELEASES[name]
    tree = tmp_path / name
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", commit], capture_output=True, check=False
    )
    assert archive.returncode == 0, (
        f"release {commit[:12]} is not in this checkout's history (a shallow clone?): "
        f"{archive.stderr.decode(errors='replace')}"
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def release_selection(release: Path, ref: AttachmentRef) -> IngestSelection:
    """What the release's own embedded path gives ``ref``: what its workers answer."""
    done = subprocess.run(
        [str(PYTHON), "-c", _EMBEDDED, ref.label, str(LIMITS.max_pages)],
        input=ref.payload,
        cwd=release,
        env={**os.environ, "PYTHONPATH": str(release)},
        capture_output=True,
        check=True,
        timeout=600,
    )
    value = json.loads(done.stdout)
    dropped = tuple((label, reason) for label, reason in value["dropped"])
    return IngestSelection(value["text"], value["revision"], dropped)


def test_a_worker_of_an_earlier_release_beside_a_current_one_answers_every_job_right(
    own_redis: RedisServer, own_workers: WorkerFactory, previous_release: Path, corpus_dir: Path
) -> None:
    old = own_workers(
        queues=("airlock.light", "airlock.ocr"), env=FAN_OUT, release=previous_release
    )
    new = own_workers(env=FAN_OUT)
    scan = scanned_pdf(corpus_dir, 6, text_page="A page with a text layer of its own")
    scans = [AttachmentRef(f"scan{i}.pdf", "pdf", "application/pdf", scan) for i in range(3)]
    texts = [counted_ref(f"t{i}", 0.05) for i in range(30)]
    url = own_redis.url()

    def read(refs: list[AttachmentRef]) -> IngestSelection:
        with closing(CeleryQueue(url, url)) as client:
            return gather(refs, client, limits=LIMITS, deadline=240, use_cache=False)

    batches = [[ref] for ref in scans] + [texts[i::3] for i in range(3)]
    with ThreadPoolExecutor(len(batches)) as pool:
        selections = list(pool.map(read, batches))
    # A PDF is answered as the release that read it renders documents: before 0.2.0 its text
    # had no page markers. A scan whose pages were read by both releases is merged by one.
    earlier = release_selection(previous_release, scans[0])
    for batch, selection in zip(batches, selections, strict=True):
        assert not selection.dropped, selection.dropped
        current = local_selection(batch, LIMITS)
        if batch[0].kind == "pdf":
            renamed = earlier.text.replace(scans[0].label, batch[0].label)
            assert selection in (current, IngestSelection(renamed, current.revision)), selection
        else:
            assert selection == current
    assert "unregistered" not in old.log().lower(), old.log()[-3000:]
    assert "airlock.extract_page" in new.log()  # the current worker read pages ...
    assert "airlock.extract[" in old.log()  # ... and the old one took jobs too


def test_an_earlier_worker_handed_a_job_that_names_its_ocr_language_answers_a_typed_failure(
    own_redis: RedisServer, own_workers: WorkerFactory, previous_release: Path
) -> None:
    """A job names its OCR language only when its caller asked for one, and a worker of an
    earlier release refuses that field. Callers are upgraded after the workers
    (docs/operations.md); in the wrong order the asking call fails at once with the worker's
    reason, and a call that asks nothing is answered as before, by the same worker."""
    own_workers(env=FAN_OUT, release=previous_release)
    note = AttachmentRef("note.txt", "text", "text/plain", b"a short note")
    url = own_redis.url()
    with closing(CeleryQueue(url, url)) as client:
        asking = gather([note], client, limits=LIMITS, deadline=60, ocr_language="deu")
        plain = gather([note], client, limits=LIMITS, deadline=60)
    [(label, reason)] = asking.dropped
    assert label == "note.txt" and not asking.text
    assert reason.endswith(
        "failed: WorkerError: the task raised MalformedJob: the job was refused: the document: "
        "Object contains unknown field `ocr_language`"
    )
    assert plain == local_selection([note], LIMITS)
