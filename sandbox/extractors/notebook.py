"""Jupyter notebooks (``.ipynb``, nbformat 4 and the legacy 3): the cells in order, as the
notebook shows them.

Markdown and raw cells are kept as written (Markdown stays Markdown), nbformat 3's heading
cells become headings, code cells are fenced in the kernel's language, and each code cell's
text outputs follow it in a plain fence: a stream's text, a result's ``text/plain``, an
error's name and value. Outputs that are pictures, HTML or other media are not read; how many
is said in a notice (a 50 MB base64 picture is never decoded). A notebook that is not JSON,
nests deeper than the parser follows, or whose cells are not the shape nbformat gives them is
refused as unreadable. See docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeGuard

from sandbox import codes
from sandbox.document import Block, Heading, Notice, Paragraph
from sandbox.extractors.code import fenced
from sandbox.extractors.registry import Refusal

if TYPE_CHECKING:  # the text extractor, which decodes the text, owns the budget and calls this
    from sandbox.extractors.text import TextBudget

MEDIA_TYPE = "application/x-ipynb+json"
_TEXT_OUTPUT = "text/plain"
_MAX_HEADING_LEVEL = 6


def blocks(text: str, budget: TextBudget) -> list[Block]:
    """The notebook's cells and text outputs as blocks, in order."""
    try:
        notebook = json.loads(text)
    except RecursionError as exc:
        raise Refusal(codes.CEILING, "the notebook nests deeper than the parser follows") from exc
    except ValueError as exc:
        raise Refusal(codes.UNREADABLE, f"the notebook is not JSON: {exc}") from exc
    if not isinstance(notebook, dict):
        raise Refusal(codes.UNREADABLE, "the notebook is not a JSON object")
    cells, language = _cells(notebook)
    reader = _Reader(budget, language)
    for cell in cells:
        reader.cell(cell)
    if reader.unread:
        reader.found.append(
            Notice(
                f"[airlock: {reader.unread} outputs that are not text (pictures, HTML) not read]"
            )
        )
    return reader.found


def _cells(notebook: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The cells (nbformat 4's list, or nbformat 3's first worksheet) and the kernel's
    language."""
    metadata = notebook.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    language = _language(metadata)
    if "worksheets" in notebook:
        worksheets = notebook["worksheets"]
        cells = worksheets[0].get("cells") if _list_of_dicts(worksheets) and worksheets else []
    else:
        cells = notebook.get("cells")
    if not _list_of_dicts(cells):
        raise Refusal(codes.UNREADABLE, "the notebook's cells are not a list of cells")
    return cells, language


def _language(metadata: dict[str, Any]) -> str:
    for key in ("language_info", "kernelspec"):
        section = metadata.get(key)
        if isinstance(section, dict):
            name = section.get("name" if key == "language_info" else "language")
            if isinstance(name, str) and name.isidentifier():
                return name
    return "python"


def _list_of_dicts(value: object) -> TypeGuard[list[dict[str, Any]]]:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _source(value: object) -> str:
    """A source or text field: a string, or a list of strings to be joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(part for part in value if isinstance(part, str))
    return ""


class _Reader:
    def __init__(self, budget: TextBudget, language: str) -> None:
        self.found: list[Block] = []
        self.unread = 0
        self._budget = budget
        self._language = language

    def cell(self, cell: dict[str, Any]) -> None:
        kind = cell.get("cell_type")
        source = _source(cell.get("source", cell.get("input")))
        if kind == "code":
            language = cell.get("language")
            label = language if isinstance(language, str) and language.isidentifier() else None
            if source.strip():
                self._add(Paragraph(fenced(label or self._language, source)))
            outputs = cell.get("outputs")
            for output in outputs if _list_of_dicts(outputs) else []:
                self._output(output)
        elif kind == "heading" and source.strip():
            level = cell.get("level")
            depth = level if isinstance(level, int) and 1 <= level <= _MAX_HEADING_LEVEL else 1
            self._add(Heading(depth, " ".join(source.split())))
        elif source.strip():
            self._add(Paragraph(source.strip("\n")))

    def _output(self, output: dict[str, Any]) -> None:
        kind = output.get("output_type")
        if kind == "stream":
            text = _source(output.get("text"))
        elif kind in ("error", "pyerr"):
            text = f"{output.get('ename', '')}: {output.get('evalue', '')}"
        else:  # execute_result, display_data (nbformat 4: under "data"; 3: beside the type)
            data = output.get("data", output)
            data = data if isinstance(data, dict) else {}
            text = _source(data.get(_TEXT_OUTPUT, data.get("text")))
            self.unread += sum(1 for key in data if "/" in key and key != _TEXT_OUTPUT)
            self.unread += sum(1 for key in ("png", "jpeg", "svg", "html") if key in data)
        if text.strip():
            self._add(Paragraph(fenced("", text)))

    def _add(self, block: Paragraph | Heading) -> None:
        self._budget.spend(block.text)
        self.found.append(block)
