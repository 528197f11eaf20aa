"""The Dockerfile read as Docker reads it, instruction by instruction and stage by stage, for the
deployment tests that check what the image is built from and runs as.
"""

from __future__ import annotations


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) as Docker reads them: line continuations joined, comment lines
    dropped (also inside a continuation, as BuildKit does), parser directives ignored."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if line.strip().startswith("#"):
            continue
        if not pending and not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1]
            continue
        logical = pending + line
        pending = ""
        keyword, _, arguments = logical.strip().partition(" ")
        result.append((keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends inside a line continuation"
    return result


def stages(text: str) -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for keyword, arguments in instructions(text):
        if keyword == "FROM":
            found.append([])
        if found:
            found[-1].append((keyword, arguments))
    return found
