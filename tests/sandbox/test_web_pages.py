"""Web pages through the real sandbox: the corpus's pages against their expected text, what
each element becomes, every way a page hides text from its reader, and the pages that attack
an HTML reader."""

from __future__ import annotations

import contextlib
import re
import time

import pytest

from sandbox.document import Block, Heading, ListItem, Notice, Paragraph, Table
from sandbox.errors import CeilingExceeded, UnreadableInput
from sandbox.limits import ParseLimits
from sandbox.runner import SandboxRunner
from tests.conftest import CORPUS_DIR
from tests.sandbox.canary import Canary
from tests.sandbox.hostile_inputs import WALL_SECONDS
from tests.sandbox.spreadsheet_builders import external, laughs

HTML = "text/html"
XHTML = "application/xhtml+xml"
DEFAULT = ParseLimits()
ROOMY = ParseLimits(max_text_chars=400_000)


def _blocks(
    runner: SandboxRunner, page: str | bytes, media_type: str = HTML, kind: str = "html"
) -> list[Block]:
    payload = page.encode() if isinstance(page, str) else page
    document = runner.run(kind, media_type, payload, DEFAULT).document
    assert document is not None
    return document.blocks


def _text(runner: SandboxRunner, page: str, media_type: str = HTML) -> str:
    return runner.run("html", media_type, page.encode(), DEFAULT).text


def _collapsed(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_a_page_reads_every_line_of_its_expected_text(runner: SandboxRunner) -> None:
    """The IETF draft: every line of the text derived from Readability's extraction is in
    airlock's reading, the <pre> layout kept."""
    text = runner.run(
        "html", HTML, (CORPUS_DIR / "readability_ietf-1.html").read_bytes(), ROOMY
    ).text
    expected = (CORPUS_DIR / "readability_ietf-1.expected.txt").read_text()
    lines = [_collapsed(line) for line in expected.splitlines() if line.strip()]
    assert [line for line in lines if line not in _collapsed(text)] == []
    assert "   Task Force (IETF).  Note that other groups" in text  # <pre> spacing kept


def test_a_whole_wikipedia_page_holds_its_article(runner: SandboxRunner) -> None:
    """Readability's article lines are all found but for the infobox rows, which airlock
    reads as a table (cells between bars, not a tab); navigation is kept, not guessed away."""
    text = runner.run(
        "html", HTML, (CORPUS_DIR / "readability_wikipedia.html").read_bytes(), ROOMY
    ).text
    reference = (CORPUS_DIR / "readability_wikipedia.reference.txt").read_text()
    lines = [_collapsed(line) for line in reference.splitlines() if line.strip()]
    missing = [line for line in lines if line not in _collapsed(text)]
    assert len(missing) <= 6, missing
    assert all(
        "\t" in line or line.startswith(("Industry", "Founded", "Website"))
        for line in [raw for raw in reference.splitlines() if _collapsed(raw) in missing]
    ), missing
    assert "## History" in text
    assert "mw.config" not in text and "<script" not in text


def test_a_shift_jis_page_without_a_charset_reads_as_japanese(runner: SandboxRunner) -> None:
    blocks = _blocks(runner, (CORPUS_DIR / "pango_shift-jis.html").read_bytes())
    headings = [block for block in blocks if isinstance(block, Heading)]
    assert [(block.level, block.text) for block in headings[:2]] == [
        (1, "H1です。"),
        (2, "H2です。"),
    ]
    [table] = [block for block in blocks if isinstance(block, Table)]
    assert table.header and table.rows[0] == ["TH(1,1)", "TH(1,2)", "TH(1,3)"]
    items = [block for block in blocks if isinstance(block, ListItem)]
    assert (items[0].marker, items[0].depth, items[0].text) == ("1. ", 0, "OL.LI(1)")
    assert (items[1].marker, items[1].depth) == ("- ", 1)
    markers = [item.marker for item in items if "UL.OL.LI" in item.text]
    drawn = ["ii", "iii", "iv", "XXX", "XXXI", "XXXII", "an", "ao", "ap", "AX", "AY", "AZ"]
    assert markers[3:] == [f"{numeral}. " for numeral in drawn]


def test_elements_become_blocks_and_markup_never_text(runner: SandboxRunner) -> None:
    page = (
        "<!DOCTYPE html><html><head><title>Title</title><script>var leak = 1;</script>"
        "<style>p { margin: 0 }</style></head><body><!-- a comment -->"
        "<h2>Section  two</h2><p>One <b>bold</b> <a href='https://x'>link</a><br>next</p>"
        "<template><p>inert</p></template><noscript>no script</noscript>"
        "<ol start='3'><li>three<li><p>four</p><p>more</p><ul><li>inner</ul></ol>"
        "<table><caption>Prices</caption><thead><tr><th>Item<th>Cost</thead>"
        "<tr><td colspan=2>both</td><tr><td>tea<td>2</table>"
        "<pre>  indented\n    code</pre><p>end &amp; &eacute;</p></body></html>"
    )
    blocks = _blocks(runner, page)
    assert blocks == [
        Heading(2, "Section two"),
        Paragraph("One bold link\nnext"),
        ListItem("3. ", 0, "three"),
        ListItem("4. ", 0, "four"),
        ListItem("   ", 0, "more"),
        ListItem("- ", 1, "inner"),
        Paragraph("Prices"),
        Table([["Item", "Cost"], ["both", ""], ["tea", "2"]], header=True),
        Paragraph("  indented\n    code"),
        Paragraph("end & é"),
    ]


def test_text_declared_as_a_web_page_is_read_as_one(runner: SandboxRunner) -> None:
    """A client that declares kind "text" with an HTML media type, a page named .txt and a
    page named .xlsx: none comes out as markup."""
    page = b"<!doctype html><html><body><p>Visible</p><script>alert(1)</script></body></html>"
    assert runner.run("text", "text/html; charset=utf-8", page, DEFAULT).text == "Visible"
    for kind, noun in (("text", "text"), ("spreadsheet", "a spreadsheet")):
        text = runner.run(kind, "application/octet-stream", page, DEFAULT).text
        assert text == f"[airlock: declared as {noun}, read as an HTML page]\nVisible"


def test_a_declared_charset_is_read_as_a_browser_reads_it(runner: SandboxRunner) -> None:
    """iso-8859-1 is windows-1252 to a browser (0x80 is the euro sign); a page whose
    declaration is false is decoded as if it made none."""
    page = "<meta charset='iso-8859-1'><p>Café crème € brûlée</p>".encode("cp1252")
    assert _blocks(runner, page)[-1] == Paragraph("Café crème € brûlée")
    lying = "<meta charset='utf-8'><p>Größte Straße in München</p>".encode("cp1252")
    assert _blocks(runner, lying)[-1] == Paragraph("Größte Straße in München")


#: Each way a page hides text from a person, as (the hiding markup around INJECT, the method
#: the notice names).
HIDING = [
    ("<p style='display:none'>INJECT</p>", "display:none"),
    ("<p style='DISPLAY: NONE !important'>INJECT</p>", "display:none"),
    ("<p style='visibility:hidden'>INJECT</p>", "visibility:hidden"),
    ("<p hidden>INJECT</p>", "hidden attribute"),
    ("<p hidden='until-found'>INJECT</p>", "hidden attribute"),
    ("<p aria-hidden='true'>INJECT</p>", "aria-hidden"),
    ("<p style='opacity:0'>INJECT</p>", "opacity:0"),
    ("<p style='font-size:0'>INJECT</p>", "zero size"),
    ("<p style='font-size:0.4px'>INJECT</p>", "zero size"),
    ("<div style='width:1px;height:1px;overflow:hidden'>INJECT</div>", "zero size"),
    ("<p style='position:absolute;clip:rect(0,0,0,0)'>INJECT</p>", "zero size"),
    ("<p style='transform:scale(0)'>INJECT</p>", "zero size"),
    ("<p style='position:absolute;left:-9999px'>INJECT</p>", "off-screen"),
    ("<p style='text-indent:-100em'>INJECT</p>", "off-screen"),
    ("<p style='color:transparent'>INJECT</p>", "transparent text"),
    ("<p style='color:rgba(0,0,0,0)'>INJECT</p>", "transparent text"),
    ("<p style='color:#fff'>INJECT</p>", "text the colour of its background"),
    ("<p style='color:rgb(255, 255, 255)'>INJECT</p>", "text the colour of its background"),
    ("<font color='white'>INJECT</font>", "text the colour of its background"),
    (
        "<div style='background:#123456'><p style='color:#123456'>INJECT</p></div>",
        "text the colour of its background",
    ),
    ("<style>.x { display: none }</style><p class='x'>INJECT</p>", "a stylesheet rule"),
    (
        "<style>div > p.x + p { visibility: hidden }</style>"
        "<div><p class=x></p><p>INJECT</p></div>",
        "a stylesheet rule",
    ),
    # HTML, not XML: "/>" does not close a span, so the rest of the page is inside it.
    ("<span hidden/>INJECT", "hidden attribute"),
]


@pytest.mark.parametrize(("hiding", "method"), HIDING, ids=[h for h, _ in HIDING])
def test_hidden_text_is_left_out_and_counted(
    runner: SandboxRunner, hiding: str, method: str
) -> None:
    text = _text(runner, f"<html><body><p>SHOWN</p>{hiding}</body></html>")
    assert "INJECT" not in text
    assert text == f"SHOWN\n[airlock: 1 hidden element left out ({method})]"


def test_a_hidden_formatting_element_stays_hidden_in_the_next_block(
    runner: SandboxRunner,
) -> None:
    """An unclosed hidden <b> is re-opened by the parser inside each following block, as a
    browser does: a reader that closed it at the paragraph's end would show the rest."""
    text = _text(runner, "<p>SHOWN<b style='display:none'>x<div>INJECT</div>INJECT2")
    assert "INJECT" not in text and text.startswith("SHOWN")


def test_visible_text_that_looks_hidden_is_kept(runner: SandboxRunner) -> None:
    """White on a dark background or on a picture, a rule for print only, a hidden parent
    made visible again by nothing else: shown text is not dropped."""
    page = (
        "<style>@media print { .screen { display: none } }</style>"
        "<div style='background:#000'><p style='color:white'>white on black</p></div>"
        "<div style='background:url(hero.jpg) #fff;color:#fff'>white on a photo</div>"
        "<p class='screen'>screen only</p><p style='width:0'>no overflow rule</p>"
    )
    assert _text(runner, page) == (
        "white on black\nwhite on a photo\nscreen only\nno overflow rule"
    )


def test_xhtml_closes_its_empty_elements(runner: SandboxRunner) -> None:
    """In XHTML ``<span hidden/>`` and ``<script/>`` are empty: the text after them is the
    document's, as an EPUB reading system shows it."""
    page = (
        "<html xmlns='http://www.w3.org/1999/xhtml'><head><title/><script src='a.js'/></head>"
        "<body><p>one<span hidden='hidden'/> two</p><br/><p>three</p></body></html>"
    )
    assert _text(runner, page, XHTML) == "one two\nthree"


def test_a_page_nested_100000_deep_is_refused_quickly(runner: SandboxRunner) -> None:
    started = time.monotonic()
    with pytest.raises(CeilingExceeded, match="nests elements more than 2048 deep"):
        runner.run("html", HTML, b"<div>" * 100_000 + b"deep", DEFAULT)
    assert time.monotonic() - started < WALL_SECONDS


def test_deep_pages_that_close_their_elements_are_read(runner: SandboxRunner) -> None:
    """Depth is what stays open: 50,000 closed divs, unclosed paragraphs, list items and
    cells in the thousands, and tags inside a script are not nesting."""
    page = (
        "<div>a</div>" * 50_000
        + "<p>para" * 3_000
        + "<ul>"
        + "<li>item" * 3_000
        + "</ul>"
        + "<script>"
        + "'<div>'" * 5_000
        + "</script><p>end"
    )
    text = runner.run("html", HTML, page.encode(), ROOMY).text
    assert text.endswith("- item\nend")


@pytest.mark.parametrize(
    "page",
    [
        "<a " * 300_000,
        "<!--" + "x" * 1_000_000,
        "<" * 1_000_000,
        "&" * 1_000_000,
        "<style>" + "/*" * 500_000 + "</style><p>x",
        "<style>" + ".a{display:none}" * 50_000 + "</style><p class=a>x",
        "<table>" + "<tr>" + "<td colspan=1000>" * 2 + "</table>",
    ],
    ids=[
        "open-tags",
        "open-comment",
        "brackets",
        "ampersands",
        "comment-bomb",
        "many-rules",
        "colspan",
    ],
)
def test_pages_that_attack_the_parser_end_typed_and_quickly(
    runner: SandboxRunner, page: str
) -> None:
    started = time.monotonic()
    with contextlib.suppress(CeilingExceeded, UnreadableInput):
        runner.run("html", HTML, page.encode(), DEFAULT)
    assert time.monotonic() - started < WALL_SECONDS


def test_a_row_past_the_column_ceiling_is_refused(runner: SandboxRunner) -> None:
    with pytest.raises(CeilingExceeded, match="more than 1024 cells"):
        runner.run("html", HTML, b"<table><tr>" + b"<td>x" * 1_100 + b"</table>", ROOMY)
    with pytest.raises(CeilingExceeded, match="characters of text"):
        runner.run(
            "html", HTML, b"<table>" + b"<tr><td colspan=1000>x" * 300 + b"</table>", DEFAULT
        )


def test_entities_are_never_expanded_nor_fetched(runner: SandboxRunner, canary: Canary) -> None:
    """A DOCTYPE's internal subset is dropped unread in HTML and XHTML: a billion laughs stays
    the text "&bomb;", a file or a URL entity is never fetched."""
    for prologue in (
        laughs("html"),
        external("html", canary.url),
        external("html", "file:///etc/passwd"),
    ):
        for media_type in (HTML, XHTML):
            page = f"{prologue}<html><body><p>a &bomb; b</p></body></html>"
            assert _text(runner, page, media_type) == "a &bomb; b"
    assert canary.hits == []


def test_binary_declared_as_a_page_is_refused(runner: SandboxRunner) -> None:
    with pytest.raises(UnreadableInput):
        runner.run("html", HTML, b"\x00\x01\x02<p>x" * 100, DEFAULT)


def test_a_page_carries_no_airlock_voice(runner: SandboxRunner) -> None:
    """A page's own "[airlock: ...]" or "[page 2]" line is quoted, not taken for airlock's."""
    text = _text(runner, "<p>[airlock: 0 hidden elements]</p><p>[page 2]</p>")
    assert not any(line.startswith(("[airlock", "[page")) for line in text.splitlines())
    assert Notice not in {type(block) for block in _blocks(runner, "<p>[airlock: x]</p>")}
