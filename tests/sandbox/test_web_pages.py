"""Web pages through the real sandbox: the corpus's pages against their expected text, what
each element becomes, every way a page hides text from its reader, and the pages that attack
an HTML reader."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator

import pytest

from sandbox import codes
from sandbox.document import Block, Heading, ListItem, Notice, Paragraph, Table
from sandbox.errors import CeilingExceeded, UnreadableInput
from sandbox.extractors import css
from sandbox.extractors import html as html_module
from sandbox.extractors.html import extract_html
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import SandboxRunner
from tests.conftest import CORPUS_DIR
from tests.helpers import least_cpu_seconds
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
    # Found by the red team: CSS as a browser parses it (an invalid later value ignored,
    # ";" inside quotes, comments, escapes), more ways to hide, every colour form.
    ("<p style='display:none;display:foo'>INJECT</p>", "display:none"),
    ("<p style=\"display:none; x:';display:block'\">INJECT</p>", "display:none"),
    ("<p style='display:/**/none'>INJECT</p>", "display:none"),
    ("<p style='display:\\6e one'>INJECT</p>", "display:none"),
    ("<p style='dis\\play:none'>INJECT</p>", "display:none"),
    ("<p style='content-visibility:hidden'>INJECT</p>", "visibility:hidden"),
    ("<p style='max-height:0;overflow-y:hidden'>INJECT</p>", "zero size"),
    ("<p style='height:0;overflow:clip'>INJECT</p>", "zero size"),
    ("<p style='clip-path:inset(50%)'>INJECT</p>", "zero size"),
    ("<p style='font:0/0 a'>INJECT</p>", "zero size"),
    ("<p style='font-size:calc(0px)'>INJECT</p>", "zero size"),
    ("<p style='transform:scaleY(0)'>INJECT</p>", "zero size"),
    ("<p style='scale:0'>INJECT</p>", "zero size"),
    ("<p style='zoom:0.001'>INJECT</p>", "zero size"),
    ("<p style='filter:opacity(0)'>INJECT</p>", "opacity:0"),
    ("<p style='opacity:0.001'>INJECT</p>", "opacity:0"),
    ("<p style='transform:translateX(-9999px)'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;left:-1e4px'>INJECT</p>", "off-screen"),
    ("<p style='margin:0 0 0 -9999px'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;right:9999px'>INJECT</p>", "off-screen"),
    ("<p style='position:fixed;left:200vw'>INJECT</p>", "off-screen"),
    ("<p style='-webkit-text-fill-color:transparent'>INJECT</p>", "transparent text"),
    ("<p style='color:hsla(0,0%,0%,0)'>INJECT</p>", "transparent text"),
    ("<p style='color:rgba(0,0,0,1e-9)'>INJECT</p>", "transparent text"),
    ("<p style='color:hsl(0,0%,100%)'>INJECT</p>", "text the colour of its background"),
    ("<p style='color:#fefefe'>INJECT</p>", "text the colour of its background"),
    ("<p style='color:snow'>INJECT</p>", "text the colour of its background"),
    ("<p style='color:Canvas'>INJECT</p>", "text the colour of its background"),
    ("<p style='--c:white;color:var(--c)'>INJECT</p>", "text the colour of its background"),
    ("<font color=ffffff>INJECT</font>", "text the colour of its background"),
    (
        "<div style='background:fixed navy'><p style='color:#000080'>INJECT</p></div>",
        "text the colour of its background",
    ),
    ("<style>.a{display:none;display:foo}</style><p class=a>INJECT</p>", "a stylesheet rule"),
    ("<style>@layer x{.a{display:none}}</style><p class=a>INJECT</p>", "a stylesheet rule"),
    ("<style>@media screen{.a{display:none}}</style><p class=a>INJECT</p>", "a stylesheet rule"),
    ("<style>body{& .a{display:none}}</style><p class=a>INJECT</p>", "a stylesheet rule"),
    (
        "<style>" + "".join(f".d{n}{{display:none}}" for n in range(600)) + ".a{display:none}"
        "</style><p class=a>INJECT</p>",
        "a stylesheet rule",
    ),
    ("<div popover>INJECT</div>", "a popover"),
    ("<dialog>INJECT</dialog>", "a closed dialog"),
    ("<svg><text display='none'>INJECT</text></svg>", "display:none"),
    ("<svg><text fill='none'>INJECT</text></svg>", "transparent text"),
    ("<svg width=0 height=0><text>INJECT</text></svg>", "zero size"),
    ("<div><template shadowrootmode=open>x</template>INJECT</div>", "a declarative shadow root"),
    # Red team, round two.
    ("<p style='display:none ! IMPORTANT'>INJECT</p>", "display:none"),
    ("<p style='--H:none;--h:block;display:var(--H)'>INJECT</p>", "display:none"),
    ("<p style='color:var(--x, rgb(255,255,255))'>INJECT</p>", "text the colour of its background"),
    ("<style>:root{--h:none}</style><p style='display:var(--h)'>INJECT</p>", "display:none"),
    ("<p style='color:hwb(0 100% 0%)'>INJECT</p>", "text the colour of its background"),
    ("<p style='color:oklch(1 0 0)'>INJECT</p>", "text the colour of its background"),
    ("<p style='color:color(srgb 1 1 1)'>INJECT</p>", "text the colour of its background"),
    (
        "<p style='color:color-mix(in srgb, white, white)'>INJECT</p>",
        "text the colour of its background",
    ),
    ("<p style='color:rgb(calc(255) 255 255)'>INJECT</p>", "text the colour of its background"),
    ("<p style='color:hsl(0turn 0% 100%)'>INJECT</p>", "text the colour of its background"),
    ("<p style='font-size:min(0px,1em)'>INJECT</p>", "zero size"),
    ("<p style='opacity:calc(0)'>INJECT</p>", "opacity:0"),
    ("<p style='text-indent:-300%'>INJECT</p>", "off-screen"),
    ("<p style='position:relative;translate:-10000px'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;inset:-10000px auto auto -10000px'>INJECT</p>", "off-screen"),
    ("<p style='margin-inline-start:-10000px'>INJECT</p>", "off-screen"),
    ("<p style='block-size:0;overflow:hidden'>INJECT</p>", "zero size"),
    ("<p style='contain:strict'>INJECT</p>", "zero size"),
    ("<p style='transform:scale(0.001)'>INJECT</p>", "zero size"),
    ("<p style='transform:matrix(0,0,0,0,0,0)'>INJECT</p>", "zero size"),
    ("<p style='transform:rotateX(90deg)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:inset(0 100% 0 0)'>INJECT</p>", "zero size"),
    ("<p style='clip:rect(1px,1px,1px,1px);position:absolute'>INJECT</p>", "zero size"),
    ("<p style='filter:opacity(0.01)'>INJECT</p>", "opacity:0"),
    (
        "<p style='color:#333;filter:brightness(100)'>INJECT</p>",
        "a filter or blend that whitens text",
    ),
    ("<p style='mix-blend-mode:screen'>INJECT</p>", "a filter or blend that whitens text"),
    *(
        (f"<p style='mix-blend-mode:{mode}'>INJECT</p>", "a filter or blend that whitens text")
        for mode in ("difference", "exclusion", "overlay", "soft-light", "color-burn")
    ),
    ("<p style='-webkit-text-fill-color:white'>INJECT</p>", "text the colour of its background"),
    (
        "<div style='-webkit-text-fill-color:#fff'><p style='color:#000'>INJECT</p></div>",
        "text the colour of its background",
    ),
    (
        "<div style='opacity:0.2'><div style='opacity:0.2'><p style='opacity:0.2'>INJECT</p>"
        "</div></div>",
        "opacity:0",
    ),
    ("<p style='color:rgb(1e999 1e999 1e999)'>INJECT</p>", "text the colour of its background"),
    ("<svg><text fill='#fff'>INJECT</text></svg>", "text the colour of its background"),
    ("<svg><text fill-opacity='0'>INJECT</text></svg>", "transparent text"),
    ("<svg width='0%' height='10'><text>INJECT</text></svg>", "zero size"),
    (
        "<math><mstyle mathcolor='white'><mi>INJECT</mi></mstyle></math>",
        "text the colour of its background",
    ),
    ("<style>p[title=';']{display:none}</style><p title=';'>INJECT</p>", "a stylesheet rule"),
    ("<style>p[title='{']{display:none}</style><p title='{'>INJECT</p>", "a stylesheet rule"),
    (
        "<style>.a{content:'/*'} .x{display:none} .b{content:'*/'}</style><p class=x>INJECT</p>",
        "a stylesheet rule",
    ),
    ("<style><!-- .x{display:none} --></style><p class=x>INJECT</p>", "a stylesheet rule"),
    ("<style>.x{@media screen{display:none}}</style><p class=x>INJECT</p>", "a stylesheet rule"),
    ("<style>.x:dir(ltr){display:none}</style><p class=x>INJECT</p>", "a stylesheet rule"),
    (
        "<link rel=stylesheet href='data:text/css,.x{display:none}'><p class=x>INJECT</p>",
        "a stylesheet rule",
    ),
    (
        "<style>@import url('data:text/css,.x{display:none}');</style><p class=x>INJECT</p>",
        "a stylesheet rule",
    ),
    # Review: degenerate clips, shrinking that nests (from inline styles and stylesheet rules
    # alike), and SVG's own ways of drawing nothing.
    ("<p style='clip-path:polygon(0 0,0 0,0 0)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:polygon(0 0,50% 50%,100% 100%)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:ellipse(0 10px)'>INJECT</p>", "zero size"),
    ("<p style='position:absolute;clip:rect(0 auto 0 auto)'>INJECT</p>", "zero size"),
    ("<p style='transform:scale(1%)'>INJECT</p>", "zero size"),
    ("<p style='scale:1%'>INJECT</p>", "zero size"),
    ("<p style='transform:scale(calc(0))'>INJECT</p>", "zero size"),
    ("<p style='transform:scale(0.1) scale(0.1)'>INJECT</p>", "zero size"),
    ("<p style='transform:matrix(1,1,1,1,0,0)'>INJECT</p>", "zero size"),
    ("<p style='transform:matrix(0.001,0,0,0.001,0,0)'>INJECT</p>", "zero size"),
    ("<p style='transform:matrix3d(0,0,0,0,0,0,0,0,0,0,1,0,0,0,0,1)'>INJECT</p>", "zero size"),
    (
        "<div style='transform:scale(0.2)'><p style='transform:scale(0.2)'>INJECT</p></div>",
        "zero size",
    ),
    ("<div style='zoom:0.2'><p style='zoom:0.2'>INJECT</p></div>", "zero size"),
    ("<p style='zoom:1%'>INJECT</p>", "zero size"),
    ("<p style='font-size:1%'>INJECT</p>", "zero size"),
    ("<div style='font-size:10%'><p style='font-size:10%'>INJECT</p></div>", "zero size"),
    ("<div style='font-size:.1em'><p style='font-size:.1em'>INJECT</p></div>", "zero size"),
    ("<style>.a{font-size:0}</style><p class=a>INJECT</p>", "zero size"),
    ("<style>.a{font-size:10%}</style><div class=a><p class=a>INJECT</p></div>", "zero size"),
    (
        "<style>.a{opacity:0.2}</style><div class=a><div class=a><p class=a>INJECT</p></div></div>",
        "opacity:0",
    ),
    (
        "<style>.a{opacity:0.1}</style><div class=a><p style='opacity:0.3'>INJECT</p></div>",
        "opacity:0",
    ),
    ("<style>.a{transform:scale(.1)}</style><div class=a><p class=a>INJECT</p></div>", "zero size"),
    ("<svg><text transform='scale(0)'>INJECT</text></svg>", "zero size"),
    ("<svg><g transform='matrix(0 0 0 0 0 0)'><text>INJECT</text></g></svg>", "zero size"),
    ("<svg viewBox='0 0 0 10'><text>INJECT</text></svg>", "zero size"),
    ("<svg style='width:0'><text>INJECT</text></svg>", "zero size"),
    ("<svg width='0.0' height='10'><text>INJECT</text></svg>", "zero size"),
    ("<svg><switch><g></g><text>INJECT</text></switch></svg>", "a switch's unchosen child"),
    ("<svg><switch><desc>d</desc><text>INJECT</text></switch></svg>", "a switch's unchosen child"),
    (
        "<svg><text requiredExtensions='http://example.org/x'>INJECT</text></svg>",
        "an SVG condition no browser meets",
    ),
    ("<svg><foreignObject width='0' height='9'><p>INJECT</p></foreignObject></svg>", "zero size"),
    ("<svg><g>INJECT</g></svg>", "text SVG does not draw"),
    # A second review: magnification that overflowed to infinity (and a zero scale inside it
    # to not a number), two sources that shrink together, one axis of the scale property,
    # SVG drawn under a pixel.
    (
        "<div style='zoom:1000000'>" * 52
        + "<p style='transform:scale(0)'>INJECT</p>"
        + "</div>" * 52,
        "zero size",
    ),
    (
        "<div style='zoom:1000000'>" * 52 + "<p style='font-size:0'>INJECT</p>" + "</div>" * 52,
        "zero size",
    ),
    ("<style>.a{transform:scale(.1)}</style><p class=a style='zoom:.1'>INJECT</p>", "zero size"),
    ("<style>.a{opacity:.1}</style><p class=a style='filter:opacity(.1)'>INJECT</p>", "opacity:0"),
    ("<style>.a{opacity:.2}.b{filter:opacity(.2)}</style><p class='a b'>INJECT</p>", "opacity:0"),
    ("<p style='scale:0.001 1000'>INJECT</p>", "zero size"),
    ("<p style='transform:matrix3d(1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1000)'>INJECT</p>", "zero size"),
    ("<p style='transform:rotate3d(1,0,0,90deg)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:polygon(0 0, 100% 0, 50px 0)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:polygon(0px 0px,1000px 0px,1000px 0.0000001px)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:inset(0 0 99.95% 0)'>INJECT</p>", "zero size"),
    ("<svg><text requiredExtensions=''>INJECT</text></svg>", "an SVG condition no browser meets"),
    ("<svg><text systemLanguage=' '>INJECT</text></svg>", "an SVG condition no browser meets"),
    ("<svg width='0.001' height='100'><text>INJECT</text></svg>", "zero size"),
    (
        "<svg width='100' height='100' viewBox='0 0 100000000 100000000'><text>INJECT</text></svg>",
        "zero size",
    ),
    # A third review: the viewBox's scale multiplied down and judged against the text's size.
    ("<svg viewBox='0 0 100000000 100000000'><text y='20'>INJECT</text></svg>", "zero size"),
    (
        "<svg width='100' height='100' viewBox='0 0 1600 1600'><svg width='1600' height='1600' "
        "viewBox='0 0 30000 30000'><text font-size='16'>INJECT</text></svg></svg>",
        "zero size",
    ),
    (
        "<svg width='100' height='100' viewBox='0 0 1900 1900'><text font-size='16'>INJECT</text>"
        "</svg>",
        "zero size",
    ),
]


#: Elements no browser draws: left out without a notice, as a script is.
NEVER_DRAWN = [
    "<div>a<noscript></div>INJECT</noscript></div>",
    "<noembed>INJECT</noembed>",
    "<noframes>INJECT</noframes>",
    "<ruby>a<rp>INJECT</rp><rt>b</rt></ruby>",
    "<progress>INJECT</progress>",
    "<meter>INJECT</meter>",
    "<svg><defs><text>INJECT</text></defs></svg>",
    "<svg><symbol><text>INJECT</text></symbol></svg>",
    "<math><mphantom><mi>INJECT</mi></mphantom></math>",
    "<math><semantics><mi>x</mi><annotation>INJECT</annotation></semantics></math>",
    "<noscript></noscriptx>INJECT</noscript>",
]


@pytest.mark.parametrize("page", NEVER_DRAWN)
def test_elements_no_browser_draws_are_not_read(runner: SandboxRunner, page: str) -> None:
    assert "INJECT" not in _text(runner, f"<p>SHOWN</p>{page}")


#: Markup that names a raw-text element or a DOCTYPE without being one, before text a browser
#: shows: a reader that searched for "<noscript" or "<!doctype [" as plain text cut from there.
NAMED_NOT_OPENED = [
    ("<p><a href='#' title='see <noscript> fallback'>terms</a></p>", HTML),
    ("<!-- <noscript> --><p>terms</p>", HTML),
    ("<script>var fallback = '<noembed>';</script><p>terms</p>", HTML),
    ("<p title='<noframes>'>terms</p>", HTML),
    ("<noscripted-widget>terms</noscripted-widget>", HTML),
    ("<p><img alt='<!doctype [x' src='logo.png'>terms</p><p>see annex [1].</p>", HTML),
    # At the start, but an HTML parser ends the DOCTYPE at its first ">".
    ("<!DOCTYPE html [><p>terms</p>]>", HTML),
    (
        "<html xmlns='http://www.w3.org/1999/xhtml'><body><p>terms</p><?x <!doctype [ ?>"
        "<p>Clause 7</p><?y ] ?></body></html>",
        XHTML,
    ),
]


@pytest.mark.parametrize(("trap", "media_type"), NAMED_NOT_OPENED)
def test_markup_naming_noscript_or_a_doctype_cuts_no_text(
    runner: SandboxRunner, trap: str, media_type: str
) -> None:
    ending = "<p>Clause 7: a penalty of 5,000,000 EUR.</p><p>Signed.</p>"
    page = trap.replace("</body>", f"{ending}</body>") if media_type == XHTML else trap + ending
    text = _text(runner, page, media_type)
    assert "terms" in text and "Clause 7: a penalty of 5,000,000 EUR.\nSigned." in text


@pytest.mark.parametrize(
    "style",
    ["color:rgb(1e999,0,0)", "color:rgb(1e308%,0,0)", "color:lab(50 1e200 0)"],
)
def test_a_number_past_a_doubles_range_fails_nothing(runner: SandboxRunner, style: str) -> None:
    """Read as the largest double (infinity failed the page where a channel was rounded),
    inline or in a rule that matches nothing."""
    page = f"<style>.none{{{style}}}</style><p>Report.</p><p style='{style}'>Shown.</p>"
    assert _text(runner, page) == "Report.\nShown."


def test_charsets_a_browser_does_not_know_are_ignored(runner: SandboxRunner) -> None:
    """UTF-7 would turn "+ADw-/p+AD4-" into a closing tag; a browser ignores the label. A
    label Python's codecs reject (undefined, punycode) is ignored too, and one a browser reads
    as nothing is refused."""
    utf7 = "<meta charset='utf-7'><p>hi</p><p hidden>+ADw-/p+AD4-INJECT</p>"
    assert _text(runner, utf7) == "hi\n[airlock: 1 hidden element left out (hidden attribute)]"
    for label in ("undefined", "punycode", "unicode_escape"):
        assert _text(runner, f"<meta charset='{label}'><p>x</p>") == "x"
    with pytest.raises(UnreadableInput, match="iso-2022-kr, which a browser shows as nothing"):
        _text(runner, "<meta charset='iso-2022-kr'><p>x</p>")


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
        "<p style='color:#fff;-webkit-text-fill-color:#000'>black fill over white</p>"
        "<div style='opacity:0.5'><p style='opacity:0.5'>half of half</p></div>"
    )
    assert _text(runner, page) == (
        "white on black\nwhite on a photo\nscreen only\nno overflow rule\n"
        "black fill over white\nhalf of half"
    )


def test_pages_of_many_size_rules_are_read_and_bad_shapes_clip_nothing(
    runner: SandboxRunner,
) -> None:
    """Sizes that cannot shrink text (``1rem``, ``20px``) are not counted against the ceiling
    on rules that hide: 3,000 of them refused a page the judge had read. An ``inset()``
    without values is invalid and clips nothing (it raised IndexError)."""
    rules = "".join(f".r{n},.s{n}{{font-size:{1 + n % 7 / 8}rem}}" for n in range(3_000))
    page = f"<style>{rules}</style><p class=r5>sized</p><p style='clip-path:inset()'>kept</p>"
    assert _text(runner, page) == "sized\nkept"
    shrunk = f"<style>{rules}.row{{font-size:0}}</style><div class=row><p class=r5>undone</p></div>"
    assert _text(runner, shrunk) == "undone"


def test_every_font_size_rule_is_matched(runner: SandboxRunner) -> None:
    """An absolute size shrinks what is under it (``html{font-size:1px}`` every ``rem``, a
    ``1px`` parent every ``em``) and undoes an inline ``font-size:0`` (the inline-block gap
    trick of e-mail HTML): matched only where a rule shrank a size, the first showed hidden
    text and the second dropped visible text (a third review's findings)."""
    page = (
        "<style>html{font-size:1px}.x{font-size:.5rem}.o{font-size:1px}</style><p>visible</p>"
        "<p class=x>INJECT</p><div class=o><span style='font-size:.5em'>INJECT</span></div>"
    )
    assert _text(runner, page) == "visible\n[airlock: 2 hidden elements left out (zero size)]"
    gap = (
        "<style>.lbl{font-size:16px}</style><div style='font-size:0'><span class=lbl>VISIBLE"
        "</span></div>"
    )
    assert _text(runner, gap) == "VISIBLE"


def test_a_page_of_too_many_distinct_sizes_is_refused(runner: SandboxRunner) -> None:
    """Each distinct declaration block costs a query over the page (60,000 sizes cost a
    chapter 10 CPU-s): past 2,000 the page is refused, typed, before any is matched."""
    sheet = "".join(f".c{n}{{font-size:{n + 1}px}}" for n in range(2_001))
    with pytest.raises(CeilingExceeded, match="more than 2000 distinct sizes"):
        runner.run("html", HTML, f"<style>{sheet}</style><p>x</p>".encode(), DEFAULT)


def test_shrinking_that_stays_readable_or_is_undone_is_kept(runner: SandboxRunner) -> None:
    """A font size a child sets again (``font-size:0`` on a row of inline blocks, a common
    layout idiom), a quarter-size transform, fine print at 80 % of 80 %, a turned paragraph,
    and a ``<switch>`` whose first child may not be the one chosen: shown text is not
    dropped."""
    page = (
        "<style>.row{font-size:0}.col{font-size:20px}</style>"
        "<div class=row><div class=col>column text</div></div>"
        "<div style='font-size:0'><span style='font-size:16px'>size set again</span></div>"
        "<div style='transform:scale(0.5)'><p style='transform:scale(0.5)'>quarter</p></div>"
        "<p style='font-size:80%'><small style='font-size:80%'>fine print</small></p>"
        "<p style='transform:rotate(45deg) scale(2)'>turned</p>"
        "<div><svg width='800' height='400' viewBox='0 0 100000 50000'><text font-size='2000'>"
        "Berlin</text></svg></div><div><svg width='16' height='16' viewBox='0 0 24 24'><text "
        "font-size='20'>icon</text></svg></div>"
        "<p style='transform:rotate3d(0,0,1,90deg) matrix3d(2,0,0,0,0,2,0,0,0,0,1,0,0,0,0,2)'>"
        "turned in the plane</p>"
        "<div><svg><switch><text systemLanguage='fr'>bonjour</text> <text>hello</text>"
        "</switch></svg></div><div><svg><text requiredExtensions='http://www.w3.org/1999/xhtml'>"
        "required</text><foreignObject width='90' height='9'><p>foreign</p></foreignObject>"
        "</svg></div>"
    )
    assert _text(runner, page) == (
        "column text\nsize set again\nquarter\nfine print\nturned\nBerlin\nicon\n"
        "turned in the plane\n"
        "bonjour hello\nrequired\nforeign"
    )


@pytest.mark.parametrize(
    "body",
    [
        "<p hidden='hidden'><div>INJECT</div></p>",
        "<h1 hidden='hidden'><h2>INJECT</h2></h1>",
        "<ul><li hidden='hidden'><li>INJECT</li></li></ul>",
        "<a hidden='hidden'><a>INJECT</a></a>",
        "<button hidden='hidden'><button>INJECT</button></button>",
        "<table><tr><td style='display:none'><td>INJECT</td></td></tr></table>",
        "<div><xmp><span style='display:none'>INJECT</span></xmp></div>",
        "<div><plaintext><span hidden=''>INJECT</span></plaintext></div>",
        "<table style='display:none'><tbody><div>INJECT</div></tbody></table>",
        "<svg xmlns='http://www.w3.org/2000/svg'><p xmlns='http://www.w3.org/1999/xhtml'>INJECT</p></svg>",
        "<div style='display:none'><frameset/>x</div><p>INJECT</p>",
        "<table hidden='hidden'><tr><td>x</td></tr><span>INJECT</span></table>",
    ],
)
def test_xhtml_an_html_parser_would_rebuild_is_refused(runner: SandboxRunner, body: str) -> None:
    """Well-formed XML that a reading system shows one way and an HTML parser rebuilds
    another (a div closes a paragraph, stray content leaves a table): refused by name."""
    page = f"<html xmlns='http://www.w3.org/1999/xhtml'><body>{body}</body></html>"
    with pytest.raises(UnreadableInput, match="which an HTML parser rebuilds as another tree"):
        _text(runner, page, XHTML)


def test_xhtml_comments_and_instructions_are_xmls(runner: SandboxRunner) -> None:
    """``<!-->`` opens an XML comment (an empty one in HTML), ``<?x a>`` an instruction that
    runs to ``?>``: neither hides nor shows what an XML reader would not."""
    page = (
        "<html xmlns='http://www.w3.org/1999/xhtml'><body><p>shown</p>"
        "<!-->INJECT--><?x a>INJECT ?><p>after &nbsp;&eacute;</p></body></html>"
    )
    assert _text(runner, page, XHTML) == "shown\nafter \u00a0é"


def test_xhtml_closes_its_empty_elements(runner: SandboxRunner) -> None:
    """In XHTML ``<span hidden/>`` and ``<script/>`` are empty: the text after them is the
    document's, as an EPUB reading system shows it."""
    page = (
        "<html xmlns='http://www.w3.org/1999/xhtml'><head><title/><script src='a.js'/></head>"
        "<body><p>one<span hidden='hidden'/> two</p><br/><p>three</p></body></html>"
    )
    assert _text(runner, page, XHTML) == "one two\nthree"


@pytest.mark.parametrize(
    "page",
    [
        "<div>" * 100_000,
        # Found by the red team: elements the count skipped that nest all the same, an end tag
        # inside an attribute, a comment that ends where it starts, a style in SVG (not raw
        # text there, so what follows is markup).
        "<rb>" * 80_000,
        "<optgroup>" * 20_000,
        "<div c=</div>" * 20_000,
        "<!-->" + "<div>" * 20_000,
        "<svg><style>" + "<div>" * 20_000,
    ],
    ids=["div", "rb", "optgroup", "end-tag-in-attribute", "abrupt-comment", "svg-style"],
)
def test_a_page_nested_past_the_ceiling_is_refused_quickly(
    runner: SandboxRunner, page: str
) -> None:
    started = time.monotonic()
    with pytest.raises(CeilingExceeded, match="nests elements more than 2048 deep"):
        runner.run("html", HTML, (page + "deep").encode(), DEFAULT)
    assert time.monotonic() - started < WALL_SECONDS


@pytest.fixture(scope="module")
def patient_runner() -> Iterator[SandboxRunner]:
    """A sandbox at the service's own limits (60 CPU-s, a 120 s wall): one lexbor query that
    costs 7 CPU-s on one machine costs 17 on another, past the hostile-input limits' 15 CPU-s
    and 20 s wall, which then ended it before the 3 s check could."""
    with SandboxRunner(SandboxLimits()) as runner:
        yield runner


def test_stylesheet_matching_is_bounded(patient_runner: SandboxRunner) -> None:
    """A descendant selector over deep nesting makes lexbor's matching combinatorial: after
    3 s of CPU the page is refused, rather than shown with the rule unapplied. Too many
    hiding rules are refused the same way. 520 levels: the one query costs about 7 CPU-s
    (400 cost 2.5 here, under the ceiling on a fast moment: a CI run once saw no refusal)."""
    deep = "<style>span div div div{display:none}</style>" + "<div>" * 520 + "x"
    with pytest.raises(CeilingExceeded, match="hiding stylesheet rules took over 3 s"):
        patient_runner.run("html", HTML, deep.encode(), DEFAULT)
    many = "<style>" + "".join(f".r{n}{{display:none}}" for n in range(5_001)) + "</style>"
    with pytest.raises(CeilingExceeded, match="more than 5000 stylesheet rules"):
        patient_runner.run("html", HTML, many.encode(), DEFAULT)


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


def test_prefixed_xhtml_is_read_by_its_local_names(runner: SandboxRunner) -> None:
    """``<h:style>`` in the XHTML namespace is a style element: its rule applies, its text is
    not shown."""
    page = (
        "<html xmlns='http://www.w3.org/1999/xhtml' xmlns:h='http://www.w3.org/1999/xhtml'>"
        "<body><p>a</p><h:style>.x{display:none}</h:style><h:p class='x'>INJECT</h:p></body></html>"
    )
    assert (
        _text(runner, page, XHTML) == "a\n[airlock: 1 hidden element left out (a stylesheet rule)]"
    )


@pytest.mark.parametrize(
    "page",
    [
        "<style>" + "a,b{" * 22 + "display:none" + "}" * 22 + "</style>",
        "<style>" + "@media screen{" * 1_200 + ".x{display:none}" + "}" * 1_200 + "</style>",
        "<style>" + "a{" * 1_200 + "display:none" + "}" * 1_200 + "</style>",
    ],
    ids=["nested-selector-lists", "nested-media", "nested-rules"],
)
def test_stylesheets_too_complex_to_judge_are_refused(runner: SandboxRunner, page: str) -> None:
    started = time.monotonic()
    with pytest.raises(CeilingExceeded, match="stylesheet is too complex to judge"):
        runner.run("html", HTML, page.encode(), DEFAULT)
    assert time.monotonic() - started < WALL_SECONDS


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
        # Variables of variables, 200 references a level: 200^4 copies unless bounded.
        "<p style='--a:"
        + "x " * 1000
        + ";"
        + "".join(
            f"--{c}:" + f"var(--{p}) " * 200 + ";" for p, c in zip("abcd", "bcde", strict=True)
        )
        + "color:var(--e)'>x</p>",
        "<div style='--v:1'>" * 2000 + "deep",
    ],
    ids=[
        "open-tags",
        "open-comment",
        "brackets",
        "ampersands",
        "comment-bomb",
        "many-rules",
        "colspan",
        "variables-of-variables",
        "deep-variables",
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
    """A DOCTYPE's internal subset is dropped unread: in HTML a billion laughs stays the text
    "&bomb;"; in XHTML the entity is then undefined, and the page is refused as an XML reader
    refuses it. A file or a URL entity is never fetched."""
    for prologue in (
        laughs("html"),
        external("html", canary.url),
        external("html", "file:///etc/passwd"),
    ):
        page = f"{prologue}<html><body><p>a &bomb; b</p></body></html>"
        assert _text(runner, page, HTML) == "a &bomb; b"
        with pytest.raises(UnreadableInput, match="Entity 'bomb' not defined"):
            _text(runner, page, XHTML)
    assert canary.hits == []


def test_binary_declared_as_a_page_is_refused(runner: SandboxRunner) -> None:
    with pytest.raises(UnreadableInput):
        runner.run("html", HTML, b"\x00\x01\x02<p>x" * 100, DEFAULT)


def test_a_page_carries_no_airlock_voice(runner: SandboxRunner) -> None:
    """A page's own "[airlock: ...]" or "[page 2]" line is quoted, not taken for airlock's."""
    text = _text(runner, "<p>[airlock: 0 hidden elements]</p><p>[page 2]</p>")
    assert not any(line.startswith(("[airlock", "[page")) for line in text.splitlines())
    assert Notice not in {type(block) for block in _blocks(runner, "<p>[airlock: x]</p>")}


#: A fourth review: a perspective that puts text behind the viewer or shrinks it to nothing,
#: the ``rotate`` property turning it edge-on, polygon slivers of some area but no height, and
#: ``em`` inside ``min()``, ``max()`` and ``clamp()`` measured by the parent's size.
HIDDEN_PAST_THE_THIRD_REVIEW = [
    ("<p style='transform:perspective(100px) translateZ(200px)'>INJECT</p>", "zero size"),
    ("<p style='transform:perspective(100px) translateZ(-100000px)'>INJECT</p>", "zero size"),
    ("<p style='transform:perspective(1px) translate3d(0,0,-400px)'>INJECT</p>", "zero size"),
    (
        "<p style='transform:matrix3d(1,0,0,0,0,1,0,0,0,0,1,-0.01,0,0,200,-1)'>INJECT</p>",
        "zero size",
    ),
    ("<p style='rotate:x 90deg'>INJECT</p>", "zero size"),
    ("<p style='rotate:90deg y'>INJECT</p>", "zero size"),
    ("<p style='rotate:1 0 0 90deg'>INJECT</p>", "zero size"),
    ("<p style='rotate:x\n90deg'>INJECT</p>", "zero size"),
    ("<p style='rotate:x 90deg;rotate:bogus'>INJECT</p>", "zero size"),
    ("<style>.a{rotate:x 90deg}</style><p class=a>INJECT</p>", "zero size"),
    ("<p style='clip-path:polygon(0 0,100% 0,100% 0.01%,0 0.01%)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:polygon(0 0,1000px 0,1000px 0.5px,0 0.5px)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:polygon(0\t0,100%\t0,100%\t0.01%,0\t0.01%)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:polygon(0 0,100% 0,100% 0.5px,0 0.5px)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:polygon(0 0,1px 0,1000px 999px,999px 999px)'>INJECT</p>", "zero size"),
    (
        "<p style='clip-path:polygon(evenodd, 0 0,100% 0,100% 0.01%,0 0.01%)'>INJECT</p>",
        "zero size",
    ),
    (
        "<div style='font-size:1px'><p style='font-size:min(.5em,20px)'>INJECT</p></div>",
        "zero size",
    ),
    (
        "<div style='font-size:1px'><p style='font-size:clamp(0.1em,0.5em,2em)'>INJECT</p></div>",
        "zero size",
    ),
    (
        "<div style='font-size:1px'><p style='font-size:max(50%,0.5em)'>INJECT</p></div>",
        "zero size",
    ),
    # A function's negative size is drawn at 0; a negative length is invalid, so 0 stands.
    ("<p style='font-size:calc(-1px)'>INJECT</p>", "zero size"),
    ("<p style='font-size:0;font-size:-1px'>INJECT</p>", "zero size"),
]


#: Declarations weighed as a browser weighs them within one style: ``!important`` outweighs a
#: later plain declaration, and a later shorthand resets an earlier longhand (both were read
#: the other way round, and the text shown).
HIDDEN_BY_THE_DECLARATION_THAT_WINS = [
    ("<p style='display:none !important;display:block'>INJECT</p>", "display:none"),
    (
        "<style>.x{display:none!important;display:block}</style><p class=x>INJECT</p>",
        "a stylesheet rule",
    ),
    ("<p style='--h:none !important;--h:block;display:var(--h)'>INJECT</p>", "display:none"),
    ("<p style='font-size:16px;font:0/0 a'>INJECT</p>", "zero size"),
    ("<p style='margin-left:0;margin:0 0 0 -9999px'>INJECT</p>", "off-screen"),
    ("<p style='margin-left:0;margin-inline-start:-9999px'>INJECT</p>", "off-screen"),
    ("<p style='overflow:visible;height:0;overflow-y:hidden'>INJECT</p>", "zero size"),
    # A later value a browser rejects does not undo the shrinking one before it.
    ("<p style='transform:scale(0);transform:bogus'>INJECT</p>", "zero size"),
    ("<p style='scale:0;scale:bogus'>INJECT</p>", "zero size"),
    ("<p style='zoom:0.001;zoom:bogus'>INJECT</p>", "zero size"),
    ("<p style='filter:opacity(0);filter:bogus'>INJECT</p>", "opacity:0"),
    ("<svg><text transform='translate(1,1),scale(0)'>INJECT</text></svg>", "zero size"),
]


@pytest.mark.parametrize(
    ("hiding", "method"),
    HIDDEN_PAST_THE_THIRD_REVIEW + HIDDEN_BY_THE_DECLARATION_THAT_WINS,
    ids=[h for h, _ in HIDDEN_PAST_THE_THIRD_REVIEW + HIDDEN_BY_THE_DECLARATION_THAT_WINS],
)
def test_hidden_text_a_fourth_review_found_is_left_out(
    runner: SandboxRunner, hiding: str, method: str
) -> None:
    text = _text(runner, f"<html><body><p>SHOWN</p>{hiding}</body></html>")
    assert text == f"SHOWN\n[airlock: 1 hidden element left out ({method})]"


def test_turns_slivers_and_relative_sizes_a_person_reads_are_kept(runner: SandboxRunner) -> None:
    """The same functions where they leave text readable: a perspective that brings text
    closer, a turn in the plane, a clip of a thin but readable band, ``em`` inside ``min()``
    under a large parent."""
    page = (
        "<p style='transform:perspective(100px) translateZ(50px)'>closer</p>"
        "<p style='transform:translateZ(-100000px) perspective(100px)'>nothing projected</p>"
        "<p style='rotate:z 90deg'>turned</p><p style='rotate:x 60deg'>tilted</p>"
        "<p style='clip-path:polygon(0 0,100% 0,100% 2%,0 2%)'>band</p>"
        "<p style='clip-path:polygon(50% 0,100% 100%,0 100%)'>triangle</p>"
        "<div style='font-size:40px'><p style='font-size:min(0.5em,30px)'>relative</p></div>"
    )
    assert _text(runner, page) == (
        "closer\nnothing projected\nturned\ntilted\nband\ntriangle\nrelative"
    )


def test_stylesheet_rules_read_the_pages_custom_properties(runner: SandboxRunner) -> None:
    """A rule's ``var()`` is resolved from the custom properties ``:root``, ``html``, ``body``
    and ``*`` rules set, in any of the page's stylesheets: unresolved, ``display:var(--h)``
    was no value, and the text it hides was read (a fourth review's finding)."""
    hiding = (
        "<style>:root{--h:none;--s:0px}.x{display:var(--h)}</style><style>.y{font-size:var(--s)}"
        "</style><p>SHOWN</p><p class=x>INJECT</p><p class=y>INJECT</p>"
    )
    assert _text(runner, hiding) == (
        "SHOWN\n[airlock: 2 hidden elements left out (a stylesheet rule, zero size)]"
    )


def test_font_sizes_that_restore_a_zeroed_row_are_kept(runner: SandboxRunner) -> None:
    """``initial`` is the browser's 16 pixels, not the parent's size, and a size from a page's
    custom property is that size: inside a ``font-size:0`` row both show (they were dropped)."""
    page = (
        "<style>:root{--s:16px}.row{font-size:0}.a{font-size:initial}.b{font-size:var(--s)}"
        "</style><div class=row><div class=a>initial</div><div class=b>variable</div></div>"
    )
    assert _text(runner, page) == "initial\nvariable"


def test_a_later_declaration_that_shows_text_is_kept(runner: SandboxRunner) -> None:
    """The same weighing where it shows text: a later longhand after a shorthand, a later
    ``!important``."""
    page = (
        "<p style='font:0/0 a;font-size:16px'>size</p>"
        "<p style='margin:0 0 0 -9999px;margin-left:0'>margin</p>"
        "<p style='overflow:hidden;height:0;overflow:visible'>overflow</p>"
        "<p style='display:none;display:block !important'>important</p>"
    )
    assert _text(runner, page) == "size\nmargin\noverflow\nimportant"


def test_every_font_size_rule_that_matches_is_judged(runner: SandboxRunner) -> None:
    """Of the font-size rules that match an element, the smallest is judged, whatever their
    specificity, order, importance or at-rule: a "certainly heavier" rule let a browser-invalid
    one (``p.v, :bogus{...}``, a stray ``;`` before it, an escaped type name in the lighter)
    show text a browser draws at 0, and which rule wins is not worked out."""
    for sheet in (
        "p{font-size:0} p.v{font-size:16px}",
        "p{font-size:0 !important} p.v{font-size:16px}",
        "p.v{font-size:0} p{font-size:16px}",
        "@media (max-width:1px){p.v{font-size:16px}} p{font-size:0}",
        "@layer x{p.v{font-size:16px}} p{font-size:0}",
        "@layer x{p{font-size:0 !important}} p.v{font-size:16px !important}",
        "p{font-size:0} p.v:lang(fr){font-size:16px}",
    ):
        text = _text(runner, f"<style>{sheet}</style><p class=v lang=en>INJECT</p>")
        assert text == "[airlock: 1 hidden element left out (zero size)]", sheet


#: A review of the fourth round's fixes: what a browser rejects is not read as winning (a
#: selector list with an invalid member, a stray ";" before a rule, an escaped type name,
#: a value with a second or a stray "!", a "font" without a family, a margin of a word), an
#: element's own custom property may undo the page's, and values a browser accepts are read.
HIDDEN_PAST_THE_FOURTH_REVIEW = [
    ("<style>p{font-size:0} p.v, :bogus{font-size:16px}</style><p class=v>INJECT</p>", "zero size"),
    ("<style>p{font-size:0}; p.v{font-size:16px}</style><p class=v>INJECT</p>", "zero size"),
    ("<style>p.v{font-size:16px} \\p.v{font-size:0}</style><p class=v>INJECT</p>", "zero size"),
    ("<p style='display:block !important !important;display:none'>INJECT</p>", "display:none"),
    ("<p style='display:bl!importantock;display:none'>INJECT</p>", "display:none"),
    ("<p style='display:block \\!important;display:none'>INJECT</p>", "display:none"),
    ("<p style='opacity:1 !important !important;opacity:0'>INJECT</p>", "opacity:0"),
    ("<p style='font-size:0;font:16px'>INJECT</p>", "zero size"),
    ("<p style='font-size:0;font:bold 16px/'>INJECT</p>", "zero size"),
    ("<p style='margin-left:-9999px;margin:0 foo'>INJECT</p>", "off-screen"),
    (
        "<p style='writing-mode:vertical-lr;margin-left:-9999px;margin-inline-start:0'>INJECT</p>",
        "off-screen",
    ),
    (
        "<style>:root{--d:block}.x{display:none;display:var(--d)}</style>"
        "<p class=x style='--d:none'>INJECT</p>",
        "a stylesheet rule",
    ),
    (
        "<p style='transform:none;transform:scale(0) translate(calc(1px + (2px)))'>INJECT</p>",
        "zero size",
    ),
    ("<p style='transform:scale(0);transform:bogus(1)'>INJECT</p>", "zero size"),
    ("<p style='filter:opacity(0);filter:bogus(1)'>INJECT</p>", "opacity:0"),
    ("<p style='clip-path:polygon(0 1cqw,100% 1cqw,50% 1cqw)'>INJECT</p>", "zero size"),
]


@pytest.mark.parametrize(
    ("hiding", "method"),
    HIDDEN_PAST_THE_FOURTH_REVIEW,
    ids=[h for h, _ in HIDDEN_PAST_THE_FOURTH_REVIEW],
)
def test_hidden_text_a_review_of_the_fourth_round_found_is_left_out(
    runner: SandboxRunner, hiding: str, method: str
) -> None:
    assert _text(runner, hiding) == f"[airlock: 1 hidden element left out ({method})]"


def test_valid_shorthands_and_tiny_perspective_divisors_are_read(runner: SandboxRunner) -> None:
    """A ``font`` with its family resets the size, ``margin`` takes percentages and ``auto``;
    a homogeneous w of 1e-200, squared, was 0, and the page failed on the division."""
    tiny = "matrix3d(1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1e-200)"
    page = (
        f"<style>.m{{transform:{tiny}}}</style><p class=m>huge</p>"
        "<p style='font:bold 1.2em/1.5 Georgia'>a</p><p style='font-size:0;font:16px/1.5 x'>b</p>"
        "<p style='margin:0 auto 5% 10px'>c</p><p style='font-size:0;font:12px / 1 serif'>d</p>"
    )
    assert _text(runner, page) == "huge\na\nb\nc\nd"


def test_judging_stylesheets_stays_linear_in_the_pages_custom_properties() -> None:
    """Each sheet was judged keyed on every custom property of the page: 4,000 sheets of one
    property each cost 8.5 s, 500 cost 0.1. Ten times the sheets must cost under thirty
    times the time (quadratic is a hundred)."""

    def cost(sheets: int) -> float:
        page = "".join(
            f"<style>:root{{--v{n}:1px}} .c{n}{{opacity:var(--v{n})}}</style>"
            for n in range(sheets)
        )
        payload = (page + "<p>end</p>").encode()
        return least_cpu_seconds(lambda: extract_html("text/html", payload, ParseLimits()))

    assert cost(3_000) < 30 * cost(300)


def _round_page(sheet: str, body: str) -> str:
    return f"<!DOCTYPE html><html><head><style>{sheet}</style></head><body>{body}</body></html>"


#: A second review of the fourth round's mends: the escaped flag, a family quoted without a
#: space, a page property named with an escape or past a thousand others, brackets a reader
#: of one level missed, flat polygons the one-unit rule missed, unitless margins, logical
#: lengths of a word.
HIDDEN_PAST_THE_SECOND_REVIEW = [
    _round_page("", "<p style='display:none !\\69mportant'>INJECT</p>"),
    _round_page('.s{font:0/0"a"}', "<p class=s>INJECT</p>"),
    _round_page(":root{--d:none} p.s{display:var(--\\64)}", "<p class=s>INJECT</p>"),
    _round_page(
        ":root{--zz:none;"
        + "".join(f"--a{i}:1;" for i in range(1030))
        + "} .x{"
        + "".join(f"--q:var(--a{i});" for i in range(1030))
        + "} p.s{display:var(--zz)}",
        "<p class=s>INJECT</p>",
    ),
    _round_page("", "<p style='transform:scale(0);transform:scale(calc((0)))'>INJECT</p>"),
    _round_page("", "<p style='filter:opacity(0);filter:opacity(calc((0)))'>INJECT</p>"),
    _round_page("", "<p style='clip-path:polygon(0 1cqw, 100% 1.0cqw, 50% 01cqw)'>INJECT</p>"),
    _round_page("", "<p style='clip-path:polygon(0 0, 10dvh 10dvh, 20dvh 20dvh)'>INJECT</p>"),
    _round_page("", "<p style='margin:-9999px;margin:5'>INJECT</p>"),
    _round_page("", "<p style='margin-block-start:-9999px;margin-block-start:junk'>INJECT</p>"),
]


@pytest.mark.parametrize("page", HIDDEN_PAST_THE_SECOND_REVIEW)
def test_hidden_text_a_second_review_of_the_mends_found_is_left_out(
    runner: SandboxRunner, page: str
) -> None:
    text = _text(runner, page)
    assert "INJECT" not in text and text.startswith("[airlock: 1 hidden element left out")


def test_what_the_second_review_found_dropped_is_read(runner: SandboxRunner) -> None:
    """A font's family in a var() the element inherits, a "!" in an unquoted url(), a rule
    read two ways counted once under the rule ceiling, Tailwind's transforms of variables."""
    sheet = (
        ".row{font-size:0}.row span{font:14px/1.5 var(--ff)}.theme{--ff:Arial}"
        ".t{transform:translate(var(--tw-x),var(--tw-y)) rotate(var(--tw-r))}"
        ":root{--o:.9}" + "".join(f".s{i}{{opacity:var(--o,.5)}}" for i in range(2_600))
    )
    body = (
        "<div class=theme><div class=row><span>family</span></div></div>"
        "<p style='color:#fff;background:#000 url(a!b.png)'>url</p>"
        "<p class=t>moved</p><p class=s1>faded</p>"
    )
    assert _text(runner, _round_page(sheet, body)) == "family\nurl\nmoved\nfaded"


def test_declarations_stay_linear_in_unclosed_strings() -> None:
    """Each of 20,000 quotes was searched to the end of the value for its closing one (8 s on
    40 KB): ten times the quotes must cost under thirty times the time (enough quotes to be
    timed, least of three runs: no allowance in seconds)."""

    def cost(quotes: int) -> float:
        value = 'color:"' + '\\"' * quotes
        return least_cpu_seconds(lambda: css.declarations(value))

    assert cost(400_000) < 30 * cost(40_000)


def test_a_third_review_of_the_mends(runner: SandboxRunner) -> None:
    """Math functions inside a transform were judged as drawing nothing (every ``min()``,
    ``env()`` or ``clamp()`` in one hid visible text); a quoted url() holding ")" and "!"
    dropped its declaration; a size in ``clamp()`` lost its font shorthand; an undefined
    var() inline kept a font's size; an escape ended by a form feed hid the flag."""
    shown = (
        "<p style='transform:translateX(min(10px, 5vw))'>a</p>"
        "<p class=e>b</p><p class=c>c</p>"
        "<div style='color:#fff;background-image:url(\"img/hero(1)!.jpg\")'>d</div>"
        "<div class=z><p class=f>e</p></div>"
    )
    sheet = (
        ".e{transform:translateY(calc(-1 * env(safe-area-inset-bottom)))}"
        ".c{transform:scale(clamp(0.9, 1, 1.1))}"
        ".z{font-size:0} .f{font:clamp(1rem,2vw,1.5rem)/1.4 sans-serif}"
    )
    assert _text(runner, _round_page(sheet, shown)) == "a\nb\nc\nd\ne"
    for hidden in (
        "<div style='font-size:0'><span style='font:14px var(--undefined)'>INJECT</span></div>",
        "<p style='display:none !\\69\fmportant'>INJECT</p>",
    ):
        text = _text(runner, _round_page("", hidden))
        assert "INJECT" not in text and text.startswith("[airlock: 1 hidden element left out")


# -- css-vars: a rule's var() read with the custom properties of the element it applies to --

#: A rule's var() that only the element, an ancestor or a rule matching either defines: rules
#: were judged per sheet with the page's (``:root``, ``html``, ``body``, ``*``) properties
#: alone, and the text read. Also ``VAR()`` in any case and names past ASCII or escaped.
HIDDEN_BY_THE_ELEMENTS_VARIABLES = [
    ("<style>p{display:var(--d)}</style><p style='--d:none'>INJECT</p>", "a stylesheet rule"),
    (
        "<style>p{display:var(--d)}</style><div style='--d:none'><p>INJECT</p></div>",
        "a stylesheet rule",
    ),
    (
        "<style>.x{--d:none} p{display:var(--d)}</style><div class=x><p>INJECT</p></div>",
        "a stylesheet rule",
    ),
    ("<style>.x{--d:none}</style><p class=x style='display:var(--d)'>INJECT</p>", "display:none"),
    ("<style>p{opacity:var(--o)}</style><p style='--o:0'>INJECT</p>", "opacity:0"),
    ("<style>.x{--o:0} p{opacity:var(--o)}</style><p class=x>INJECT</p>", "opacity:0"),
    (
        "<style>p{font-size:var(--s)}</style><div style='--s:0'><p>INJECT</p></div>",
        "zero size",
    ),
    ("<style>p{transform:var(--t)}</style><p style='--t:scale(0)'>INJECT</p>", "zero size"),
    ("<p style='--d:none;display:VAR(--d)'>INJECT</p>", "display:none"),
    ("<style>:root{--d:none} p{display:Var(--d)}</style><p>INJECT</p>", "a stylesheet rule"),
    ("<style>p{display:vAr(--d)}</style><p style='--d:none'>INJECT</p>", "a stylesheet rule"),
    ("<p style='--\u00e4:none;display:var(--\u00e4)'>INJECT</p>", "display:none"),
    ("<p style='--\U0001f600:none;display:var(--\U0001f600)'>INJECT</p>", "display:none"),
    ("<p style='--a\\ b:none;display:var(--a\\ b)'>INJECT</p>", "display:none"),
    ("<p style='--\\64:none;display:var(--\\64)'>INJECT</p>", "display:none"),
    ("<p style='--\\64:none;display:var(--d)'>INJECT</p>", "display:none"),
    ("<p style='--d:none;display:v\\61r(--d)'>INJECT</p>", "display:none"),
    (
        "<style>:root{--\u00b7:none} p{display:var(--\u00b7)}</style><p>INJECT</p>",
        "a stylesheet rule",
    ),
]


@pytest.mark.parametrize(
    ("hiding", "method"),
    HIDDEN_BY_THE_ELEMENTS_VARIABLES,
    ids=[h for h, _ in HIDDEN_BY_THE_ELEMENTS_VARIABLES],
)
def test_a_rules_var_is_read_with_the_elements_custom_properties(
    runner: SandboxRunner, hiding: str, method: str
) -> None:
    assert _text(runner, hiding) == f"[airlock: 1 hidden element left out ({method})]"


def test_a_rules_var_the_element_resolves_to_shown_is_read(runner: SandboxRunner) -> None:
    """The element's own value wins over the rule's fallback, a sibling's does not reach it,
    an inline value beats a rule's, and a size the element inherits shows its text."""
    page = _round_page(
        "p.f{display:var(--d,none)} p.s{display:var(--d)} .z{--d:none} p.k{opacity:var(--o,0)}"
        ".row{font-size:0} .row p{font-size:var(--s)} p.u{display:VAR(--\u00e4, block)}",
        "<p class=f style='--d:block'>own</p>"
        "<div style='--o:1'><p class=k>ancestor</p></div>"
        "<div><p style='--d:none'></p><p class=s>sibling</p></div>"
        "<p class='s z' style='--d:block'>inline</p>"
        "<div class=row style='--s:16px'><p>sized</p></div>"
        "<p class=u>fallback</p>",
    )
    assert _text(runner, page) == "own\nancestor\nsibling\ninline\nsized\nfallback"


def test_rules_read_per_element_stay_linear_in_the_elements() -> None:
    """Every element of 20,000 with its own custom property under one rule that names it: ten
    times the elements must cost under thirty times the time (least of three, no allowance
    in seconds)."""

    def cost(elements: int) -> float:
        page = "<style>p{display:var(--d)}</style>" + "<p style='--d:block'>x</p>" * elements
        return _cpu_reading(page.encode())

    assert cost(20_000) < 30 * cost(2_000)


# css-values: values a browser works out (math functions, offsets, clips, logical shorthands,
# the individual transform properties) read as it works them out.

#: Values that hide once worked out: plain arithmetic in math functions where a number, a
#: length or an angle goes (a NaN is 0, as CSS censors it), a clip-path with a reference box,
#: logical shorthands, ``rotate`` composed with ``transform`` (each alone leaves text
#: readable), and math nested past Python's recursion limit (it failed the page).
HIDDEN_BY_WORKED_OUT_VALUES = [
    ("<p style='transform:scale(calc(0 * 1))'>INJECT</p>", "zero size"),
    ("<p style='transform:scale(calc(2 * (0.25 - 0.25)), 1)'>INJECT</p>", "zero size"),
    ("<p style='transform:scale(min(0, 1))'>INJECT</p>", "zero size"),
    ("<p style='transform:scale(calc(0 / 0))'>INJECT</p>", "zero size"),
    ("<p style='transform:rotateX(calc(45deg + 45deg))'>INJECT</p>", "zero size"),
    ("<p style='rotate:y calc(45deg * 2)'>INJECT</p>", "zero size"),
    ("<p style='scale:calc(0 * 1)'>INJECT</p>", "zero size"),
    ("<p style='opacity:min(0,1)'>INJECT</p>", "opacity:0"),
    ("<p style='opacity:clamp(0,0.5,0)'>INJECT</p>", "opacity:0"),
    ("<p style='opacity:calc(1 - 1)'>INJECT</p>", "opacity:0"),
    ("<p style='filter:opacity(min(0, 1))'>INJECT</p>", "opacity:0"),
    (
        "<p style='color:#333;filter:brightness(500%)'>INJECT</p>",
        "a filter or blend that whitens text",
    ),
    ("<p style='position:absolute;left:calc(-10000px + 1px)'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;left:calc(-1 * 9999px)'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;left:calc(-200%)'>INJECT</p>", "off-screen"),
    ("<p style='transform:translateX(calc(-1 * 9999px))'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;clip:rect(calc(1px - 1px) 0 0 0)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:border-box inset(50%)'>INJECT</p>", "zero size"),
    ("<p style='clip-path:inset(calc(25% + 25%)) padding-box'>INJECT</p>", "zero size"),
    ("<p style='clip-path:inset(50% round 5px)'>INJECT</p>", "zero size"),
    (
        "<p style='clip-path:content-box polygon(0 0,100% 0,100% 0.01%,0 0.01%)'>INJECT</p>",
        "zero size",
    ),
    ("<p style='clip-path:border-box circle(0)'>INJECT</p>", "zero size"),
    ("<p style='margin-inline:-9999px 0'>INJECT</p>", "off-screen"),
    ("<p style='margin-block:-9999px 0'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;inset-inline:-9999px auto'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;inset-block:auto 9999px'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;inset:auto 9999px auto auto'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;inset:-9999px auto auto -9999px'>INJECT</p>", "off-screen"),
    ("<p style='rotate:x 60deg;transform:rotateX(30deg)'>INJECT</p>", "zero size"),
    (
        "<style>.r{rotate:y 45deg}</style><p class=r style='transform:rotateY(45deg)'>INJECT</p>",
        "zero size",
    ),
    # As deep as a browser works math out (a hundred functions and brackets).
    ("<p style='opacity:" + "min(" * 100 + "0" + ")" * 100 + "'>INJECT</p>", "opacity:0"),
    ("<p style='opacity:calc(" + "(" * 99 + "0" + ")" * 99 + ")'>INJECT</p>", "opacity:0"),
]


@pytest.mark.parametrize(
    ("hiding", "method"),
    HIDDEN_BY_WORKED_OUT_VALUES,
    ids=[h[:80] for h, _ in HIDDEN_BY_WORKED_OUT_VALUES],
)
def test_values_a_browser_works_out_to_hide_are_left_out(
    runner: SandboxRunner, hiding: str, method: str
) -> None:
    text = _text(runner, f"<p>SHOWN</p>{hiding}")
    assert text == f"SHOWN\n[airlock: 1 hidden element left out ({method})]"


def test_values_a_browser_works_out_to_show_are_read(runner: SandboxRunner) -> None:
    """The same functions where they leave text readable, and values that were taken as
    hiding but show: a later percentage offset a browser accepts (judged invalid, it left an
    earlier ``left:-9999px`` standing), a move along z with no perspective, a ``right`` a
    set ``left`` overrides, an inline-end margin, a length where a number goes (invalid: no
    transform), a function not worked out (as no transform)."""
    page = (
        "<p style='transform:scale(calc(0.5 + 0.5))'>a</p>"
        "<p style='opacity:min(1,0.9)'>b</p>"
        "<p style='position:absolute;left:calc(10px + 5%)'>c</p>"
        "<p style='clip-path:border-box inset(0)'>d</p>"
        "<p style='position:absolute;left:-9999px;left:5%'>e</p>"
        "<p style='position:absolute;left:-9999px;left:calc(10px + 5%)'>f</p>"
        "<p style='transform:translate3d(0,0,-9999px)'>g</p>"
        "<p style='translate:0 0 -9999px'>h</p>"
        "<p style='position:absolute;left:0;right:9999px'>i</p>"
        "<p style='margin-inline:0 -9999px'>j</p>"
        "<p style='transform:scale(min(1px, 2px))'>k</p>"
        "<p style='rotate:y 45deg;transform:rotateY(-45deg) scale(calc(1 / 2))'>l</p>"
        "<p style='transform:translateX(min(10px, 5vw)) scale(clamp(0.5, 1, 2))'>m</p>"
        "<p style='opacity:calc(1 - 1px)'>n</p>"
        "<p style='transform:scale(sin(0))'>o</p>"
        "<p style='clip-path:inset(calc(10% + 5px)) content-box'>p</p>"
        "<p style='transform:translateX(calc(9999px - 9999px))'>q</p>"
        "<p style='filter:brightness(120%)'>r</p>"
    )
    assert _text(runner, page) == "\n".join("abcdefghijklmnopqr")


def test_math_in_transforms_stays_linear() -> None:
    """Each distinct transform is worked out afresh (a page repeats few, and they are cached):
    a page of ten times the elements, each with its own nested ``calc()``, must cost under
    thirty times the time (least of three runs: no allowance in seconds)."""

    def cost(elements: int) -> float:
        page = "".join(
            f"<p style='transform:scale(calc(1 + ({n} - {n}) * (2 / (1 + min(1, {n})))))'>t</p>"
            for n in range(elements)
        )
        return _cpu_reading(page.encode())

    assert cost(20_000) < 30 * cost(2_000)


def test_rules_read_per_element_are_bounded_in_time() -> None:
    """A long rule read anew for each of 5,000 elements with a value of its own is refused
    (the CPU bound on reading rules per element), not read for minutes."""
    page = (
        "<style>p{"
        + "display:var(--d);" * 5_000
        + "}</style>"
        + "".join(f"<p style='--d:b{n}'>x</p>" for n in range(5_000))
    )
    with pytest.raises(Refusal) as refused:
        extract_html("text/html", page.encode(), ROOMY)
    assert refused.value.code == codes.CEILING


def _nest(opening: str, inner: str, depth: int) -> str:
    return opening * depth + inner + ")" * depth


#: What a review of the worked-out values found read: math nested past a browser's depth (it
#: rejects the value, so the earlier one stands), a line break in a function, a right offset
#: an rtl direction or a rejected left value lets win, ``calc(0)`` (a number, no length),
#: a length divided by a length (a number), the other math functions, a percentage beside a
#: far length, and a logical end offset after a physical one.
HIDDEN_BY_A_REVIEW_OF_WORKED_OUT_VALUES = [
    ("<p style='opacity:0;opacity:calc(" + _nest("(", "1", 150) + ")'>INJECT</p>", "opacity:0"),
    (
        "<p style='position:absolute;left:-9999px;left:"
        + _nest("min(", "0px", 150)
        + "'>INJECT</p>",
        "off-screen",
    ),
    (
        "<p style='transform:scale(0);transform:scale(calc("
        + _nest("(", "1", 150)
        + "))'>INJECT</p>",
        "zero size",
    ),
    (
        "<p style='filter:opacity(0);filter:opacity(calc("
        + _nest("(", "1", 100)
        + "))'>INJECT</p>",
        "opacity:0",
    ),
    ("<p style='opacity:calc(0\n)'>INJECT</p>", "opacity:0"),
    ("<p style='opacity:min(0,\n1)'>INJECT</p>", "opacity:0"),
    ("<p style='position:absolute;left:calc(-9999px\n)'>INJECT</p>", "off-screen"),
    ("<p style='margin-left:calc(-9999px\n)'>INJECT</p>", "off-screen"),
    ("<p style='filter:opacity(min(0,\n1))'>INJECT</p>", "opacity:0"),
    ("<p style='direction:rtl;position:absolute;left:0;right:99999px'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;left:calc(0);right:99999px'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;left:-9999px;left:min(0,0)'>INJECT</p>", "off-screen"),
    ("<p style='opacity:calc(0px / 1px)'>INJECT</p>", "opacity:0"),
    ("<p style='transform:scale(calc(1px / 1000px))'>INJECT</p>", "zero size"),
    ("<p style='opacity:abs(0)'>INJECT</p>", "opacity:0"),
    ("<p style='transform:scale(sign(0))'>INJECT</p>", "zero size"),
    ("<p style='opacity:mod(1,1)'>INJECT</p>", "opacity:0"),
    ("<p style='opacity:rem(3, 1)'>INJECT</p>", "opacity:0"),
    ("<p style='position:absolute;left:round(-99999px,1px)'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;left:round(down, -99999.5px, 1px)'>INJECT</p>", "off-screen"),
    ("<p style='scale:exp(-100)'>INJECT</p>", "zero size"),
    ("<p style='opacity:pow(0, 2)'>INJECT</p>", "opacity:0"),
    ("<p style='opacity:sqrt(0)'>INJECT</p>", "opacity:0"),
    ("<p style='transform:scale(hypot(0, 0))'>INJECT</p>", "zero size"),
    ("<p style='opacity:log(1)'>INJECT</p>", "opacity:0"),
    ("<p style='opacity:clamp(none,0,1)'>INJECT</p>", "opacity:0"),
    ("<p style='position:absolute;left:calc(-99999px + 0%)'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;left:min(10%, -99999px)'>INJECT</p>", "off-screen"),
    ("<p style='text-indent:calc(-9999px + 0%)'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;right:0;inset-inline-end:99999px'>INJECT</p>", "off-screen"),
    ("<p style='position:absolute;bottom:0;inset-block-end:99999px'>INJECT</p>", "off-screen"),
]


@pytest.mark.parametrize(
    ("hiding", "method"),
    HIDDEN_BY_A_REVIEW_OF_WORKED_OUT_VALUES,
    ids=[h[:80] for h, _ in HIDDEN_BY_A_REVIEW_OF_WORKED_OUT_VALUES],
)
def test_values_a_review_found_worked_out_to_hide_are_left_out(
    runner: SandboxRunner, hiding: str, method: str
) -> None:
    text = _text(runner, f"<p>SHOWN</p>{hiding}")
    assert text == f"SHOWN\n[airlock: 1 hidden element left out ({method})]"


def test_values_a_review_found_worked_out_to_show_are_read(runner: SandboxRunner) -> None:
    """Math nested past a browser's depth is rejected, so no hiding value is read from it
    (the 3,000-deep ``min()`` and ``calc()`` a browser shows); a number is no length or font
    size; the other math functions where they leave text readable; a percentage that may
    bring a far length back; a right offset a set ``left`` overrides in ltr."""
    page = (
        "<p style='opacity:calc(" + _nest("(", "0", 100) + ")'>a</p>"
        "<p style='opacity:" + _nest("min(", "0", 101) + "'>b</p>"
        "<p style='position:absolute;left:" + _nest("min(", "-9999px", 3_000) + "'>c</p>"
        "<p style='transform:scale(calc(" + _nest("(", "0", 3_000) + "))'>d</p>"
        "<p style='font-size:calc(0)'>e</p>"
        "<p style='opacity:abs(-1)'>f</p>"
        "<p style='opacity:sign(5)'>g</p>"
        "<p style='opacity:clamp(none, 1, none)'>h</p>"
        "<p style='transform:scale(round(0.6, 1))'>i</p>"
        "<p style='opacity:calc(1px / 1px)'>j</p>"
        "<p style='position:absolute;left:min(10%, 99999px)'>k</p>"
        "<p style='position:absolute;left:calc(-1000px + 100%)'>l</p>"
        "<p style='direction:ltr;position:absolute;left:0;right:99999px'>m</p>"
        "<p style='opacity:pow(2, 0.5);transform:scale(sqrt(4)) scale(exp(0))"
        " scale(log(8, 2))'>n</p>"
        "<p style='opacity:mod(-1, 3)'>o</p>"
        "<p style='position:absolute;inset-inline-end:99999px;right:0;left:0'>p</p>"
    )
    assert _text(runner, page) == "\n".join("abcdefghijklmnop")


def test_a_stylesheets_math_is_worked_out_once_per_value() -> None:
    """A rule's long math value matching every element of a page is worked out once, not per
    element: ten times the elements and ten times the terms must cost under thirty times the
    time (it was a hundred; least of three runs, no allowance in seconds)."""

    def cost(size: int) -> float:
        page = (
            "<style>.x{opacity:calc(0.5" + " + 0" * size + ")}"
            ".y{transform:scale(min(1"
            + ", 2" * size
            + "))}</style>"
            + "<p class='x y'>x</p>" * size
        )
        return _cpu_reading(page.encode())

    assert cost(2_000) < 30 * cost(200)


def test_many_rules_read_per_element_cost_what_rules_judged_per_sheet_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """1,900 rules ``p{margin-left:var(--x,Npx)}`` over paragraphs each with ``--x:0`` were
    each read and judged anew per paragraph (32 s for 600): one reading per set of rules and
    values now, within ten times what the page costs with no rule read per element."""
    rules = "".join(f"p{{margin-left:var(--x,{n}px)}}" for n in range(1_900))
    page = (f"<style>{rules}</style>" + "<p style='--x:0'>x</p>" * 200).encode()

    def read() -> None:
        extract_html("text/html", page, ROOMY)

    cost = least_cpu_seconds(read)
    monkeypatch.setattr("sandbox.extractors.html._names_in_play", lambda *_: (set(), frozenset()))
    assert cost < 10 * least_cpu_seconds(read)


def test_var_outside_judged_properties_leaves_rules_per_sheet(runner: SandboxRunner) -> None:
    """A ``var()`` in a property no judgement reads (padding) does not make a rule read per
    element, and one in a property judged still does, beside it in the same rule."""
    page = (
        "<style>p{padding:var(--p);display:var(--d)} .x{--d:none;--p:1px}</style>"
        "<p class=x>INJECT</p><p style='--p:2px'>SHOWN</p><p style='--d:block'>ALSO</p>"
    )
    assert _text(runner, page) == (
        "SHOWN\nALSO\n[airlock: 1 hidden element left out (a stylesheet rule)]"
    )


def _component_sheet(components: int) -> str:
    """A sheet in Bootstrap's manner: each component sets its custom properties under its own
    class and reads them in its colour, and a table's cells read the row's."""
    return "".join(
        f".c{n}{{--c{n}-color:#{n % 9}{n % 9}{n % 9};--c{n}-bg:#fff}}"
        f".c{n}{{color:var(--c{n}-color);background-color:var(--c{n}-bg);padding:var(--p)}}"
        for n in range(components)
    ) + (
        ".t{--t-color:#212529;--t-bg:#fff}.t>tbody>tr>*{--t-type:#111}"
        ".t>tbody>tr>*{color:var(--t-state,var(--t-type,var(--t-color)));"
        "background-color:var(--t-bg)}"
    )


def test_component_sheets_cost_what_they_cost_judged_per_sheet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every component's group of custom properties was a query over the page (a 6,000-row
    Bootstrap table, 552 groups, was refused): those naming classes the page lacks are not
    matched, and the table costs within 1.5 times what it does with no rule read per
    element."""
    rows = "".join(f"<tr><td>r{n}</td><td><span class=c3>ok</span></td></tr>" for n in range(3_000))
    page = f"<style>{_component_sheet(550)}</style><table class=t><tbody>{rows}</tbody></table>"
    document = extract_html("text/html", page.encode(), ROOMY)
    assert not isinstance(document, str)
    (table,) = document.blocks
    assert isinstance(table, Table)
    assert table.rows[-1] == ["r2999", "ok"]
    payload = page.encode()

    def read() -> None:
        extract_html("text/html", payload, ROOMY)

    cost = least_cpu_seconds(read)
    monkeypatch.setattr("sandbox.extractors.html._names_in_play", lambda *_: (set(), frozenset()))
    assert cost < 1.5 * least_cpu_seconds(read)


#: Custom properties worked out where they are declared, as CSS does: ``initial``, a
#: ``var()`` of an undefined property without a fallback, a property naming itself and a
#: cycle are guaranteed-invalid (a ``var()`` of them takes its fallback); a property's own
#: ``var()``s are read at the element declaring it; ``inherit`` takes the parent's; ``*``
#: sets its properties on every element. Each was read.
HIDDEN_BY_CUSTOM_PROPERTIES_AS_CSS_WORKS_THEM_OUT = [
    "<style>p{display:var(--d,none)}</style><p style='--d:initial'>INJECT</p>",
    "<style>p{display:var(--d,none)} .x{--d:initial}</style><p class=x>INJECT</p>",
    "<style>p{display:var(--d,none)}</style><p style='--d:var(--zz)'>INJECT</p>",
    "<style>p{display:var(--d,none)}</style><p style='--d:var(--d)'>INJECT</p>",
    "<style>p{display:var(--a,none)}</style><p style='--a:var(--b);--b:var(--a)'>INJECT</p>",
    "<style>*{--tw-rotate-y:initial} .r{--tw-rotate-x:rotateX(90deg);"
    "transform:var(--tw-rotate-x, ) var(--tw-rotate-y, )}</style><p class=r>INJECT</p>",
    "<style>*{--d:none} .x{--d:block} p{display:var(--d)}</style><div class=x><p>INJECT</p></div>",
    "<style>p{display:var(--d)}</style>"
    "<div style='--e:none;--d:var(--e)'><p style='--e:block'>INJECT</p></div>",
    "<style>p{display:var(--d)}</style>"
    "<div style='--d:none'><p style='--d:inherit'>INJECT</p></div>",
    "<style>p{display:var(--d)} .x{--d:unset}</style>"
    "<div style='--d:none'><p class=x>INJECT</p></div>",
]


def test_custom_properties_worked_out_as_css_does_show(runner: SandboxRunner) -> None:
    """The same rules where a browser shows the text: a property's ``var()`` read at the
    element declaring it (the paragraph's own ``--e:none`` does not reach the page's
    ``--d``), a fallback in a property, ``inherit`` of a shown value, ``*`` overruled by a
    later rule on the element itself, a transform of a small angle."""
    page = (
        "<style>:root{--d:var(--e)} p{display:var(--d)}</style><p style='--e:none'>a</p>"
        "<style>.f{display:var(--f,none)}</style><p class=f style='--f:var(--zz,block)'>b</p>"
        "<style>.g{display:var(--g)}</style>"
        "<div style='--g:block'><p class=g style='--g:inherit'>c</p></div>"
        "<style>*{--h:none} .h{--h:block} .h{display:var(--h)}</style><p class=h>d</p>"
        "<style>*{--tw-y:initial} .r{--tw-x:rotateX(10deg);"
        "transform:var(--tw-x, ) var(--tw-y, )}</style><p class=r>e</p>"
    )
    assert _text(runner, page) == "a\nb\nc\nd\ne"


#: Rules setting custom properties ordered as the cascade orders them (specificity, then
#: place; ``!important`` over the style attribute), a pseudo-element's properties its own,
#: and a rule lexbor cannot match as written (``:focus-within``, ``:lang()``, ``:target``,
#: ``:enabled`` on a paragraph) judged both applying and not, the more hiding kept. Each
#: was read.
HIDDEN_THROUGH_THE_CASCADE_OF_CUSTOM_PROPERTIES = [
    "<style>#i{--d:none} .x{--d:block} p{display:var(--d)}</style><p id=i class=x>INJECT</p>",
    "<style>.x{--d:none !important} p{display:var(--d)}</style>"
    "<p class=x style='--d:block'>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:none} .x::before{--d:block}</style><p class=x>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:none} .x:focus-within{--d:block}</style>"
    "<p class=x>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:none} .x:target{--d:block}</style><p class=x>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:none} .x:enabled{--d:block}</style><p class=x>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:block} .x:lang(fr){--d:none}</style>"
    "<p class=x lang=fr>INJECT</p>",
]


def test_custom_properties_through_the_cascade_show(runner: SandboxRunner) -> None:
    """Where the cascade shows the text: a more specific rule over a later one, the style
    attribute over a rule, a pseudo-element's ``none`` not the element's, a later rule of
    one specificity over an earlier one."""
    page = (
        "<style>.x{--d:block} p{--d:none} p{display:var(--d)}</style><p class=x>a</p>"
        "<style>.y{--e:none} .e{display:var(--e)}</style>"
        "<div class='y e' style='--e:block'>b</div>"
        "<style>.f{display:var(--f)} .f::before{--f:none} .f:before{--f:none}</style>"
        "<div class=f>c</div>"
        "<style>.g{display:var(--g)} .h{--g:none} .k{--g:block}</style><div class='g h k'>d</div>"
    )
    assert _text(runner, page) == "a\nb\nc\nd"


#: Rules setting custom properties under a condition a screen may not meet (a media
#: feature, ``@supports``), judged both applying and not, the more hiding kept: each
#: overruled the unconditional ``none``, and the text was read.
HIDDEN_DESPITE_CONDITIONAL_CUSTOM_PROPERTIES = [
    "<style>p{display:var(--d)} .x{--d:none} @media (max-width:10px){.x{--d:block}}</style>"
    "<p class=x>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:none} @supports (bogus-prop:1){.x{--d:block}}</style>"
    "<p class=x>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:none} @layer a{@media (hover:none){.x{--d:block}}}"
    "</style><p class=x>INJECT</p>",
]


def test_custom_properties_under_screen_media_show(runner: SandboxRunner) -> None:
    """A screen meets ``@media screen`` and ``@media all``: their rules apply as any."""
    page = (
        "<style>.a{display:var(--a)} .a{--a:none} @media screen{.a{--a:block}}</style>"
        "<p class=a>a</p>"
        "<style>.b{display:var(--b)} .b{--b:none} @media only all{.b{--b:block}}</style>"
        "<p class=b>b</p>"
    )
    assert _text(runner, page) == "a\nb"


# -- css-values-mend2: the colour a filter brightens, full-bleed padding, inherited
# direction (each checked against Chromium 156).

#: What hides only with what the element inherits: a brightness that whitens its grey
#: colour (own or inherited; brightness multiplies each channel, so black stays black), and
#: an end offset that wins because the direction its ancestors set is right-to-left (the
#: text runs out past the page's left edge).
HIDDEN_BY_WHAT_AN_ELEMENT_INHERITS = [
    ("<p style='color:#333;filter:brightness(500%)'>INJECT</p>", "a filter or blend"),
    ("<div style='color:#333'><p style='filter:brightness(5)'>INJECT</p></div>", "a filter"),
    ("<p style='color:#808080;filter:brightness(2)'>INJECT</p>", "a filter or blend"),
    (
        "<div style='-webkit-text-fill-color:#333'><p style='filter:brightness(5)'>INJECT</p>"
        "</div>",
        "a filter or blend",
    ),
    (
        "<html dir=rtl><body><p style='position:absolute;left:0;right:99999px'>INJECT</p>",
        "off-screen",
    ),
    ("<div dir=rtl><p style='position:absolute;left:0;right:99999px'>INJECT</p></div>", "off"),
    (
        "<div style='direction:rtl'><div><p style='position:absolute;left:0;right:99999px'>"
        "INJECT</p></div></div>",
        "off-screen",
    ),
    (
        "<div dir=ltr style='direction:rtl'><p style='position:absolute;left:0;right:99999px'>"
        "INJECT</p></div>",
        "off-screen",
    ),
    ("<div dir=auto><p style='position:absolute;left:0;right:99999px'>INJECT</p></div>", "off"),
    ("<p dir=rtl style='position:absolute;left:0;right:99999px'>INJECT</p>", "off-screen"),
    # A padding does not bring back what a far margin of its own moves past it.
    ("<p style='margin-left:-9999px;padding-left:99px'>INJECT</p>", "off-screen"),
    ("<p style='margin-left:-9999px;padding:0 9999px 0 0'>INJECT</p>", "off-screen"),
    ("<p style='margin-left:-9999px;padding:0 0 0 9999px 0'>INJECT</p>", "off-screen"),
    ("<p style='margin-left:-9999px;padding-inline:9999px auto'>INJECT</p>", "off-screen"),
    ("<p style='margin-left:-1000%;padding-left:1%'>INJECT</p>", "off-screen"),
]


@pytest.mark.parametrize(
    ("hiding", "method"),
    HIDDEN_BY_WHAT_AN_ELEMENT_INHERITS,
    ids=[h[:80] for h, _ in HIDDEN_BY_WHAT_AN_ELEMENT_INHERITS],
)
def test_what_an_element_inherits_hides_it(runner: SandboxRunner, hiding: str, method: str) -> None:
    text = _text(runner, f"<p>SHOWN</p>{hiding}")
    assert text.startswith("SHOWN\n[airlock: 1 hidden element left out (")
    assert text.count("\n") == 1 and method in text


def test_a_brightness_that_leaves_text_dark_shows_it(runner: SandboxRunner) -> None:
    """Brightness multiplies each channel: black text (its own, the page's default or
    inherited) stays black at any factor, and a grey five times brighter is still grey
    (``#0a0a0a`` draws ``#323232``); all were left out as whitened."""
    page = (
        "<p style='filter:brightness(500%)'>a</p>"
        "<p style='color:#000;filter:brightness(100)'>b</p>"
        "<div style='color:black'><p style='filter:brightness(5)'>c</p></div>"
        "<p style='color:#0a0a0a;filter:brightness(5)'>d</p>"
        "<p style='color:navy;filter:brightness(3)'>e</p>"
    )
    assert _text(runner, page) == "a\nb\nc\nd\ne"


def test_full_bleed_bands_show(runner: SandboxRunner) -> None:
    """A band pulled out to the page's edges by a negative margin and padded back in draws
    its text in place (Chromium: inside the column), in every way it is written; a later
    negative padding is rejected, so the earlier one stands."""
    page = (
        "<div style='width:600px;margin:0 auto'>"
        "<p style='margin-inline:-9999px;padding-inline:9999px'>a</p>"
        "<p style='margin-inline:-100vw;padding-inline:100vw'>b</p>"
        "<p style='margin:0 -9999px;padding:0 9999px'>c</p>"
        "<p style='margin-left:-9999px;padding-left:9999px'>d</p>"
        "<p style='margin-inline-start:-100%;padding-inline-start:100%'>e</p>"
        "<p style='position:relative;left:-9999px;padding-left:9999px'>f</p>"
        "<p style='text-indent:-9999px;padding-left:9999px'>g</p>"
        "<p style='margin-top:-9999px;padding-top:9999px'>h</p>"
        "<p style='margin-left:-9999px;padding-left:9999px;padding-left:-1px'>i</p>"
        "</div>"
    )
    assert _text(runner, page) == "a\nb\nc\nd\ne\nf\ng\nh\ni"


def test_a_left_to_right_direction_under_rtl_shows(runner: SandboxRunner) -> None:
    """Only the direction the element ends up with makes its end offset win: one set back to
    ltr (by ``direction`` or by ``dir``, which a ``direction`` declaration overrides) draws
    at the left edge, and an rtl page's text without offsets shows."""
    page = (
        "<div dir=rtl><p style='direction:ltr;position:absolute;left:0;right:99999px'>a</p>"
        "<p dir=ltr style='position:absolute;left:0;right:99999px'>b</p>"
        "<p style='position:absolute;left:0;right:99px'>c</p><p>d</p></div>"
        "<div dir=rtl style='direction:ltr'><p style='position:absolute;left:0;right:99999px'>"
        "e</p></div>"
    )
    assert _text(runner, page) == "a\nb\nc\nd\ne"


#: A table sheet in Bootstrap's manner: stripes set the cells' colour by ``:nth-of-type()``
#: and ``:nth-child()``, which lexbor matches in time quadratic in a row's siblings.
_STRIPED_SHEET = (
    ".t{--t-color:#212529;--t-bg:#fff;--t-striped:#111}"
    ".t>:not(caption)>*>*{color:var(--t-state,var(--t-type,var(--t-color)));"
    "background-color:var(--t-bg)}"
    ".t-striped>tbody>tr:nth-of-type(odd)>*{--t-type:var(--t-striped)}"
    ".t-columns>:not(caption)>tr>:nth-child(even){--t-type:var(--t-striped)}"
)


def test_a_striped_table_costs_what_it_costs_judged_per_sheet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bootstrap's striped table of 11,000 rows, a tag a line, was refused (its stripes'
    ``:nth-of-type()`` matched per element, quadratic in the rows): it is read, within 1.5
    times what it costs with no rule read per element."""
    rows = "\n".join(f"<tr>\n<td>r{n}</td>\n<td>ok</td>\n</tr>" for n in range(11_000))
    page = (
        f"<style>{_STRIPED_SHEET}</style><table class='t t-striped'>\n<tbody>\n{rows}\n"
        "</tbody></table>"
    ).encode()
    document = extract_html("text/html", page, ROOMY)
    assert not isinstance(document, str)
    (table,) = document.blocks
    assert isinstance(table, Table)
    assert table.rows[-1] == ["r10999", "ok"]

    def read() -> None:
        extract_html("text/html", page, ROOMY)

    cost = least_cpu_seconds(read)
    monkeypatch.setattr("sandbox.extractors.html._names_in_play", lambda *_: (set(), frozenset()))
    assert cost < 1.5 * least_cpu_seconds(read)


def test_rules_read_per_element_past_their_budget_are_judged_per_sheet(
    runner: SandboxRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the budget for matching rules per element, the page was refused: its rules are
    judged per sheet instead, both readings of a ``var()``, the more hiding one kept."""

    def out_of_time(*_: object) -> None:
        raise html_module._OutOfTime

    monkeypatch.setattr(html_module._MatchedEach, "_matched", out_of_time)
    page = (
        "<style>p.h{display:var(--d)} .x{--d:none} :root{--d:none}</style>"
        "<p class=x>SHOWN</p><p class=h style='--d:block'>INJECT</p>"
    )
    document = extract_html("text/html", page.encode(), DEFAULT)
    assert not isinstance(document, str)
    assert [block.text for block in document.blocks if isinstance(block, Paragraph)] == ["SHOWN"]


#: Rules setting custom properties a reviewer's second look found misread: a string or an
#: attribute selector taken for a pseudo-element, a hex escape's specificity, ``@scope``
#: and ``@document`` bodies taken as always applying.
HIDDEN_PAST_THE_SECOND_CUSTOM_PROPERTY_REVIEW = [
    "<style>p{display:var(--d)} p[title='::']{--d:none}</style><p title='::'>INJECT</p>",
    "<style>p{display:var(--d)} p[data-x=':after']{--d:none}</style><p data-x=':after'>INJECT</p>",
    "<style>p{display:var(--d)} p.b{--d:none} .\\31 23{--d:block}</style>"
    "<p class='b 123'>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:none} @scope (.nothing) {.x{--d:block}}</style>"
    "<p class=x>INJECT</p>",
    "<style>p{display:var(--d)} .x{--d:none} @document url(http://x.invalid/) "
    "{.x{--d:block}}</style><p class=x>INJECT</p>",
]


@pytest.mark.parametrize(
    "page",
    HIDDEN_BY_CUSTOM_PROPERTIES_AS_CSS_WORKS_THEM_OUT
    + HIDDEN_THROUGH_THE_CASCADE_OF_CUSTOM_PROPERTIES
    + HIDDEN_DESPITE_CONDITIONAL_CUSTOM_PROPERTIES
    + HIDDEN_PAST_THE_SECOND_CUSTOM_PROPERTY_REVIEW,
)
def test_custom_properties_the_reviews_found_hide(runner: SandboxRunner, page: str) -> None:
    """Each page of the lists above, after a shown element: the hidden one alone is left out."""
    text = _text(runner, f"<div>SHOWN</div>{page}")
    assert "INJECT" not in text
    assert text.startswith("SHOWN\n[airlock: 1 hidden element left out (")


def test_custom_properties_a_second_review_found_show(runner: SandboxRunner) -> None:
    """The same rules where a browser shows the text: a string's ``::`` setting ``block``,
    a class beside one no-break-spaced (one class, split on ASCII whitespace only), the
    escaped class later and as specific, a scope's colour."""
    page = (
        "<style>p{display:var(--d)} :root{--d:none} p[title='::']{--d:block} .x{--d:block}"
        " .b{--d:none} .\\31 23{--d:block} @scope (.card) {.s{--c:red}} .s{color:var(--c)}"
        " .s{--d:block}</style>"
        "<p title='::'>a</p><p class='x y\u00a0z'>b</p><p class='b 123'>c</p>"
        "<div class=card><p class=s>d</p></div>"
    )
    assert _text(runner, page) == "a\nb\nc\nd"


@pytest.mark.parametrize(
    "page",
    [
        "<style>p{--d:none} p::before{display:var(--d)}</style><p>SHOWN</p>",
        "<style>p::first-letter{font-size:var(--s)}</style><p style='--s:0px'>SHOWN</p>",
        "<style>p::after{opacity:var(--o)}</style><p style='--o:0'>SHOWN</p>",
    ],
)
def test_a_pseudo_elements_rule_reading_a_property_leaves_its_element_shown(
    runner: SandboxRunner, page: str
) -> None:
    """Read per element, a pseudo-element's rule hid, faded or shrank its element."""
    assert _text(runner, page) == "SHOWN"


def test_striped_rows_setting_properties_are_read(runner: SandboxRunner) -> None:
    """Rules matched without their counting functions stay uncertain, judged both ways: a
    stripe's colour, or ``block`` on every other row, leaves every row read; a stripe
    hiding its rows still hides (more than a browser would: counting rows is left out)."""
    rows = "".join(f"<tr><td>r{n}</td></tr>" for n in range(4))
    shown = (
        f"<style>{_STRIPED_SHEET} td{{display:var(--d)}} tr:nth-child(2n)>*{{--d:block}}"
        f"</style><table class='t t-striped t-columns'><tbody>{rows}</tbody></table>"
    )
    assert _text(runner, shown) == "|  |\n| --- |\n| r0 |\n| r1 |\n| r2 |\n| r3 |"
    hiding = (
        "<style>p{display:var(--d)} div>:not(:nth-child(9)){--d:none}</style>"
        "<div>SHOWN<p>INJECT</p></div>"
    )
    assert (
        _text(runner, hiding) == "SHOWN\n[airlock: 1 hidden element left out (a stylesheet rule)]"
    )


def _cpu_reading(page: bytes) -> float:
    """The least CPU of reading ``page`` with room to spare (:data:`ROOMY`)."""
    return least_cpu_seconds(lambda: extract_html("text/html", page, ROOMY))
