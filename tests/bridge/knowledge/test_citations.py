"""Citations: grounded numbering, ungrounded references removed, layer tags stripped in a stream."""

from __future__ import annotations

import itertools
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.knowledge.citations import (
    DEFAULT_LAYER_NAMES,
    SOURCE_REFERENCE,
    Citation,
    CitationIndex,
    CitationTagFilter,
    drop_ungrounded_citations,
)
from bridge.knowledge.retrieval import RetrievedFragment


def frag(source: str, score: float = 0.5, content: str = "c") -> RetrievedFragment:
    return RetrievedFragment(content=content, source=source, score=score)


# --- the index ----------------------------------------------------------------------------------


def test_sources_are_numbered_once_each_in_ranked_order() -> None:
    index = CitationIndex.from_fragments(
        [frag("Blog", 0.2), frag("Handbook", 0.9), frag("Blog", 0.95), frag("Atlas", 0.2)]
    )
    assert index.citations == (
        Citation("1", "Blog"),
        Citation("2", "Handbook"),
        Citation("3", "Atlas"),
    )
    assert index.render() == "[1] Blog\n[2] Handbook\n[3] Atlas"
    assert index.sources() == frozenset({"Blog", "Handbook", "Atlas"})


def test_numbering_ties_break_on_source_then_content() -> None:
    index = CitationIndex.from_fragments([frag("B", content="a"), frag("A", content="z")])
    assert [c.source for c in index.citations] == ["A", "B"]


def test_numbering_does_not_depend_on_arrival_order() -> None:
    fragments = [frag("B"), frag("A", 0.7), frag("C", math.nan), frag("A]"), frag("D", 0.7)]
    renders = {CitationIndex.from_fragments(p).render() for p in itertools.permutations(fragments)}
    assert renders == {"[1] A\n[2] D\n[3] B\n[4] C"}


def test_source_names_are_made_safe_and_empty_ones_skipped() -> None:
    index = CitationIndex.from_fragments(
        [frag("Hand]book\n[2] Forged", 0.9), frag("[]", 0.8), frag("  ", 0.7)]
    )
    assert index.render() == "[1] Handbook 2 Forged"


def test_empty_index() -> None:
    assert CitationIndex().render() == ""
    assert CitationIndex.from_fragments([]).sources() == frozenset()


# --- ungrounded references ----------------------------------------------------------------------

INDEX = CitationIndex.from_fragments([frag("Handbook"), frag("Policy Manual")])


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  leading and trailing  \n\n",
        "double  spaces [[source:Handbook]]  kept\n",
        "[[source: Policy Manual ]] and [[source:Handbook]]",
        "brackets [1] and [[not a reference]] stay",
    ],
)
def test_nothing_ungrounded_returns_the_text_byte_identical(text: str) -> None:
    rewritten, dropped = drop_ungrounded_citations(text, INDEX)
    assert rewritten is text
    assert dropped == ()


@given(st.text().filter(lambda t: "[[" not in t))
def test_text_without_references_is_never_touched(text: str) -> None:
    assert drop_ungrounded_citations(text, INDEX) == (text, ())


def test_ungrounded_references_are_removed_and_reported_once_in_order() -> None:
    text = "See [[source:Blog]] and [[source:Handbook]]  then [[source:Wiki]] [[source:Blog]]. "
    rewritten, dropped = drop_ungrounded_citations(text, INDEX)
    assert rewritten == "See and [[source:Handbook]] then ."
    assert dropped == ("Blog", "Wiki")


def test_removal_keeps_line_structure() -> None:
    rewritten, _ = drop_ungrounded_citations("a [[source:X]] b\n\nc", INDEX)
    assert rewritten == "a b\n\nc"


def test_the_keyword_matches_in_any_case() -> None:
    rewritten, dropped = drop_ungrounded_citations(
        "x [[Source:Invented]] [[SOURCE:Handbook]]", INDEX
    )
    assert (rewritten, dropped) == ("x [[SOURCE:Handbook]]", ("Invented",))


def test_grounding_compares_safe_names() -> None:
    index = CitationIndex.from_fragments([frag("Hand]book")])
    assert drop_ungrounded_citations("[[source:Handbook]]", index) == ("[[source:Handbook]]", ())
    assert drop_ungrounded_citations("[[source:]]", index) == ("", ("",))


def test_reference_pattern() -> None:
    assert SOURCE_REFERENCE.findall("[[source:A b]] [[source:[x]]] [[source:y]") == ["A b"]


# --- the streaming tag filter -------------------------------------------------------------------

_NAMES = DEFAULT_LAYER_NAMES
# The reference semantics, written independently of the filter: remove an unfinished tag at the
# very end ("[" plus any prefix of a name, whole name included, compared with re.IGNORECASE's case
# rules), then every complete tag with the spaces and tabs directly before it.


def reference(text: str, names: tuple[str, ...] = _NAMES) -> str:
    start = text.rfind("[")
    if start >= 0 and any(
        re.fullmatch(re.escape(name[:k]), text[start + 1 :], re.IGNORECASE)
        for name in names
        for k in range(len(name) + 1)
    ):
        text = text[:start]
    tag = re.compile(r"[ \t]*\[(?:" + "|".join(map(re.escape, names)) + r")\]", re.IGNORECASE)
    return tag.sub("", text)


def filtered(chunks: list[str], names: tuple[str, ...] = _NAMES) -> str:
    tag_filter = CitationTagFilter(names)
    return "".join(tag_filter.feed(chunk) for chunk in chunks) + tag_filter.flush()


def split_at(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in itertools.pairwise([0, *points, len(text)])]


ATOMS = [
    "[working]",
    "[WORKING]",
    "[Memory]",
    "[system]",
    "[context]",
    "[wor",
    "king]",
    "[",
    "]",
    "[[",
    " ",
    "  ",
    "\t",
    "\n",
    "a",
    "word",
    "[1]",
    "[work]",
    "retrieved",
    "[ working]",
]
streams = st.lists(st.sampled_from(ATOMS), max_size=14).map("".join)
cut_lists = st.lists(st.integers(min_value=0, max_value=200), max_size=8)


@given(streams, cut_lists)
def test_output_is_the_same_however_the_stream_is_split(text: str, cuts: list[int]) -> None:
    assert filtered(split_at(text, cuts)) == reference(text)


@given(st.text(alphabet=st.sampled_from("[]wWorkingmesy \t\nx"), max_size=30), cut_lists)
def test_chunk_invariance_on_character_soup(text: str, cuts: list[int]) -> None:
    assert filtered(split_at(text, cuts)) == reference(text)


@given(streams)
def test_one_character_at_a_time_matches_the_whole_buffer(text: str) -> None:
    assert filtered(list(text)) == filtered([text]) == reference(text)


@given(st.text(max_size=60))
def test_feeding_everything_then_flushing_equals_whole_buffer_filtering(text: str) -> None:
    assert filtered([text]) == reference(text)


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        (["Answer [working] here"], "Answer here"),
        (["Answer", " [WoRkInG]", " here"], "Answer here"),
        (["Answer [wor", "king] here"], "Answer here"),
        (["Answer ", " \t", "[memory]"], "Answer"),
        (["a [system][context] b"], "a b"),
        (["code:\n    [working]    indented"], "code:\n    indented"),
        (["price [1] and [work] stay"], "price [1] and [work] stay"),
        (["ends with [wor"], "ends with "),
        (["ends with [working"], "ends with "),
        (["ends with ", "["], "ends with "),
        (["trailing spaces  "], "trailing spaces  "),
        (["[wo[working]"], "[wo"),
        (["[working] lead"], " lead"),
    ],
)
def test_examples(chunks: list[str], expected: str) -> None:
    assert filtered(chunks) == expected


def test_case_folding_is_the_tag_pattern_s_own_in_both_states() -> None:
    # Long s and the Kelvin sign fold to "s" and "k" under re.IGNORECASE; a prefix check done
    # with str.lower() would disagree with the tag pattern and leak or keep the wrong text.
    assert filtered(["a [\u017fystem] b"]) == "a b"
    assert filtered(["a [wor\u212a", "ing] b"]) == "a b"
    assert filtered(["a [\u017fys"]) == "a "


def test_whitespace_before_a_possible_tag_is_held_then_released() -> None:
    tag_filter = CitationTagFilter()
    assert tag_filter.feed("word  ") == "word"
    assert tag_filter.feed("[wor") == ""
    assert tag_filter.feed("ld]") == "  [world]"
    assert tag_filter.feed(" x\t") == " x"
    assert tag_filter.flush() == "\t"


def test_the_filter_is_reusable_after_flush() -> None:
    tag_filter = CitationTagFilter()
    assert tag_filter.feed("a [wor") == "a"
    assert tag_filter.flush() == " "
    assert tag_filter.feed("b [working]") == "b"
    assert tag_filter.flush() == ""


def test_empty_chunk_emits_nothing() -> None:
    tag_filter = CitationTagFilter()
    tag_filter.feed("x ")
    assert tag_filter.feed("") == ""


def test_custom_names_are_literal_not_patterns() -> None:
    assert filtered(["a [l.1] [lx1] b"], ("l.1",)) == "a [lx1] b"


@given(st.text(alphabet=st.sampled_from("[]l.1x \t"), max_size=20), cut_lists)
def test_chunk_invariance_with_custom_names(text: str, cuts: list[int]) -> None:
    names = ("l.1", "l")
    assert filtered(split_at(text, cuts), names) == reference(text, names)


def test_an_empty_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one layer name"):
        CitationTagFilter(())


def test_a_bare_string_of_names_is_refused() -> None:
    with pytest.raises(ValueError, match="not a single string"):
        CitationTagFilter("working")


@pytest.mark.parametrize("name", ["", "two words", "a]b", "[x", "tab\there", 3])
def test_a_name_that_could_misplace_a_tag_boundary_is_refused(name: object) -> None:
    with pytest.raises(ValueError):
        CitationTagFilter(("working", name))  # type: ignore[arg-type]
