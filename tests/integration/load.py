"""Callers that keep the workers busy while a test breaks Redis, and the tally of what they got.

Each caller is a thread with its own ``CeleryQueue``, as a web app's request handlers would
be, calling ``gather`` back to back with one attachment at a time until told to stop. Every
call is recorded with its ref, its selection or the exception it raised, and how long it took;
the tally compares each selection with the embedded path's for the same ref, so "answered"
means answered byte for byte as the local sandbox answers.
"""

from __future__ import annotations

import base64
import difflib
import json
import threading
import time
import traceback
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from redis import Redis

from bridge.knowledge.attachments import AttachmentRef, AttachmentSource, ExtractionLimits
from bridge.knowledge.contracts import ContextRequest, IngestSelection
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import QUEUES
from bridge.queue.reconcile import UNACKED_KEY
from bridge.queue.source import QueueFull, QueueUnavailable, gather
from sandbox.extractor import SandboxExtractor
from tests.integration.refs import counted_ref, runs
from tests.scanned_pdfs import scanned_pdf
from worker.config import Settings

#: What a caller may be told at once while Redis is down: its call queued nothing.
_REFUSED_AT_ONCE_SECONDS = 8.0


@dataclass(frozen=True)
class Call:
    ref: AttachmentRef
    seconds: float
    ended: float
    selection: IngestSelection | None = None
    error: BaseException | None = None


@dataclass
class Tally:
    """Every call's end, sorted: answered as the embedded path answers, answered otherwise
    (wrong, or dropped: lost), refused at once with a typed ``QueueUnavailable`` (nothing was
    queued; ``full`` of them with ``QueueFull``), raised after waiting (the ride-out failed), or
    raised anything else (untyped: a caller could not tell what happened)."""

    answered: int = 0
    refused: int = 0
    full: int = 0
    #: Each with the embedded path's selection for its ref.
    wrong: list[tuple[Call, IngestSelection]] = field(default_factory=list)
    lost: list[Call] = field(default_factory=list)
    raised: list[Call] = field(default_factory=list)
    untyped: list[Call] = field(default_factory=list)

    def summary(self) -> str:
        problems = self.untyped + self.lost + self.raised
        return (
            f"answered {self.answered}, refused at once {self.refused} ({self.full} QueueFull), "
            f"wrong {len(self.wrong)}, lost {len(self.lost)}, raised after waiting "
            f"{len(self.raised)}, untyped {len(self.untyped)}; first problems: "
            + "; ".join(f"{call.ref.label}: {_ending(call)}" for call in problems[:5])
            + "; ".join(
                f"{call.ref.label} differs: {_difference(call.selection, local)}"
                for call, local in self.wrong[:3]
                if call.selection is not None
            )
        )


def _ending(call: Call) -> str:
    if isinstance(call.error, QueueUnavailable):
        return f"{type(call.error).__name__}: {call.error}"
    if call.error is not None:  # untyped: where it came from is the finding
        frames = traceback.extract_tb(call.error.__traceback__)
        ours = " > ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames if _ours(f))
        last = frames[-1] if frames else None
        raised = f"{Path(last.filename).name}:{last.lineno} {last.name}" if last else "?"
        return f"{type(call.error).__name__}: {call.error} (through {ours}, raised in {raised})"
    return str(call.selection.dropped if call.selection else "")


def _ours(frame: traceback.FrameSummary) -> bool:
    return "site-packages" not in frame.filename and "/lib/python" not in frame.filename


def _difference(got: IngestSelection, local: IngestSelection) -> str:
    lines = difflib.unified_diff(
        local.text.splitlines(), got.text.splitlines(), "embedded", "queued", lineterm="", n=1
    )
    return " | ".join(list(lines)[:12]) + f" (dropped {got.dropped} vs {local.dropped})"


class Callers:
    """``count`` threads calling ``gather`` on ``redis_url`` with ``make_ref(n)`` for n = 0, 1,
    ... until :meth:`stop`."""

    def __init__(
        self,
        redis_url: str,
        make_ref: Callable[[int], AttachmentRef],
        count: int,
        *,
        deadline: float = 60.0,
        limits: ExtractionLimits | None = None,
    ) -> None:
        self._redis_url = redis_url
        self._make_ref = make_ref
        self.deadline = deadline
        self._limits = limits or ExtractionLimits()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._next = 0
        self.calls: list[Call] = []
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(count)]

    def _take_number(self) -> int:
        with self._lock:
            self._next += 1
            return self._next - 1

    def _run(self) -> None:
        with closing(CeleryQueue(self._redis_url, self._redis_url)) as client:
            while not self._stop.is_set():
                ref = self._make_ref(self._take_number())
                started = time.monotonic()
                try:
                    selection = gather(
                        [ref], client, limits=self._limits, deadline=self.deadline, use_cache=False
                    )
                    ended = time.monotonic()
                    call = Call(ref, ended - started, ended, selection=selection)
                except Exception as exc:  # an untyped one is a finding: kept, not a dead caller
                    ended = time.monotonic()
                    call = Call(ref, ended - started, ended, error=exc)
                    self._stop.wait(0.2)  # a caller told the queue is down tries again soon
                with self._lock:
                    self.calls.append(call)

    def answered_since(self, moment: float) -> int:
        """Calls answered with a selection that ended after ``moment`` (a monotonic time)."""
        with self._lock:
            return sum(1 for c in self.calls if c.selection is not None and c.ended >= moment)

    @contextmanager
    def running(self) -> Iterator[Callers]:
        for thread in self._threads:
            thread.start()
        try:
            yield self
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop starting calls and wait for the ones under way (each ends by its deadline)."""
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(self.deadline + 30)


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.05)


def restore_seconds(worker_env: Mapping[str, str]) -> float:
    """How long a job whose acknowledgement Redis lost can stay in kombu's unacked hash.

    An ack Redis had not yet written to its AOF (everysec) when it was killed, or not yet
    replicated when its primary was, comes back with it: the job sits unacknowledged, held by
    no worker, until a worker's restore sweep (every restore interval) finds it older than
    the visibility timeout and queues it again; a worker then answers it again and acks it.
    Waiting less than this once failed the fault tests with nothing lost.
    """
    settings = Settings.from_env(worker_env)
    return settings.visibility_timeout + 3 * settings.restore_interval + 30


def tally(calls: Sequence[Call], limits: ExtractionLimits | None = None) -> Tally:
    """Sort every call by how it ended, comparing each selection with the embedded path's."""
    limits = limits or ExtractionLimits()
    extractor = SandboxExtractor()
    expected: dict[tuple[str, bytes], IngestSelection] = {}

    def local(ref: AttachmentRef) -> IngestSelection:
        return AttachmentSource([ref], extractor, limits).select(ContextRequest("load"))

    answered = [call for call in calls if call.selection is not None]
    distinct = {(call.ref.label, call.ref.payload): call.ref for call in answered}
    with ThreadPoolExecutor(2) as pool:
        for key, selection in zip(distinct, pool.map(local, distinct.values()), strict=True):
            expected[key] = selection
    result = Tally()
    for call in calls:
        if call.selection is None:
            if not isinstance(call.error, QueueUnavailable):
                result.untyped.append(call)
            elif call.seconds <= _REFUSED_AT_ONCE_SECONDS:
                result.refused += 1
                result.full += isinstance(call.error, QueueFull)
            else:
                result.raised.append(call)
        elif call.selection == expected[call.ref.label, call.ref.payload]:
            result.answered += 1
        elif call.selection.dropped:
            result.lost.append(call)
        else:
            result.wrong.append((call, expected[call.ref.label, call.ref.payload]))
    return result


def whereabouts(redis: Redis, labels: Collection[str]) -> dict[str, list[str]]:
    """Where the broker holds each job labelled one of ``labels``: which queues, or unacked
    (for a failure message: a lost job's message may still be somewhere no worker takes it)."""
    places: dict[str, list[str]] = {label: [] for label in labels}
    held = [(queue, json.loads(raw)) for queue in QUEUES for raw in redis.lrange(queue, 0, -1)]
    held += [(UNACKED_KEY, json.loads(raw)[0]) for raw in redis.hvals(UNACKED_KEY)]
    for place, message in held:
        body = json.loads(base64.b64decode(message["body"]))
        label = body[0][0].get("label") if body and body[0] else None
        if label in places:
            places[label].append(place)
    return places


def duplicated(marker_dir: Path, tags: Sequence[str]) -> dict[str, int]:
    """The tags whose job ran more than once, with how often."""
    counts = {tag: runs(marker_dir, tag) for tag in tags}
    return {tag: count for tag, count in counts.items() if count > 1}


def mixed_callers(
    url: str, corpus_dir: Path, text_callers: int, scan_callers: int, scan_limits: ExtractionLimits
) -> tuple[Callers, Callers]:
    """The fault tests' load: callers sending small counted texts, and callers sending 3-page
    scans with a text page that fan out (their deadline long enough to outlast the faults)."""
    scan = scanned_pdf(corpus_dir, 3, text_page="A page with a text layer of its own")

    def text(n: int) -> AttachmentRef:
        return counted_ref(f"t{n}")

    def scanned(n: int) -> AttachmentRef:
        return AttachmentRef(f"scan{n}.pdf", "pdf", "application/pdf", scan)

    texts = Callers(url, text, text_callers)
    return texts, Callers(url, scanned, scan_callers, limits=scan_limits, deadline=120)
