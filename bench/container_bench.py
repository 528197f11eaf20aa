"""What reading a container's files apart costs, side by side in one run.

    .venv/bin/python bench/container_bench.py [--rounds N]

An e-mail's or a ZIP's files are read each in a child of its own after one more child unpacks
them (docs/sandbox.md, "Attachments"). This compares, on the same warm sandbox:

- a message with a PDF and a DOCX attached, read with its files (``Unpacking``: the message's
  text, its unpacking and two files, four children), against the message's own text plus the
  two files uploaded beside it (three children): the unpacking's cost;
- the same for a ZIP of the two files (an archive has no own text: three children against two);
- a message with no attachment, through ``Unpacking`` and alone: what a message without files
  pays for being able to carry them.

The least wall time of ``--rounds`` runs of each. The machine is shared: read the ratios.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import zipfile
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bridge.knowledge.attachments import (  # noqa: E402
    AttachmentRef,
    AttachmentSource,
    ExtractionLimits,
    TextExtractor,
)
from bridge.knowledge.contracts import ContextRequest  # noqa: E402
from bridge.knowledge.enclosures import Unpacking  # noqa: E402
from sandbox.extractor import SandboxExtractor  # noqa: E402

CORPUS = Path(os.environ.get("AIRLOCK_CORPUS_DIR", REPO.parent / "shared" / "corpus"))
PDF = (CORPUS / "pypdf-samples_google-doc-document.pdf").read_bytes()
DOCX = (CORPUS / "docling_word_sample.docx").read_bytes()
LIMITS = ExtractionLimits(max_total_chars=500_000)
REQUEST = ContextRequest("bench")


def _message(*files: tuple[str, bytes]) -> bytes:
    message = EmailMessage()
    message["From"] = "Ann <ann@example.com>"
    message["Subject"] = "Q3"
    message.set_content("The reports are attached.\n" * 5)
    for name, data in files:
        message.add_attachment(data, "application", "octet-stream", filename=name)
    return message.as_bytes()


def _zip(*files: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            archive.writestr(name, data)
    return buffer.getvalue()


def _least(rounds: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    sandbox = SandboxExtractor()
    unpacking = Unpacking(sandbox, LIMITS)
    files = (("report.pdf", PDF), ("minutes.docx", DOCX))
    refs = {
        "pdf": AttachmentRef("report.pdf", "pdf", "application/pdf", PDF),
        "docx": AttachmentRef("minutes.docx", "docx", "application/octet-stream", DOCX),
    }
    body_only = AttachmentRef("m.eml", "email", "message/rfc822", _message())

    def select(extractor: TextExtractor, *chosen: AttachmentRef) -> Callable[[], object]:
        return lambda: AttachmentSource(chosen, extractor, LIMITS).select(REQUEST)

    cases = [
        (
            "message + PDF + DOCX",
            select(unpacking, AttachmentRef("m.eml", "email", "message/rfc822", _message(*files))),
            select(
                sandbox,
                AttachmentRef("m.eml", "email", "message/rfc822", _message()),
                *refs.values(),
            ),
        ),
        (
            "ZIP of PDF + DOCX",
            select(unpacking, AttachmentRef("b.zip", "archive", "application/zip", _zip(*files))),
            select(sandbox, *refs.values()),
        ),
        ("message, no files", select(unpacking, body_only), select(sandbox, body_only)),
    ]
    for _, with_files, apart in cases:  # warm the fork server and every parser path
        with_files()
        apart()
    print(f"{'case':<24}{'read apart (ms)':>18}{'uploaded apart (ms)':>22}{'ratio':>8}")
    for name, with_files, apart in cases:
        unpacked = _least(rounds, with_files)
        separate = _least(rounds, apart)
        print(
            f"{name:<24}{unpacked * 1e3:>18.1f}{separate * 1e3:>22.1f}{unpacked / separate:>8.2f}"
        )


if __name__ == "__main__":
    main()
