"""What the typed document costs at the boundary, side by side in one run.

    .venv/bin/python bench/document_bench.py [--rounds N]

For every corpus PDF with a text layer and every DOCX, the document each parser answers (read
in-process, once) crosses the boundary two ways: as a typed document (the child encodes and
checks it against the schema; the parent decodes it strictly and renders it) and as the
rendered text alone (the answer shape before the typed document). Printed: the answer's bytes
both ways and the CPU of each side, the least of N rounds, with the ratio of the totals. The
machine is shared: read the columns as ratios.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sandbox import protocol  # noqa: E402
from sandbox.document import Document  # noqa: E402
from sandbox.extractors import all as extractors  # noqa: E402
from sandbox.extractors.registry import lookup  # noqa: E402
from sandbox.limits import ParseLimits  # noqa: E402
from sandbox.render import render  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
LIMITS = ParseLimits(max_pages=500, max_text_chars=2_000_000)
KINDS = {"pdf-text": "pdf", "pdf-form": "pdf", "docx": "docx"}


def _least(work: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 20
    extractors.warm_up()
    documents = json.loads((CORPUS / "manifest.json").read_text())["documents"]
    print(f"{'document':48} {'bytes doc':>9} {'text':>8} {'ms doc':>7} {'text':>6}")
    typed_total = text_total = 0.0
    for entry in documents:
        kind = KINDS.get(entry["category"])
        if kind is None:
            continue
        parse = lookup(kind)
        assert parse is not None
        document = parse("application/octet-stream", (CORPUS / entry["file"]).read_bytes(), LIMITS)
        assert isinstance(document, Document)
        text = render(document)
        typed_body = protocol.encode_document_answer(document, None)[protocol.LENGTH.size :]
        text_body = protocol.encode_text_answer(text, None)[protocol.LENGTH.size :]

        def typed(document: Document = document, body: bytes = typed_body) -> None:
            protocol.encode_document_answer(document, None)
            answer = protocol.decode_answer(body, parts=False)
            assert isinstance(answer, protocol.DocumentAnswer)
            render(answer.document)

        def flat(text: str = text, body: bytes = text_body) -> None:
            protocol.encode_text_answer(text, None)
            protocol.decode_answer(body, parts=True)

        typed_seconds, text_seconds = _least(typed, rounds), _least(flat, rounds)
        typed_total += typed_seconds
        text_total += text_seconds
        print(
            f"{entry['file'][:48]:48} {len(typed_body):9} {len(text_body):8} "
            f"{typed_seconds * 1000:7.2f} {text_seconds * 1000:6.2f}"
        )
    print(
        f"{'all':48} {'':9} {'':8} {typed_total * 1000:7.2f} {text_total * 1000:6.2f}"
        f"   typed / text: {typed_total / text_total:.2f}x"
    )


if __name__ == "__main__":
    main()
