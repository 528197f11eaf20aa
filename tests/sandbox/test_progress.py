"""Page progress travels from the child as frames ahead of the answer, and is checked like one.

Progress is what lets a caller tell a long OCR job from a stuck one; it also comes from the
child, so a parser that forges or floods progress frames must end in a typed outcome.
"""

from __future__ import annotations

import json
import re
import struct
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from sandbox.errors import MalformedAnswer, OutputTooLarge
from sandbox.limits import MIB, SandboxLimits
from sandbox.progress import ProgressGate
from sandbox.protocol import MAX_COUNT, Progress
from sandbox.runner import SandboxRunner
from tests.sandbox.probes import PROBE_MODULES

LIMITS = SandboxLimits(
    memory_bytes=512 * MIB, cpu_seconds=10, wall_seconds=30.0, output_bytes=16384
)


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(LIMITS, warm_children=1, modules=PROBE_MODULES) as sandbox:
        yield sandbox


def _frame(body: object) -> bytes:
    encoded = json.dumps(body).encode()
    return struct.pack("!I", len(encoded)) + encoded


def _answer(text: str, pages: int | None) -> bytes:
    """A child's answer of one paragraph, framed as the child frames it."""
    paragraph = {"block": "paragraph", "text": text}
    return _frame({"ok": True, "document": {"blocks": [paragraph]}, "pages": pages})


def _moves_forward(heard: list[tuple[int, int]]) -> bool:
    return all(earlier[0] < later[0] for earlier, later in pairwise(heard))


def test_pdf_pages_are_reported_first_and_last(runner: SandboxRunner, corpus_dir: Path) -> None:
    """The first page is heard at once and the last when the answer arrives; pages in between
    only as the one-second interval allows."""
    heard: list[tuple[int, int]] = []
    payload = (corpus_dir / "docling_multi_page.pdf").read_bytes()
    result = runner.run(
        "pdf", "application/pdf", payload, on_progress=lambda d, t: heard.append((d, t))
    )
    assert heard[0] == (1, 5) and heard[-1] == (5, 5) and _moves_forward(heard)
    assert set(heard) <= {(done, 5) for done in range(1, 6)}
    assert result.pages == 5


def test_an_ocr_frame_is_reported(runner: SandboxRunner, corpus_dir: Path) -> None:
    heard: list[tuple[int, int]] = []
    payload = (corpus_dir / "tesseract_phototest.tif").read_bytes()
    result = runner.run(
        "image", "image/tiff", payload, on_progress=lambda d, t: heard.append((d, t))
    )
    assert heard == [(1, 1)] and result.pages == 1
    assert "The quick brown dog" in result.text


@pytest.mark.parametrize(
    "forged",
    [
        {"progress": [3, 2]},  # done past total
        {"progress": [1, 2], "ok": True},  # extra key
        {"progress": [-1, 2]},
        {"progress": [1.0, 2]},
        {"progress": "1/2"},
        {"progress": [MAX_COUNT + 1, MAX_COUNT + 1]},
    ],
)
def test_a_forged_progress_frame_is_malformed(runner: SandboxRunner, forged: object) -> None:
    answer = _answer("after", None)
    with pytest.raises(MalformedAnswer):
        runner.run("probe-raw-answer", "x", _frame(forged) + answer)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # Python refuses to convert more than 4,300 digits with a bare ValueError.
        (b'{"progress": [1, 1%s]}' % (b"0" * 4999), "more than 7 digits"),
        (b'{"progress": [1, 1%s]}' % (b"0" * 4000), "more than 7 digits"),
        (b'{"progress":[1,2]}', 'exactly {"progress": [done, total]}'),
        (b'{"progress": [01, 2]}', "JSONDecodeError"),
    ],
)
def test_a_progress_frame_not_as_the_child_encodes_it_is_malformed(
    runner: SandboxRunner, body: bytes, message: str
) -> None:
    answer = _answer("after", None)
    raw = struct.pack("!I", len(body)) + body + answer
    with pytest.raises(MalformedAnswer, match=re.escape(message)):
        runner.run("probe-raw-answer", "x", raw)


def test_a_flood_of_progress_frames_hits_the_output_cap(runner: SandboxRunner) -> None:
    flood = _frame({"progress": [1, 2]}) * 2000
    with pytest.raises(OutputTooLarge, match="announced 20 bytes after 16368 bytes of progress"):
        runner.run("probe-raw-answer", "x", flood + _answer("t", 1))


def test_progress_that_fills_the_cap_exactly_leaves_no_room_for_an_answer(
    runner: SandboxRunner,
) -> None:
    exact = _frame({"progress": [1, 2]}) * 674 + _frame({"progress": [10, 20]}) * 8
    assert len(exact) == LIMITS.output_bytes
    with pytest.raises(OutputTooLarge, match="filled the 16384-byte output limit without an"):
        runner.run("probe-raw-answer", "x", exact + _answer("t", 1))


def test_length_prefixes_count_against_the_output_cap(runner: SandboxRunner) -> None:
    """681 progress frames hold 13,620 bytes of bodies and 2,724 of prefixes: with the answer
    the bodies fit in 16,384 bytes, the frames do not."""
    answer = _answer("t", 1)
    flood = _frame({"progress": [1, 2]}) * 681
    assert 681 * 20 + len(answer) - 4 <= LIMITS.output_bytes < len(flood) + len(answer)
    announced = f"announced {len(answer) - 4} bytes after 16344 bytes of progress"
    with pytest.raises(OutputTooLarge, match=announced):
        runner.run("probe-raw-answer", "x", flood + answer)


def test_an_answer_that_fills_the_cap_with_its_prefix_is_too_large(runner: SandboxRunner) -> None:
    text = "x" * (LIMITS.output_bytes - len(_answer("", None)) + 1)
    with pytest.raises(OutputTooLarge, match="the output limit is 16384 bytes"):
        runner.run("probe-echo", "x", text.encode())
    assert runner.run("probe-echo", "x", text[1:].encode()).text == text[1:]


def test_repeated_or_backward_progress_is_not_heard_again(runner: SandboxRunner) -> None:
    heard: list[tuple[int, int]] = []
    frames = [_frame({"progress": [done, 5]}) for done in (2, 2, 1, 0, 2)]
    answer = _answer("done", 5)
    result = runner.run(
        "probe-raw-answer",
        "x",
        b"".join(frames) + answer,
        on_progress=lambda d, t: heard.append((d, t)),
    )
    assert heard == [(2, 5)] and result.text == "done"


@pytest.fixture(scope="module")
def roomy_runner() -> Iterator[SandboxRunner]:
    """The production output limit (4 MiB), room for about 120,000 progress frames."""
    roomy = SandboxLimits(memory_bytes=512 * MIB, cpu_seconds=20, wall_seconds=60.0)
    with SandboxRunner(roomy, warm_children=1, modules=PROBE_MODULES) as sandbox:
        yield sandbox


def _progress_flood(room: int) -> bytes:
    """Progress frames, each a page further than the last, filling ``room`` bytes."""
    frames = []
    used = 0
    for done in range(1, MAX_COUNT + 1):
        frame = _frame({"progress": [done, MAX_COUNT]})
        if used + len(frame) > room:
            break
        frames.append(frame)
        used += len(frame)
    return b"".join(frames)


def test_a_progress_flood_is_heard_at_most_once_a_second(roomy_runner: SandboxRunner) -> None:
    """Each frame moves forward, so only the interval holds them back; the job still answers,
    and the last progress is heard when it does."""
    answer = _answer("after the flood", 3)
    flood = _progress_flood(roomy_runner.limits.output_bytes - len(answer))
    assert flood.count(b'{"progress"') > 100_000
    heard: list[tuple[int, int]] = []
    started = time.monotonic()
    result = roomy_runner.run(
        "probe-raw-answer", "x", flood + answer, on_progress=lambda d, t: heard.append((d, t))
    )
    elapsed = time.monotonic() - started
    assert result.text == "after the flood"
    assert 2 <= len(heard) <= elapsed + 2
    assert heard[0] == (1, MAX_COUNT) and _moves_forward(heard)
    assert heard[-1] == (flood.count(b'{"progress"'), MAX_COUNT)


def test_valid_progress_before_a_raw_answer_is_heard(runner: SandboxRunner) -> None:
    heard: list[tuple[int, int]] = []
    frames = _frame({"progress": [1, 2]}) + _answer("done", 2)
    result = runner.run(
        "probe-raw-answer", "x", frames, on_progress=lambda d, t: heard.append((d, t))
    )
    assert heard == [(1, 2)] and result.text == "done" and result.pages == 2


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_gate_delivers_at_once_then_once_per_interval_then_the_held_back_last() -> None:
    clock = _Clock()
    heard: list[tuple[int, int]] = []
    gate = ProgressGate(lambda d, t: heard.append((d, t)), interval=1.0, clock=clock)
    gate.offer(Progress(1, 9))
    gate.offer(Progress(2, 9))
    clock.now += 0.5
    gate.offer(Progress(3, 9))
    assert heard == [(1, 9)]
    clock.now += 0.5
    gate.offer(Progress(4, 9))
    gate.offer(Progress(5, 9))
    assert heard == [(1, 9), (4, 9)]
    gate.flush()
    gate.flush()
    assert heard == [(1, 9), (4, 9), (5, 9)]


def test_the_gate_drops_repeats_and_steps_back_even_after_the_interval() -> None:
    clock = _Clock()
    heard: list[tuple[int, int]] = []
    gate = ProgressGate(lambda d, t: heard.append((d, t)), interval=1.0, clock=clock)
    gate.offer(Progress(0, 9))  # nothing done yet is nothing to tell
    gate.offer(Progress(3, 9))
    clock.now += 5
    gate.offer(Progress(3, 9))
    gate.offer(Progress(2, 9))
    gate.flush()
    assert heard == [(3, 9)]
