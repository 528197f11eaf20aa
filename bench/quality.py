"""Extraction quality side by side: airlock and the peers it can run, on the corpus, in one run.

    .venv/bin/python bench/quality.py [--in-process] [--speed-only]

For every corpus document with an ``expected`` ground truth, prints the CER (tests/cer.py,
normalised as the corpus's SOURCES.md says) of airlock and of each peer that handles its kind,
then the mean CER per kind and the seconds per page (per document for DOCX and images).
airlock runs through the real sandbox (SandboxRunner, jailed children) unless ``--in-process``
is given, with the page and character ceilings raised so no document is refused by size.

Peers, each skipped (and said so) when missing:
  pdftotext  PDFs          apt-get install poppler-utils
  pypdfium2  PDFs (text)   always: an airlock dependency
  tesseract  images        apt-get install tesseract-ocr (the CLI, --psm 3, like airlock)
  pandoc     DOCX          apt-get install pandoc (-t plain)

The last two tables (also alone with ``--speed-only``) are the cost of the text-layer repairs:
the PDF extractor in-process against pypdf's bare ``extract_text`` of every page (the path
before them) on the corpus PDFs that have a text layer; and the text of a page pypdf misreads,
read by PDFium (``PdfiumPage.text``) against PDFium's bare text of the same page. Interleaved,
in CPU time, least of rounds.

The machine is shared: read the speed columns as ratios between tools on the same run.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pypdfium2
from pypdf import PdfReader

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sandbox.extractors import all as extractors  # noqa: E402
from sandbox.extractors import pdf  # noqa: E402
from sandbox.extractors.pdfium import PdfiumPage  # noqa: E402
from sandbox.extractors.registry import lookup  # noqa: E402
from sandbox.limits import ParseLimits, SandboxLimits  # noqa: E402
from sandbox.runner import SandboxRunner  # noqa: E402
from tests.cer import cer  # noqa: E402
from tests.in_process import rendered_by  # noqa: E402

CORPUS = Path(os.environ.get("AIRLOCK_CORPUS_DIR", REPO.parent / "shared" / "corpus"))
LIMITS = ParseLimits(max_pages=1000, max_text_chars=5_000_000)
KIND = {
    "pdf-text": "pdf",
    "pdf-form": "pdf",
    "pdf-scanned": "pdf",
    "docx": "docx",
    "image": "image",
}
# SOURCES.md: the Japanese reference has full-width brackets where the PDF has vertical forms.
NFKC_SCORED = {"pdfminer_jo-japanese.pdf"}

Tool = Callable[[Path], str]


def _run(command: list[str]) -> str:
    # One OpenMP thread for tesseract, as airlock runs it: the default contends on two cores.
    environment = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    completed = subprocess.run(
        command, capture_output=True, check=True, timeout=600, env=environment
    )
    return completed.stdout.decode()


def _pdftotext(path: Path) -> str:
    return _run(["pdftotext", "-q", "-enc", "UTF-8", str(path), "-"])


def _pypdfium2(path: Path) -> str:
    document = pypdfium2.PdfDocument(path.read_bytes())
    try:
        return "\n\n".join(page.get_textpage().get_text_bounded() for page in document)
    finally:
        document.close()


def _tesseract(path: Path) -> str:
    return _run(["tesseract", str(path), "stdout", "--psm", "3"])


def _pandoc(path: Path) -> str:
    return _run(["pandoc", "-t", "plain", "--wrap=none", str(path)])


def _peers() -> dict[str, tuple[str, Tool]]:
    """Peer name -> (the kind it reads, how to run it), for the peers this machine has."""
    found: dict[str, tuple[str, Tool]] = {}
    for name, kind, tool, present in (
        ("pdftotext", "pdf", _pdftotext, shutil.which("pdftotext")),
        ("pypdfium2", "pdf", _pypdfium2, True),
        ("tesseract", "image", _tesseract, shutil.which("tesseract")),
        ("pandoc", "docx", _pandoc, shutil.which("pandoc")),
    ):
        if present:
            found[name] = (kind, tool)
        else:
            print(f"# {name} not found: skipped (see this script's docstring to install it)")
    return found


def _pages(path: Path, kind: str) -> int:
    if kind != "pdf":
        return 1
    return len(PdfReader(path).pages)


def _airlock(in_process: bool) -> tuple[Callable[[str, Path], str], Callable[[], None]]:
    if in_process:
        extractors.warm_up()

        def direct(kind: str, path: Path) -> str:
            function = lookup(kind)
            assert function is not None
            return rendered_by(function)("application/octet-stream", path.read_bytes(), LIMITS)

        return direct, lambda: None
    runner = SandboxRunner(SandboxLimits(cpu_seconds=600, wall_seconds=900.0), warm_children=1)

    def jailed(kind: str, path: Path) -> str:
        return runner.run(kind, "application/octet-stream", path.read_bytes(), LIMITS).text

    return jailed, runner.close


def _text_layer_speed(documents: list[dict[str, object]], rounds: int = 7) -> None:
    """CPU seconds per page (the least of ``rounds``: the machine is shared), bare pypdf against
    airlock's text path, on text-layer PDFs."""
    function = lookup("pdf")
    assert function is not None
    print(f"{'document':48} {'pages':>5} {'pypdf s/page':>12} {'airlock':>8} {'ratio':>6}")
    bare_total = airlock_total = 0.0
    for document in documents:
        if document["category"] not in ("pdf-text", "pdf-form"):
            continue
        path = CORPUS / str(document["file"])
        payload = path.read_bytes()
        pages = _pages(path, "pdf")
        bare, ours = _least_interleaved(
            functools.partial(_pypdf_text, path),
            functools.partial(function, "application/pdf", payload, LIMITS),
            rounds,
        )
        bare_page, ours_page = bare / pages, ours / pages
        bare_total += bare
        airlock_total += ours
        print(
            f"{path.name:48} {pages:5} {bare_page:12.4f} {ours_page:8.4f} "
            f"{ours_page / bare_page:6.2f}"
        )
    print(f"{'all':48} {'':5} {'':12} {'':8} {airlock_total / bare_total:6.2f}")


def _pdfium_text_speed(documents: list[dict[str, object]], rounds: int = 7) -> None:
    """CPU milliseconds per page (least of ``rounds``), PDFium's bare text range against
    airlock's reading of a page pypdf misreads (``PdfiumPage.text``: the writing direction
    judged, columns read on a vertical page), every text-layer page alone in a PDF of its own
    as PDFium is given it."""
    print(f"{'document':48} {'pages':>5} {'PDFium ms/page':>14} {'airlock':>8} {'ratio':>6}")
    bare_total = airlock_total = 0.0
    for document in documents:
        if document["category"] not in ("pdf-text", "pdf-form"):
            continue
        path = CORPUS / str(document["file"])
        reader = PdfReader(path)
        copies = [pdf._written(pdf._page_alone(reader, page)) for page in reader.pages]
        bare_seconds = ours_seconds = 0.0
        for copy in copies:
            bare, ours = _least_interleaved(
                functools.partial(_bare_pdfium_text, copy),
                functools.partial(_pdfium_page_text, copy),
                rounds,
            )
            bare_seconds += bare
            ours_seconds += ours
        bare_total += bare_seconds
        airlock_total += ours_seconds
        print(
            f"{path.name:48} {len(copies):5} {bare_seconds * 1000 / len(copies):14.2f} "
            f"{ours_seconds * 1000 / len(copies):8.2f} {ours_seconds / bare_seconds:6.2f}"
        )
    print(f"{'all':48} {'':5} {'':14} {'':8} {airlock_total / bare_total:6.2f}")


def _least_interleaved(
    bare: Callable[[], object], ours: Callable[[], object], rounds: int
) -> tuple[float, float]:
    """The least CPU seconds of ``rounds`` calls of each, taken in turn (the machine is
    shared: load from elsewhere only adds)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for work, taken in zip((bare, ours), times, strict=True):
            started = time.process_time()
            work()
            taken.append(time.process_time() - started)
    return min(times[0]), min(times[1])


def _pypdf_text(path: Path) -> str:
    return "\n\n".join(page.extract_text().strip() for page in PdfReader(path).pages)


def _pdfium_page_text(payload: bytes) -> str:
    page = PdfiumPage(payload)
    try:
        return page.text()
    finally:
        page.close()


def _bare_pdfium_text(payload: bytes) -> str:
    document = pypdfium2.PdfDocument(payload)
    page = document[0]
    text_page = page.get_textpage()
    text = str(text_page.get_text_range())
    text_page.close()
    page.close()
    document.close()
    return text


def main() -> None:
    documents = json.loads((CORPUS / "manifest.json").read_text())["documents"]
    if "--speed-only" in sys.argv:
        _text_layer_speed(documents)
        _pdfium_text_speed(documents)
        return
    peers = _peers()
    airlock, close = _airlock("--in-process" in sys.argv)
    scores: dict[tuple[str, str], list[float]] = {}
    seconds: dict[tuple[str, str], list[float]] = {}
    print(f"{'document':48} {'tool':10} {'CER':>6} {'s/page':>7}")
    try:
        for document in documents:
            expected = next(
                (
                    truth["file"]
                    for truth in document["ground_truth"]
                    if truth["role"] == "expected" and truth["file"].endswith(".txt")
                ),
                None,
            )
            if expected is None:
                continue
            path, kind = CORPUS / document["file"], KIND[document["category"]]
            truth = (CORPUS / expected).read_text()
            form = "NFKC" if path.name in NFKC_SCORED else "NFC"
            pages = _pages(path, kind)
            tools: dict[str, Tool] = {"airlock": lambda p, k=kind: airlock(k, p)}
            tools.update({name: tool for name, (reads, tool) in peers.items() if reads == kind})
            for name, tool in tools.items():
                started = time.perf_counter()
                try:
                    text = tool(path)
                except Exception as exc:  # noqa: BLE001 - a peer's failure is a row, not a stop
                    print(f"{path.name:48} {name:10} failed: {str(exc)[:60]}")
                    text = ""
                per_page = (time.perf_counter() - started) / pages
                score = cer(truth, text, form)
                scores.setdefault((kind, name), []).append(score)
                seconds.setdefault((kind, name), []).append(per_page)
                print(f"{path.name:48} {name:10} {score:6.3f} {per_page:7.3f}")
    finally:
        close()
    print()
    print(f"{'kind':6} {'tool':10} {'files':>5} {'mean CER':>9} {'max CER':>8} {'s/page':>7}")
    for (kind, name), values in sorted(scores.items()):
        speed = statistics.median(seconds[(kind, name)])
        print(
            f"{kind:6} {name:10} {len(values):5} {statistics.mean(values):9.3f} "
            f"{max(values):8.3f} {speed:7.3f}"
        )
    print()
    _target(scores, documents)
    print()
    _text_layer_speed(documents)
    _pdfium_text_speed(documents)


def _target(scores: dict[tuple[str, str], list[float]], documents: list[dict[str, object]]) -> None:
    """Per PDF: airlock's CER against the best of pdftotext and pypdfium2 plus 0.01."""
    order = [
        str(document["file"])
        for document in documents
        if KIND[str(document["category"])] == "pdf"
        and any(truth["role"] == "expected" for truth in document["ground_truth"])
    ]
    peers = [name for kind, name in scores if kind == "pdf" and name != "airlock"]
    if not peers:
        return
    print(f"{'PDF':48} {'airlock':>7} {'best peer':>9} {'target':>6}")
    for index, name in enumerate(order):
        ours = scores[("pdf", "airlock")][index]
        best = min(scores[("pdf", peer)][index] for peer in peers)
        verdict = "met" if ours <= best + 0.01 else "MISSED"
        print(f"{name:48} {ours:7.3f} {best:9.3f} {verdict:>6}")


if __name__ == "__main__":
    main()
