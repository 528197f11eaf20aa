"""The text-quality check on real writing and on mojibake, side by side with the check before
the script rule was rewritten, in one run.

    .venv/bin/python bench/text_quality.py [--rounds 3]

Rates: of the real texts (tests/data/real_text: 31 languages of GLib's and GTK's Debian
translations, Japanese and Chinese manual pages, SymPy's pretty-printed formulas, chemistry
from ChemPy, periodictable and mendeleev, Python source with identifiers in several scripts;
SOURCES.md there), how many each check refuses, by source;
of the mojibake the classic mistakes make of them (tests/mojibake.py: UTF-8 read as cp1252,
Latin-1, Latin-2 and cp1250; Shift-JIS, GBK, Big5, EUC-KR, cp1251, KOI8-R, cp1253, cp1255,
cp1256 and TIS-620 read as cp1252; a CJK font without a ToUnicode map), how many each refuses,
by mistake. Also the texts users reported refused (issue 25).

Per page: the whole check on the same 200,000 characters of French as one text and as a
document of 50 pages, judged page by page.

Speed: each check over 200,000 characters (the default allowance, all a check reads) of real
text and of mojibake, in CPU time, least of interleaved rounds. The machine is shared: read the
speed columns as a ratio between the two checks.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.previous import module_at  # noqa: E402
from sandbox import quality  # noqa: E402
from sandbox.document import Document, PageBreak, Paragraph  # noqa: E402
from sandbox.limits import ParseLimits  # noqa: E402
from tests.mojibake import REAL_TEXT_DIR, mojibake_samples, read_as, real_samples  # noqa: E402
from tests.sandbox.test_text_quality import MIXED_WRITING  # noqa: E402

_PREVIOUS_COMMIT = "47f72d3"  # the last commit with the first script rule
_ALLOWANCE = 200_000
_PAGES = 50

Check = Callable[[str], list[str]]


def previous_check() -> Check:
    """sandbox/quality.py's text check as it was at :data:`_PREVIOUS_COMMIT`, with the script
    table (sandbox/scripts.py) of then."""
    quality_then = module_at(_PREVIOUS_COMMIT, "sandbox/quality.py")
    quality_then.scripts = module_at(_PREVIOUS_COMMIT, "sandbox/scripts.py")
    check: Check = quality_then._text_problems
    return check


def rates(checks: dict[str, Check]) -> None:
    real = list(real_samples())
    print(f"real texts: {len(real)} samples of {len({s.source for s in real})} sources")
    for name, check in checks.items():
        refused = defaultdict(int)
        for sample in real:
            refused[sample.source] += bool(check(sample.text))
        total = sum(refused.values())
        detail = ", ".join(f"{source} {count}" for source, count in refused.items() if count)
        print(
            f"  {name:9} refuses {total} ({total / len(real):.1%}){': ' + detail if detail else ''}"
        )
    print("\ntexts users reported refused (issue 25), each repeated 8 times:")
    for name, check in checks.items():
        refused = sum(bool(check((text + "\n") * 8)) for text in MIXED_WRITING)
        print(f"  {name:9} refuses {refused} of {len(MIXED_WRITING)}")
    made = list(mojibake_samples())
    print(f"\nmojibake: {len(made)} samples; refused by mistake:")
    by_mistake: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for mistake, sample in made:
        for name, check in checks.items():
            by_mistake[mistake.name][name].append(bool(check(sample.text)))
    print(f"  {'mistake':28} " + " ".join(f"{name:>12}" for name in checks))
    for mistake, outcomes in by_mistake.items():
        cells = " ".join(f"{sum(o)}/{len(o)}".rjust(12) for o in outcomes.values())
        print(f"  {mistake:28} {cells}")
    totals = {name: sum(sum(o[name]) for o in by_mistake.values()) for name in checks}
    cells = " ".join(f"{totals[name] / len(made):12.1%}" for name in checks)
    print(f"  {'all':28} {cells}")


def speed(checks: dict[str, Check], rounds: int) -> None:
    def long(text: str) -> str:
        return (text * (_ALLOWANCE // len(text) + 1))[:_ALLOWANCE]

    french = (REAL_TEXT_DIR / "glib20-fr.txt").read_text()
    japanese = (REAL_TEXT_DIR / "manpages-ja.txt").read_text()
    texts = {
        "French": long(french),
        "Japanese": long(japanese),
        "French, UTF-8 as cp1252": long(read_as(french.encode(), "cp1252")),
        "Japanese, Shift-JIS as cp1252": long(
            read_as(japanese.encode("shift_jis", errors="replace"), "cp1252")
        ),
    }
    print(f"\nCPU s per {_ALLOWANCE:,} characters (least of {rounds} interleaved rounds):")
    print(f"  {'text':30} " + " ".join(f"{name:>9}" for name in checks) + "  ratio")
    for label, text in texts.items():
        best = dict.fromkeys(checks, float("inf"))
        for _ in range(rounds):
            for name, check in checks.items():
                started = time.process_time()
                check(text)
                best[name] = min(best[name], time.process_time() - started)
        cells = " ".join(f"{best[name]:9.3f}" for name in checks)
        print(f"  {label:30} {cells}  {best['today'] / best['previous']:5.2f}")


def paged(rounds: int) -> None:
    """The same 200,000 characters judged as one text and as a document of 50 pages, which is
    judged page by page (the misdecoding check samples each page, the samples together about
    one text's)."""
    french = (REAL_TEXT_DIR / "glib20-fr.txt").read_text()
    page_chars = _ALLOWANCE // _PAGES
    text = (french * (_ALLOWANCE // len(french) + 1))[:_ALLOWANCE]
    pages = [text[i : i + page_chars] for i in range(0, _ALLOWANCE, page_chars)]
    documents = {
        "one text": Document([Paragraph(text)]),
        f"{_PAGES} pages": Document(
            [block for n, page in enumerate(pages, 1) for block in (PageBreak(n), Paragraph(page))]
        ),
    }
    best = dict.fromkeys(documents, float("inf"))
    for _ in range(rounds):
        for name, document in documents.items():
            quality.start_job()
            started = time.process_time()
            quality.judged(document, ParseLimits())
            best[name] = min(best[name], time.process_time() - started)
    print(f"\nthe whole check (judged) on {_ALLOWANCE:,} characters of French, CPU s:")
    for name, seconds in best.items():
        print(f"  {name:30} {seconds:9.3f}")
    print(f"  {'ratio':30} {best[f'{_PAGES} pages'] / best['one text']:9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    checks: dict[str, Check] = {"previous": previous_check(), "today": quality._text_problems}
    rates(checks)
    speed(checks, arguments.rounds)
    paged(arguments.rounds)


if __name__ == "__main__":
    main()
