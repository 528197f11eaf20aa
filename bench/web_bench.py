"""Web pages, EPUB books, e-mail, notebooks and code side by side: airlock, markitdown, pandoc
and trafilatura, in one run.

    AIRLOCK_PEERS_PYTHON=<python with markitdown, pypandoc_binary, trafilatura> \\
        .venv/bin/python bench/web_bench.py [--rounds N]

Two tables:

1. **Quality**, per corpus file with a ground truth: the character error rate against
   it (tests/cer.py's normalisation, then lower-cased: the books' truth upper-cases headings)
   and the share of the truth's lines found in the output (whitespace collapsed); the novels
   (680,000 characters) by their lines only, Levenshtein's distance being quadratic. The
   Wikipedia reference is Readability's article only: its CER charges every whole-page reader
   for the menus, so read its line recall. The e-mail truths are the body only (airlock's
   header lines count against it); code and data truths are the file itself (airlock's fence
   lines count against it). A peer without a reader shows ``—``.
2. **CPU**, least of ``--rounds``: the Wikipedia page (244 KB) and the EPUB 2 novel
   (388 KB zipped, 680,000 characters). airlock in-process (extractor and renderer) and
   through the sandbox (wall time of a job on a warm child); the peers as in
   bench/office_bench.py (markitdown timed inside its interpreter, pandoc as a process);
   trafilatura (main-content extraction, tables kept) timed inside its interpreter.

The machine is shared: read the CPU columns as ratios between tools on the same run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import office_bench  # noqa: E402

from sandbox.extractors import all as extractors  # noqa: E402
from sandbox.limits import SandboxLimits  # noqa: E402
from sandbox.runner import SandboxRunner  # noqa: E402
from tests.cer import cer  # noqa: E402

CORPUS = office_bench.CORPUS
# (file, airlock's kind and media type, its truth)
FILES = (
    ("readability_ietf-1.html", "html", "text/html", "readability_ietf-1.expected.txt"),
    ("pango_shift-jis.html", "html", "text/html", "pango_shift-jis.expected.txt"),
    (
        "readability_wikipedia.html",
        "html",
        "text/html",
        "readability_wikipedia.reference.txt",
    ),
    (
        "bitextual_bovary-english-epub2.epub",
        "epub",
        "application/epub+zip",
        "bitextual_bovary-english-epub2.expected.txt",
    ),
    (
        "bitextual_bovary-english-epub3.epub",
        "epub",
        "application/epub+zip",
        "bitextual_bovary-english-epub3.expected.txt",
    ),
    ("tika_testEPUB.epub", "epub", "application/epub+zip", ""),
    (
        "mail-mime-parser_m0001.eml",
        "email",
        "message/rfc822",
        "mail-mime-parser_m0001.expected.txt",
    ),
    (
        "mail-mime-parser_m1005.eml",
        "email",
        "message/rfc822",
        "mail-mime-parser_m1005.expected.txt",
    ),
    ("nbformat_test4.ipynb", "text", "application/x-ipynb+json", "nbformat_test4.expected.txt"),
    ("nbformat_test3.ipynb", "text", "application/x-ipynb+json", "nbformat_test3.expected.txt"),
    ("tika_testXML.xml", "text", "application/xml", "tika_testXML.expected.txt"),
    ("python-pptx_text.py", "text", "text/x-python", "python-pptx_text.expected.txt"),
    ("marked_gfm.0.29.json", "text", "application/json", "marked_gfm.0.29.expected.txt"),
)
#: Levenshtein's distance is quadratic: a novel's CER would take hours, so a truth longer than
#: this is scored by its lines only.
_MAX_CER_CHARS = 100_000
TIMED = ("readability_wikipedia.html", "bitextual_bovary-english-epub2.epub")

_TRAFILATURA_DRIVER = textwrap.dedent(
    """
    import sys, time
    import trafilatura
    path, rounds = sys.argv[1], int(sys.argv[2])
    page = open(path, "rb").read()
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        text = trafilatura.extract(page, include_tables=True, include_comments=False) or ""
        best = min(best, time.process_time() - started)
    sys.stdout.write(f"{best!r}\\n{text}")
    """
)


def _trafilatura() -> office_bench.Peer | None:
    python = os.environ.get("AIRLOCK_PEERS_PYTHON")
    probe = [python or "", "-c", "import trafilatura"]
    if not python or subprocess.run(probe, check=False).returncode != 0:
        print("# trafilatura not found: skipped")
        return None
    driver = Path(tempfile.mkdtemp()) / "trafilatura_driver.py"
    driver.write_text(_TRAFILATURA_DRIVER)

    def run(path: Path, rounds: int) -> tuple[float, str]:
        if path.suffix != ".html":
            raise LookupError("not read")
        completed = subprocess.run(
            [python, str(driver), str(path), str(rounds)], capture_output=True, check=True
        )
        best, _, text = completed.stdout.decode().partition("\n")
        return float(best), text

    return run


def _lines_found(truth: str, output: str) -> float:
    flat = " ".join(output.split()).lower()
    lines = [" ".join(line.split()).lower() for line in truth.splitlines() if line.strip()]
    return sum(line in flat for line in lines) / len(lines)


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    extractors.warm_up()
    peers = office_bench._peers()
    if (trafilatura := _trafilatura()) is not None:
        peers["trafilatura"] = trafilatura
    print("\nQuality: CER (lower is better) / share of the truth's lines found")
    print(f"{'file':38} {'airlock':>13}" + "".join(f" {name:>13}" for name in peers))
    for name, kind, media_type, truth_name in FILES:
        if not truth_name:
            continue  # timed only
        path = CORPUS / name
        truth = (CORPUS / truth_name).read_text()
        _, text = office_bench._airlock_in_process(kind, media_type, path, 1)
        line = f"{name:38} {_score(truth, text):>13}"
        for peer in peers.values():
            try:
                _, output = peer(path, 1)
                line += f" {_score(truth, output):>13}"
            except LookupError:
                line += f" {'—':>13}"
            except subprocess.CalledProcessError:
                line += f" {'fail':>13}"
        print(line)
    with SandboxRunner(
        SandboxLimits(cpu_seconds=600, wall_seconds=900.0, memory_bytes=4 << 30),
        warm_children=1,
    ) as runner:
        print(f"\nCPU, ms (least of {rounds} rounds)")
        print(f"{'file':38} {'airlock':>9} {'jailed*':>9}" + "".join(f" {n:>12}" for n in peers))
        for name in TIMED:
            kind, media_type = next((kind, media) for file, kind, media, _ in FILES if file == name)
            path = CORPUS / name
            own, _ = office_bench._airlock_in_process(kind, media_type, path, rounds)
            jailed = office_bench._airlock_jailed(runner, kind, media_type, path, rounds)
            line = f"{name:38} {own * 1e3:>9.1f} {jailed * 1e3:>9.1f}"
            for peer in peers.values():
                try:
                    cpu, _ = peer(path, rounds)
                    line += f" {cpu * 1e3:>12.1f}"
                except LookupError:
                    line += f" {'—':>12}"
            print(line)
        print("* wall time of a sandbox job on a warm child")


def _score(truth: str, output: str) -> str:
    found = f"{_lines_found(truth, output):.2f}"
    if len(truth) > _MAX_CER_CHARS:
        return f"— / {found}"
    return f"{cer(truth.lower(), output.lower()):.3f} / {found}"


if __name__ == "__main__":
    main()
