"""The marker judge's cost, side by side with the judge it replaced, and its false positives.

    .venv/bin/python bench/marker_judge.py [--megabytes 10] [--rounds 5]

Speed: ``escape_markers`` over a text of the given size, built from the corpus's expected texts
(every script the corpus has) repeated, in CPU time, least of interleaved rounds, for today's
judge and for the ASCII judge of commit dce71e1 (loaded from git, not kept in the tree).

False positives: the corpus lines (``/work/shared/corpus/*.expected.txt``) each judge escapes,
with the count of lines and the share; none of them is a real marker, so every escape is one.

The machine is shared: read the speed columns as a ratio between the two judges.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.previous import module_at  # noqa: E402
from bridge.knowledge import markers  # noqa: E402
from tests.conftest import CORPUS_DIR  # noqa: E402

_PREVIOUS_COMMIT = "dce71e1"  # the last commit with the ASCII judge


def previous_judge() -> types.ModuleType:
    """bridge/knowledge/markers.py as it was at :data:`_PREVIOUS_COMMIT`, as a module."""
    return module_at(_PREVIOUS_COMMIT, "bridge/knowledge/markers.py")


def corpus_lines() -> list[tuple[str, str]]:
    """(file name, line) of every line of the corpus's expected texts."""
    return [
        (path.name, line)
        for path in sorted(CORPUS_DIR.glob("*.expected.txt"))
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
    ]


def cpu_seconds(run: Callable[[], object]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    previous = previous_judge()
    lines = corpus_lines()
    sample = "\n".join(line for _, line in lines) + "\n"
    text = sample * max(1, int(arguments.megabytes * 1_000_000 / len(sample.encode())))
    size = len(text.encode())
    judges: dict[str, Callable[[str], str]] = {
        "previous (ASCII)": previous.escape_markers,
        "today": markers.escape_markers,
    }
    best = dict.fromkeys(judges, float("inf"))
    for _ in range(arguments.rounds):
        for name, escape in judges.items():
            best[name] = min(best[name], cpu_seconds(functools.partial(escape, text)))
    print(f"escape_markers over {size / 1e6:.1f} MB, {text.count(chr(10))} lines, CPU s:")
    for name, seconds in best.items():
        print(f"  {name:18} {seconds:7.3f} s  {size / seconds / 1e6:7.1f} MB/s")
    print(f"  ratio today / previous: {best['today'] / best['previous (ASCII)']:.2f}")
    print(f"\nfalse positives on {len(lines)} corpus lines ({CORPUS_DIR}):")
    for name, judge in (("previous", previous.reads_as_marker), ("today", markers.reads_as_marker)):
        escaped = [(file, line) for file, line in lines if judge(line)]
        print(f"  {name}: {len(escaped)} lines ({len(escaped) / len(lines):.3%})")
        for file, line in escaped:
            print(f"    {file}: {line[:90]!r}")


if __name__ == "__main__":
    main()
