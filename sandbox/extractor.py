"""The bridge-facing extractor: ``extract(kind, media_type, payload, *, max_pages) -> str``.

It satisfies the bridge's TextExtractor port structurally and shares one runner per limits,
requirement and uid base. See docs/sandbox.md, "Notes by module".
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from sandbox import enclosures, pages
from sandbox.errors import SandboxError, SplitRequired
from sandbox.jail import DEFAULT_UID_BASE
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import ProgressCallback, SandboxRunner, Withdrawal

_shared_lock = threading.Lock()
_shared: dict[tuple[SandboxLimits, frozenset[str], int], SandboxRunner] = {}


def shared_runner(
    limits: SandboxLimits, require: frozenset[str] = frozenset(), uid_base: int = DEFAULT_UID_BASE
) -> SandboxRunner:
    with _shared_lock:
        key = (limits, require, uid_base)
        runner = _shared.get(key)
        if runner is None:
            runner = _shared[key] = SandboxRunner(limits, require=require, uid_base=uid_base)
        return runner


#: The embedded path reads as the queue's workers do by default (AIRLOCK_FAN_OUT_PAGES): a long
#: scan in pages, so both give it the same per-page budgets and the same selection.
DEFAULT_PARSE_LIMITS = ParseLimits(fan_out_pages=pages.DEFAULT_FAN_OUT_PAGES)


class SandboxExtractor:
    """``require`` and ``uid_base`` are ``SandboxRunner``'s, for the shared runner; a ``runner``
    given here is used as it was built. ``deadline`` (a :func:`time.monotonic` value) is the
    caller's: a child still running then is killed, since nobody would read its answer.

    A PDF of more than ``parse_limits.fan_out_pages`` pages that needs OCR is read in pages
    (sandbox/pages.py): a child splits it, each scanned page is read by a child of its own,
    under its own budget, and a child merges them into the text one child would answer, byte
    for byte. One child for the whole document once ran out of memory on a 60-page scan the
    queue's page tasks read (issue 19): the queue and the embedded path must give the same
    selection. ``page_workers`` children read pages at once (one: in turn); above 1 it bounds
    every child this extractor runs at once, whichever thread asks: callers that extract
    several files at once on it (the CLI) do not multiply the pages' children by their own.
    ``withdrawn``, once set, kills every child still running for it (``Withdrawn``): the
    HTTP door's DELETE of a running job.
    """

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # noqa: B008 - frozen value
        parse_limits: ParseLimits = DEFAULT_PARSE_LIMITS,
        runner: SandboxRunner | None = None,
        on_progress: ProgressCallback | None = None,
        *,
        require: frozenset[str] = frozenset(),
        uid_base: int = DEFAULT_UID_BASE,
        deadline: float | None = None,
        page_workers: int = 1,
        withdrawn: Withdrawal | None = None,
    ) -> None:
        self._limits = limits
        self._parse_limits = parse_limits
        self._runner = runner
        self._on_progress = on_progress
        self._require = require
        self._uid_base = uid_base
        self._deadline = deadline
        self._withdrawn = withdrawn
        self._page_workers = page_workers
        self._children = threading.BoundedSemaphore(page_workers) if page_workers > 1 else None

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        """Text of ``payload``, or a ``SandboxError`` subclass naming why there is none.

        A long PDF's child answers ``SplitRequired`` at its first page to OCR, so a short PDF
        or one of text alone costs one child, as before; the long scan is read in pages, or
        (when its split declines: pages too small to be worth a child each, or outgrowing the
        document) by one child that reads it whole.
        """
        limits = dataclasses.replace(self._parse_limits, max_pages=max_pages)
        try:
            return self._run(kind, media_type, payload, limits, self._on_progress)
        except SplitRequired:
            if kind != "pdf" or not (limits.ocr and limits.fan_out_pages):
                raise  # the light stage's answer (its caller hands the document on), or forged
        text = self._in_pages(media_type, payload, limits)
        if text is not None:
            return text
        whole = dataclasses.replace(limits, fan_out_pages=0)
        return self._run(kind, media_type, payload, whole, self._on_progress)

    def unpack(
        self, kind: str, media_type: str, payload: bytes, *, max_pages: int
    ) -> enclosures.Unpacked:
        """The files an e-mail or archive (``kind``) carries, decoded in a child under the
        parse limits' member and byte ceilings, and checked against them."""
        unpack_kind = enclosures.UNPACK_KINDS.get(kind)
        if unpack_kind is None:
            raise ValueError(f"kind {kind!r} is not a container airlock unpacks")
        limits = dataclasses.replace(self._parse_limits, max_pages=max_pages)
        untrusted_text = self._run(
            unpack_kind,
            media_type,
            payload,
            limits,
            output_bytes=enclosures.answer_allowance(limits.max_unpacked_bytes),
        )
        return enclosures.read_unpacked(
            untrusted_text, limits.max_members, limits.max_unpacked_bytes
        )

    def _run(
        self,
        kind: str,
        media_type: str,
        payload: bytes,
        limits: ParseLimits,
        on_progress: ProgressCallback | None = None,
        *,
        output_bytes: int | None = None,
    ) -> str:
        runner = self._runner or shared_runner(self._limits, self._require, self._uid_base)
        with self._children or contextlib.nullcontext():
            return runner.run(
                kind,
                media_type,
                payload,
                limits,
                on_progress,
                output_bytes=output_bytes or pages.answer_allowance(kind, len(payload)),
                deadline=self._deadline,
                withdrawn=self._withdrawn,
            ).text

    def _in_pages(self, media_type: str, payload: bytes, limits: ParseLimits) -> str | None:
        """The document read in parts, or None when it is not split (its split declined, or
        failed: one child then gives the document its verdict). A document without a scanned
        page goes straight to the merge, which joins the split's text: it is not parsed a
        second time."""
        split_limits = dataclasses.replace(limits, ocr=False)
        try:
            untrusted_plan = self._run(pages.SPLIT_KIND, media_type, payload, split_limits)
            plan = pages.read_plan(untrusted_plan, limits.max_pages)
        except SandboxError:
            return None
        if plan.parts is None:
            return None
        scans = plan.scans
        done = plan.pages - len(scans)
        read: dict[int, pages.PageReading] = {}
        failed: dict[int, SandboxError] = {}
        pool = ThreadPoolExecutor(self._page_workers)
        try:
            index_of = {
                pool.submit(self._read_page, part.pdf, limits): index for index, part in scans
            }
            waiting = set(index_of)
            while waiting:
                finished, waiting = wait(waiting, return_when=FIRST_COMPLETED)
                for future in finished:
                    try:
                        read[index_of[future]] = future.result()
                    except SandboxError as exc:
                        failed[index_of[future]] = exc
                        continue
                    # Counted as pages end, in whatever order: the largest start first, and
                    # counting in page order told a caller nothing until the first page ended.
                    done += 1
                    if self._on_progress is not None:
                        self._on_progress(done, plan.pages)
                first = min(failed, default=None)
                if first is not None and all(
                    index in read for index in index_of.values() if index < first
                ):
                    # The same outcome as the single job's, which meets the first failing page
                    # first; answered now, not once the pages still running end.
                    met = failed[first]
                    raise type(met)(f"page {first + 1} of {plan.pages}: {met}") from met
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        merge = pages.merge_payload(plan.parts, read)
        return self._run(pages.MERGE_KIND, "application/json", merge, limits)

    def _read_page(self, one_page_pdf: bytes, limits: ParseLimits) -> pages.PageReading:
        return pages.read_page(
            self._run(pages.PAGE_KIND, pages.PDF_MEDIA_TYPE, one_page_pdf, limits)
        )
