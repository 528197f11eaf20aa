"""What OCR costs through airlock against tesseract alone, per page, side by side in one run.

    .venv/bin/python bench/ocr_bench.py [--rounds 3]

For each page kind: the CPU of one sandboxed job (this process, the fork server and every
process it reaped: the child, tesseract) against ``tesseract stdin stdout`` run alone, with
airlock's arguments, on the exact image airlock hands it; and the extractor in-process, which
splits what airlock adds into the parser's share and the sandbox's. Rounds alternate between
the three, and each is the least of its rounds (load from elsewhere only adds).
Target: airlock <= 1.10x tesseract alone.

Pages, all the corpus's real scans: "letter" is ``tesseract_unlv_8087_054.3B.tif`` (a dense
bilevel letter page at 300 dpi) as its TIFF, as a grey PNG, and as a 300-dpi JPEG page of a
scanned PDF (Pillow's PDF writer, as tests/scanned_pdfs.py makes one); "short" is
``tesseract_eurotext.tif`` (a few lines at 300 dpi), where a fixed cost shows most; "A4" is
``docling_ocr_test-scanned.pdf`` (a 600-dpi Flate grey image, rendered at 300 dpi).

The machine is shared and tesseract's own time wanders by 10 % between runs of one image:
read the ratios, and rerun when one looks off.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from sandbox_bench import _tree_cpu_seconds, _zygote_pids  # noqa: E402

from sandbox import policy  # noqa: E402
from sandbox.extractors import all as extractors  # noqa: E402
from sandbox.extractors import ocr  # noqa: E402
from sandbox.extractors.registry import lookup  # noqa: E402
from sandbox.limits import ParseLimits  # noqa: E402
from sandbox.runner import SandboxRunner  # noqa: E402
from tests.scanned_pdfs import image_page  # noqa: E402

CORPUS = Path(os.environ.get("AIRLOCK_CORPUS_DIR", REPO.parent / "shared" / "corpus"))
LIMITS = ParseLimits()
TARGET = 1.10
assert extractors  # registers every extractor


@dataclass(frozen=True)
class Page:
    name: str
    kind: str
    media_type: str
    payload: bytes


def pages() -> list[Page]:
    letter = CORPUS / "tesseract_unlv_8087_054.3B.tif"
    short = CORPUS / "tesseract_eurotext.tif"
    with Image.open(letter) as scan:
        grey = io.BytesIO()
        scan.convert("L").save(grey, format="PNG")
    return [
        Page("letter: TIFF, bilevel, 300 dpi", "image", "image/tiff", letter.read_bytes()),
        Page("letter: PNG, grey", "image", "image/png", grey.getvalue()),
        Page("letter: PDF, JPEG 300 dpi", "pdf", "application/pdf", image_page(letter)),
        Page("short: TIFF, bilevel, 300 dpi", "image", "image/tiff", short.read_bytes()),
        Page("short: PDF, JPEG 300 dpi", "pdf", "application/pdf", image_page(short)),
        Page(
            "A4: PDF, Flate 600 dpi",
            "pdf",
            "application/pdf",
            (CORPUS / "docling_ocr_test-scanned.pdf").read_bytes(),
        ),
    ]


@contextmanager
def tesseract_inputs() -> Iterator[list[tuple[bytes, list[str]]]]:
    """What the extractor hands tesseract while the block runs: each image and its arguments."""
    handed: list[tuple[bytes, list[str]]] = []
    run = ocr._tesseract

    def spy(image: bytes, arguments: list[str]) -> subprocess.CompletedProcess[bytes]:
        handed.append((image, arguments))
        return run(image, arguments)

    ocr._tesseract = spy
    try:
        yield handed
    finally:
        ocr._tesseract = run


def _own_cpu() -> float:
    mine = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + reaped.ru_utime + reaped.ru_stime


def _settled_tree_cpu(pids: list[int]) -> float:
    """The CPU of this process and the fork server's tree, once the server has reaped the last
    child (its time then moves into the server's totals)."""
    time.sleep(0.3)
    return _tree_cpu_seconds(pids)


def measure(page: Page, runner: SandboxRunner, rounds: int) -> dict[str, float]:
    parse = lookup(page.kind)
    assert parse is not None
    with tesseract_inputs() as handed:
        parse(page.media_type, page.payload, LIMITS)
    if len(handed) != 1:
        raise SystemExit(f"{page.name}: tesseract ran {len(handed)} times, not once")
    image, arguments = handed[0]
    env = {**os.environ, **policy.THREAD_ENV}

    def alone() -> float:
        before = _own_cpu()
        subprocess.run(
            ["tesseract", "stdin", "stdout", *arguments],
            input=image,
            capture_output=True,
            check=True,
            env=env,
        )
        return _own_cpu() - before

    def in_process() -> float:
        before = _own_cpu()
        parse(page.media_type, page.payload, LIMITS)
        return _own_cpu() - before

    runner.run(page.kind, page.media_type, page.payload)  # a warm child for the first round
    pids = _zygote_pids()

    def sandboxed() -> float:
        before = _settled_tree_cpu(pids)
        runner.run(page.kind, page.media_type, page.payload)
        return _settled_tree_cpu(pids) - before

    variants: dict[str, Callable[[], float]] = {
        "alone": alone,
        "in-process": in_process,
        "airlock": sandboxed,
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, variant in variants.items():
            samples[name].append(variant())
    return {name: min(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="the pages whose name contains this")
    args = parser.parse_args()
    print(f"OCR per page, CPU seconds, least of {args.rounds} interleaved rounds")
    print(
        f"{'page':31} {'tesseract':>9} {'in-process':>10} {'airlock':>8} "
        f"{'airlock/tesseract':>17} {'of which sandbox':>16}"
    )
    worst = 0.0
    with SandboxRunner(warm_children=1) as runner:
        for page in [page for page in pages() if args.only in page.name]:
            cpu = measure(page, runner, args.rounds)
            ratio = cpu["airlock"] / cpu["alone"]
            worst = max(worst, ratio)
            print(
                f"{page.name:31} {cpu['alone']:9.3f} {cpu['in-process']:10.3f} "
                f"{cpu['airlock']:8.3f} {ratio:16.3f}x {cpu['airlock'] - cpu['in-process']:15.3f}s"
            )
    print(f"worst page: {worst:.3f}x   (target: <= {TARGET:.2f}x)")


if __name__ == "__main__":
    main()
