"""The queued path and the local sandbox path build the same selection, byte for byte."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from bridge.knowledge.attachments import AttachmentRef, AttachmentSource, ExtractionLimits
from bridge.knowledge.kinds import guess_kind
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import QueueAttachmentSource, gather, gather_async
from sandbox.extractor import SandboxExtractor
from tests.conftest import REPO_ROOT
from tests.helpers import run_on_a_terminal, ticks_while
from tests.integration.conftest import WorkerFactory, WorkerProcess
from tests.integration.refs import REQUEST, hostile_refs, local_selection

pytestmark = [pytest.mark.integration, pytest.mark.redis]

#: A handful of fast files, one per extractor: text, two PDFs, a DOCX, one small image.
CORPUS_FILES = (
    "docling_word_sample.expected.txt",
    "pypdf-samples_habibi-arabic.pdf",
    "pdfminer_jo-japanese.pdf",
    "docling_word_sample.docx",
    "tesseract_phototest-rotated-R.png",
)


def corpus_refs(corpus_dir: Path) -> list[AttachmentRef]:
    refs = []
    for name in CORPUS_FILES:
        payload = (corpus_dir / name).read_bytes()
        kind, media_type = guess_kind(name, payload[:16])
        refs.append(AttachmentRef(name, kind, media_type, payload))
    return refs


def test_corpus_round_trip_matches_local_byte_for_byte(
    shared_worker: WorkerProcess, client: CeleryQueue, corpus_dir: Path
) -> None:
    refs = corpus_refs(corpus_dir) + hostile_refs()
    limits = ExtractionLimits(max_text_chars=6_000, max_total_chars=2_000)
    local = local_selection(refs, limits)
    queued = gather(refs, client, limits=limits, deadline=120, use_cache=False)
    assert queued.text == local.text
    assert queued.revision == local.revision
    assert queued.dropped == local.dropped
    # The set exercises admission, the total ceiling, and every kind of refusal.
    reasons = " ".join(reason for _, reason in local.dropped)
    for expected in ("empty payload", "not extractable", "ParserError", "6000-character",
                     "whitespace", "2000-character"):  # fmt: skip
        assert expected in reasons
    assert local.text.count("ATTACHMENT [") >= 3
    # Served from the result cache the second time, and still the same bytes.
    assert gather(refs, client, limits=limits, deadline=120) == local
    assert gather(refs, client, limits=limits, deadline=120) == local


def test_source_and_async_gather_give_the_same_selection(
    shared_worker: WorkerProcess, client: CeleryQueue, corpus_dir: Path
) -> None:
    refs = corpus_refs(corpus_dir)[:3]
    expected = local_selection(refs, ExtractionLimits())
    source = QueueAttachmentSource(refs, client, deadline=120)
    assert source.select(REQUEST) == expected
    assert source.read(REQUEST).text == expected.text

    started = time.monotonic()
    selection, ticks = asyncio.run(
        ticks_while(gather_async(refs, client, deadline=120, use_cache=False), 0.005)
    )
    elapsed = time.monotonic() - started
    assert selection == expected
    # The loop kept running while the extraction was awaited (a blocked loop ticks once).
    assert ticks >= max(2, int(elapsed / 0.005 / 4))


def test_raise_mode_raises_the_refusal_the_local_path_raises(
    shared_worker: WorkerProcess, client: CeleryQueue
) -> None:
    refs = [
        AttachmentRef("a.txt", "text", "text/plain", b"first"),
        AttachmentRef("fake.pdf", "pdf", "application/pdf", b"%PDF-1.7 broken"),
        AttachmentRef("c.txt", "text", "text/plain", b"never read"),
    ]
    with pytest.raises(Exception) as local:
        AttachmentSource(refs, SandboxExtractor(), on_rejection="raise").select(REQUEST)
    with pytest.raises(Exception) as queued:
        gather(refs, client, on_rejection="raise", deadline=60)
    assert type(queued.value) is type(local.value)
    assert str(queued.value) == str(local.value)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "airlock"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO_ROOT,
    )


def test_cli_extracts_through_the_queue(
    shared_worker: WorkerProcess, redis_url: str, corpus_dir: Path, tmp_path: Path
) -> None:
    good = tmp_path / "notes.txt"
    good.write_text("meeting at noon\n")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    docx = corpus_dir / "docling_word_sample.docx"

    admitted = _cli("extract", "--broker", redis_url, "--json", str(good), str(docx))
    assert admitted.returncode == 0, admitted.stderr
    selection = json.loads(admitted.stdout)
    local = local_selection(
        [
            AttachmentRef("notes.txt", "text", "text/plain", good.read_bytes()),
            AttachmentRef(docx.name, *guess_kind(docx.name, b""), docx.read_bytes()),
        ],
        ExtractionLimits(),
    )
    assert selection["text"] == local.text
    assert selection["revision"] == local.revision

    omitted = _cli("extract", "--broker", redis_url, str(good), str(empty))
    assert omitted.returncode == 1
    assert "meeting at noon" in omitted.stdout
    assert "omitted empty.txt" in omitted.stderr

    # The environment variable selects queue mode as the flag does.
    env = dict(os.environ, AIRLOCK_BROKER_URL=redis_url)
    assert _cli("extract", str(good), env=env).returncode == 0


def test_queue_mode_shows_the_same_progress_counter(
    shared_worker: WorkerProcess, redis_url: str, tmp_path: Path
) -> None:
    files = []
    for index in range(3):
        path = tmp_path / f"note-{index}.txt"
        path.write_text(f"note {index}\n")
        files.append(str(path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    status, stdout, shown = run_on_a_terminal(
        [str(REPO_ROOT / ".venv" / "bin" / "airlock"), "extract", "--broker", redis_url, *files],
        env,
    )
    assert status == 0
    # One step per answer as it arrives, as in the embedded mode.
    assert b"extracting 1/3" in shown and b"extracting 3/3" in shown
    assert b"extracting" not in stdout


def test_airlock_worker_serves_both_queues_by_default(
    start_worker: WorkerFactory, client: CeleryQueue, corpus_dir: Path
) -> None:
    start_worker(via_cli=True)
    refs = corpus_refs(corpus_dir)[-2:]  # a DOCX (light queue) and an image (OCR queue)
    assert {ref.kind for ref in refs} == {"docx", "image"}
    expected = local_selection(refs, ExtractionLimits())
    assert gather(refs, client, deadline=120, use_cache=False) == expected
