"""The life of one jailed child after the fork: report ready, take one job, answer, exit.

Single use, so nothing one document does to a parser's state reaches the next; every outcome
leaves as a code (``sandbox/codes.py``) and a message, never an exception object.
See docs/sandbox.md, "Shape".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import NoReturn

from sandbox import codes, pages, prefault, protocol, quality, sniff
from sandbox.document import Document, Notice
from sandbox.extractors.registry import Refusal, lookup, set_progress_sink
from sandbox.jail import ANSWER_FD, JOB_FD
from sandbox.limits import ParseLimits

# Built before any job: when the address-space limit is hit there may be no memory left to
# build an answer, and a child that cannot say "memory" would look like a crash.
_MEMORY_ANSWER = protocol.encode_error_answer(
    codes.MEMORY, "MemoryError", "the parser ran out of memory under the address-space limit"
)


def _read_exact(count: int) -> bytes:
    chunks = []
    while count:
        chunk = os.read(JOB_FD, min(count, 1 << 20))
        if not chunk:
            raise EOFError("the job was cut off")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _read_frame(limit: int | None) -> bytes:
    (length,) = protocol.LENGTH.unpack(_read_exact(protocol.LENGTH.size))
    if limit is not None and length > limit:
        raise ValueError("the job header is larger than allowed")
    return _read_exact(length)


def _write_all(data: bytes) -> None:
    protocol.write_all(ANSWER_FD, data)


class _ProgressFrames:
    """Writes each progress report as a frame ahead of the answer, and remembers the total."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self.total: int | None = None
        self._write = write

    def __call__(self, done: int, total: int) -> None:
        self.total = total
        self._write(protocol.encode_progress(done, total))


def _discard(_frame: bytes) -> None:
    """Where a job run outside a child (a rehearsal, a benchmark) writes its progress."""


def answer(
    header: protocol.JobHeader, payload: bytes, write: Callable[[bytes], None] = _discard
) -> bytes:
    """The encoded answer to one job, its progress frames written with ``write`` ahead of it:
    what a child does with its job, and what a rehearsal or a benchmark runs without one."""
    if lookup(header.kind) is None:
        return protocol.encode_error_answer(
            codes.NO_EXTRACTOR,
            "LookupError",
            f"no extractor is registered for kind {header.kind!r}",
        )
    progress = _ProgressFrames(write)
    set_progress_sink(progress)
    quality.start_job()
    try:
        how = sniff.reading(header.kind, header.media_type, payload, header.limits)
        parse = lookup(how.kind)
        if parse is None:
            raise Refusal(codes.PARSER, f"no extractor is registered for kind {how.kind!r}")
        parsed = parse(header.media_type, payload, how.limits)
        shape = str if how.kind in pages.PARTS_KINDS else Document
        if not isinstance(parsed, shape):
            return protocol.encode_error_answer(
                codes.PARSER,
                "TypeError",
                f"the parser returned {type(parsed).__name__}, not {shape.__name__}",
            )
        if isinstance(parsed, str):
            return protocol.encode_text_answer(parsed, progress.total)
        # Every kind's document is judged here, after its extractor, so none can skip it (a
        # document read in parts is judged whole, by the kind that merges them).
        flag, judged = quality.judged(parsed, how.limits)
        notices = [Notice(text) for text in (flag, how.notice) if text is not None]
        return protocol.encode_document_answer(Document(notices + judged.blocks), progress.total)
    except Refusal as refusal:
        code = refusal.code if refusal.code in codes.REFUSALS else codes.PARSER
        return protocol.encode_error_answer(code, "Refusal", refusal.reason)
    except MemoryError:
        return _MEMORY_ANSWER
    # SystemExit and KeyboardInterrupt included: whatever a parser raises is its verdict on
    # this document, reported and not obeyed.
    except BaseException as exc:  # noqa: BLE001 - a parser is a hostile black box
        return protocol.encode_error_answer(codes.PARSER, type(exc).__name__, str(exc))


def rehearse(samples: Iterable[tuple[str, bytes]]) -> None:
    """Answer each (kind, document) sample, writing nothing: the fork server's rehearsal of a
    job, from which ``sandbox.prefault`` learns the pages a job writes."""
    for kind, payload in samples:
        answer(protocol.JobHeader(kind, "application/octet-stream", ParseLimits()), payload)


def serve(mechanisms: frozenset[str], copy_ahead: prefault.Ranges = ()) -> NoReturn:
    """Announce the jail, copy ahead the pages a job writes while waiting for it, answer the
    job, and exit without running any cleanup.

    ``os._exit`` skips atexit handlers and buffered-file flushes inherited from the fork
    server: they belong to that process, not to this one.
    """
    status = 0
    try:
        _write_all(protocol.encode_ready(mechanisms))
        prefault.copy_until_job(copy_ahead, JOB_FD)
        header = protocol.decode_job_header(_read_frame(protocol.MAX_HEADER_BYTES))
        payload = _read_frame(None)
        try:
            encoded = answer(header, payload, _write_all)
        except MemoryError:
            encoded = _MEMORY_ANSWER  # building the answer itself ran out of memory
        del payload
        _write_all(encoded)
    except MemoryError:
        _write_all(_MEMORY_ANSWER)
    except BaseException:  # noqa: BLE001 - nothing may unwind into the fork server's code
        status = 2
    finally:
        os._exit(status)
