"""Source code, configuration and data files: kept as written, inside a fence naming the
language, so a model reads them as code rather than as prose or as instructions.

The language comes from the media type the caller declared (the bridge names it by the file's
extension, bridge/knowledge/kinds.py). JSON is checked: a minified document (one line longer
than :data:`_MINIFIED_LINE`) is laid out with an indent, because a model reads a 2 MB line
badly, and JSON that does not parse is kept as written under a notice saying so. Nothing else
is parsed: YAML, TOML and XML are shown, never loaded, so no tag, entity or anchor of theirs is
ever expanded. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from sandbox.document import INVISIBLE, Block, Notice, Paragraph

if TYPE_CHECKING:  # the text extractor, which decodes the text, owns the budget and calls this
    from sandbox.extractors.text import TextBudget

#: The fence's language label by declared media type.
LANGUAGES = {
    "application/json": "json",
    "application/ld+json": "json",
    "application/yaml": "yaml",
    "application/x-yaml": "yaml",
    "text/yaml": "yaml",
    "application/toml": "toml",
    "application/xml": "xml",
    "text/xml": "xml",
    "text/x-python": "python",
    "text/x-java": "java",
    "text/javascript": "javascript",
    "application/javascript": "javascript",
    "application/typescript": "typescript",
    "text/x-c": "c",
    "text/x-c++": "cpp",
    "text/x-csharp": "csharp",
    "text/x-go": "go",
    "text/x-rust": "rust",
    "text/x-ruby": "ruby",
    "text/x-php": "php",
    "text/x-kotlin": "kotlin",
    "text/x-swift": "swift",
    "text/x-scala": "scala",
    "text/x-r": "r",
    "text/x-lua": "lua",
    "text/x-perl": "perl",
    "application/x-sh": "sh",
    "application/sql": "sql",
    "text/css": "css",
    "text/x-ini": "ini",
    "text/x-tex": "latex",
    "text/x-dockerfile": "dockerfile",
    "text/x-makefile": "makefile",
    "application/x-powershell": "powershell",
}
_JSON = "json"
#: A JSON document with a line this long is minified: it is laid out again.
_MINIFIED_LINE = 1_000
#: Minified JSON nested deeper than this is shown as written.
_MAX_LAID_OUT_DEPTH = 32
_JSON_STRUCTURE = re.compile(r'"(?:\\.|[^"\\])*"|[\[\]{}]')
_BACKTICKS = re.compile("`{3,}")
_INVISIBLE = re.compile(f"[{INVISIBLE}]")


def is_code(media_type: str) -> bool:
    """Whether text declared as ``media_type`` is read as code."""
    return media_type in LANGUAGES


def blocks(media_type: str, text: str, budget: TextBudget) -> list[Block]:
    """``text`` fenced in its language; JSON laid out when minified, or said to be broken."""
    language = LANGUAGES[media_type]
    found: list[Block] = []
    if language == _JSON:
        text, problem = _laid_out(text)
        if problem is not None:
            found.append(Notice(f"[airlock: not well-formed JSON ({problem}); shown as written]"))
    found.append(Paragraph(budget.spend(fenced(language, text))))
    return found


def fenced(language: str, text: str) -> str:
    """``text`` in a Markdown code fence one backtick longer than any run inside it, so no
    line of the file can close the fence and speak outside it."""
    # Counted as admission will leave the text: a backtick run broken by a character it
    # removes ("``\x01`") becomes a fence once that character is gone.
    visible = _INVISIBLE.sub("", text)
    longest = max((len(run) for run in _BACKTICKS.findall(visible)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{text.strip(chr(10))}\n{fence}"


def _nesting(text: str) -> int:
    """How deep JSON text nests its arrays and objects (strings skipped), in one pass."""
    depth = deepest = 0
    for token in _JSON_STRUCTURE.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":
            depth -= 1
    return deepest


def _laid_out(text: str) -> tuple[str, str | None]:
    """JSON as written, or indented when minified; with why it does not parse, if it does
    not (nesting deeper than the parser's recursion limit included)."""
    try:
        value = json.loads(text)
    except RecursionError:
        return text, "nested deeper than the parser follows"
    except ValueError as exc:
        return text, str(exc)
    if max(map(len, text.splitlines()), default=0) <= _MINIFIED_LINE:
        return text, None
    if _nesting(text) > _MAX_LAID_OUT_DEPTH:
        # Indenting costs two spaces a level a line: 450 KB nested 900 deep would be gigabytes.
        return text, None
    return json.dumps(value, indent=2, ensure_ascii=False), None
