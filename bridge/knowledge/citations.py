"""The citation bridge: what a model may cite, and what of the prompt may not leak back out.

``CitationIndex`` is the grounded set and ``drop_ungrounded_citations`` removes citations
outside it; ``CitationTagFilter`` strips the compiler's layer tags from a stream identically
under every chunking. See docs/spec-decisions.md (Retrieval, documents, citations, factory).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bridge.knowledge.labels import safe_source
from bridge.knowledge.retrieval import RetrievedFragment, fragment_rank_key

#: A model's reference to a source: ``[[source:Employee Handbook]]``. The keyword matches in
#: any case, so ``[[Source:Invented]]`` is judged like any other reference instead of slipping
#: through unchecked; the name may not contain brackets, which keeps every match linear.
SOURCE_REFERENCE = re.compile(r"\[\[source:([^\[\]]*)\]\]", re.IGNORECASE)

#: The internal tags the prompt compiler wraps its layers in, which a model may echo: the two
#: authored tiers, the per-turn working layer, recalled memory, retrieved knowledge and ingested
#: context. Kept to words that do not occur bracketed in ordinary prose or Markdown.
DEFAULT_LAYER_NAMES: tuple[str, ...] = (
    "system",
    "operator",
    "working",
    "memory",
    "retrieved",
    "context",
)

# Only spaces are collapsed after a reference is removed; newlines are paragraph structure.
_SPACE_RUN = re.compile(r" {2,}")

# A layer name is one word: no whitespace (the tag pattern treats whitespace before a tag as
# part of it) and no brackets (which would let a tag end inside a name).
_LAYER_NAME = re.compile(r"[^\s\[\]]+\Z")

# The horizontal whitespace a tag takes with it. Never \s: that also took the line break before
# an indented tag and welded "code:\n    [working]    indented" into one line.
_HORIZONTAL_SPACE = " \t"


@dataclass(frozen=True)
class Citation:
    """One numbered reference to a retrieved source, with a display-safe name."""

    marker: str
    source: str


@dataclass(frozen=True)
class CitationIndex:
    """The grounded set: every source a retrieval returned, numbered."""

    citations: tuple[Citation, ...] = ()

    @classmethod
    def from_fragments(cls, fragments: Iterable[RetrievedFragment]) -> CitationIndex:
        """Number the distinct safe source names of ``fragments`` in ranked order.

        Ranked rather than received, so two runs over the same retrieval number their sources
        identically. A name that reduces to nothing is skipped: a citation must name something.
        """
        seen: list[str] = []
        for fragment in sorted(fragments, key=fragment_rank_key):
            label = safe_source(fragment.source)
            if label and label not in seen:
                seen.append(label)
        return cls(tuple(Citation(marker=str(n), source=s) for n, s in enumerate(seen, start=1)))

    def render(self) -> str:
        """The reference list, ``[n] source`` one per line."""
        return "\n".join(f"[{c.marker}] {c.source}" for c in self.citations)

    def sources(self) -> frozenset[str]:
        """The source names a reference may cite."""
        return frozenset(c.source for c in self.citations)


def drop_ungrounded_citations(text: str, index: CitationIndex) -> tuple[str, tuple[str, ...]]:
    """Remove every ``[[source:X]]`` whose ``X`` is not in ``index``.

    Returns the text and the ungrounded names, each once, in order of first appearance. When
    nothing was removed the text comes back byte-identical: a filter that reflowed whitespace on
    every clean response would make its own no-op visible. When something was removed, the
    space runs the removal left are collapsed and the ends stripped.
    """
    grounded = index.sources()
    ungrounded: list[str] = []

    def judge(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        if safe_source(name) in grounded:
            return match.group(0)
        if name not in ungrounded:
            ungrounded.append(name)
        return ""

    rewritten = SOURCE_REFERENCE.sub(judge, text)
    if not ungrounded:
        return text, ()
    return _SPACE_RUN.sub(" ", rewritten).strip(), tuple(ungrounded)


class CitationTagFilter:
    """Strips internal layer tags from a streamed response, across chunk boundaries.

    Feed chunks in order, concatenate what comes back, call :meth:`flush` once at the end; the
    filter is then ready for a new stream. The result is defined on the whole stream, so it is
    the same however the stream is split: a tag such as ``[working]`` (any case) is removed
    together with the spaces and tabs directly before it, and an unfinished tag at the very end
    (``[`` followed by the start of a layer name, as in ``"see [wor"``) is removed too. That
    prefix was only held back because it could have become a tag; emitting it would leak a
    fragment of an internal annotation. Spaces before it are content and are kept.
    """

    def __init__(self, layer_names: Sequence[str] = DEFAULT_LAYER_NAMES) -> None:
        if not layer_names:
            raise ValueError(
                "a citation filter needs at least one layer name; an empty vocabulary is a "
                "filter that strips nothing, which is better written as no filter."
            )
        # A bare string is a sequence of one-letter names, and "[w]" is not a layer tag.
        if isinstance(layer_names, str):
            raise ValueError("layer_names must be a sequence of names, not a single string")
        for name in layer_names:
            if not isinstance(name, str) or not _LAYER_NAME.match(name):
                raise ValueError(
                    f"layer name {name!r} must be one word without brackets; whitespace or a "
                    "bracket inside a name would let a tag begin or end in the wrong place."
                )
        alternatives = "|".join(re.escape(name) for name in layer_names)
        self._tag_re = re.compile(rf"[{_HORIZONTAL_SPACE}]*\[(?:{alternatives})\]", re.IGNORECASE)
        # "[" followed by any prefix of a name, the whole name included: text that one more
        # chunk could still complete into a tag. Matched by the regex engine, not by lower(),
        # so "could become a tag" uses exactly the case rules of the tag pattern itself.
        prefixes = dict.fromkeys(
            re.escape(name[:end]) for name in layer_names for end in range(len(name) + 1)
        )
        self._unfinished_re = re.compile(rf"\[(?:{'|'.join(prefixes)})\Z", re.IGNORECASE)
        self._held = ""

    def feed(self, text: str) -> str:
        """Take the next chunk; return the part of the output it settles."""
        if not text:
            return ""
        self._held += text
        return self._drain(final=False)

    def flush(self) -> str:
        """End the stream: return what was held, without an unfinished tag at the end."""
        return self._drain(final=True)

    def _unfinished_start(self) -> int:
        """Where a trailing, still-completable ``[name`` starts (``len`` when there is none)."""
        start = self._held.rfind("[")
        if start >= 0 and self._unfinished_re.match(self._held, start):
            return start
        return len(self._held)

    def _drain(self, *, final: bool) -> str:
        # What is still undecided is the trailing unfinished tag plus the whitespace run before
        # it: a tag completed by the next chunk would remove both. Everything before that run
        # ends in a non-whitespace character, so no tag match can straddle the cut and the
        # settled part filters exactly as it would inside the whole stream.
        unfinished = self._unfinished_start()
        if final:
            settled, self._held = self._held[:unfinished], ""
        else:
            cut = len(self._held[:unfinished].rstrip(_HORIZONTAL_SPACE))
            settled, self._held = self._held[:cut], self._held[cut:]
        return self._tag_re.sub("", settled)
