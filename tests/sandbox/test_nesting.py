"""The nesting bound of web pages (sandbox/extractors/nesting.py): a page that would make
lexbor build a tree deeper than 2,048 elements is refused before lexbor runs, however the
depth is disguised from the count, and real pages of charts and long lists are read."""

from __future__ import annotations

import contextlib
import random
import time

import pytest
from selectolax.lexbor import LexborHTMLParser

from sandbox.errors import CeilingExceeded
from sandbox.extractors import nesting
from sandbox.extractors.registry import Refusal
from sandbox.limits import ParseLimits
from sandbox.runner import SandboxRunner
from tests.helpers import least_cpu_seconds
from tests.sandbox.hostile_inputs import WALL_SECONDS

HTML = "text/html"
ROOMY = ParseLimits(max_text_chars=400_000)
N = 20_000


@pytest.mark.parametrize(
    "page",
    [
        # The tokenizer's view of a tag: a quote opens a value only after "=", a name runs
        # past "<", a bogus comment (<!x, <?x, </3) ends at the first ">", and names fold
        # only ASCII letters (U+212A, KELVIN SIGN, is no "k": <lin&#x212A;> is not <link>).
        '<x a">' + "<div>" * N + '">',
        "<div<x></div>" * N,
        "<lin\u212a>" * N,
        "<div><!x </div>" * N,
        "<div><?x </div>" * N,
        "<div></3 </div>" * N,
        "<svg>" + "<g a=1/>" * N,
        # Raw text ends only at its own end tag, and a script's escapes hide one inside it.
        "<div><script></scriptx></div></script>" * N,
        "<div><script><!--<script></script></div>--></script>" * N,
        # What nests in SVG and MathML: void and table elements, and HTML after a breakout.
        "<svg>" + "<link>" * N,
        "<math>" + "<td>" * N,
        "<svg><div>" + "<circle/>" * N,
        "<svg/>" + "<circle/>" * N,
        "<svg><foreignObject><p></foreignObject>" + "<circle/>" * N,
        "<math><foreignObject><textarea>" + "<g>" * N,
        "<svg><g></path><style>" + "<g>" * N,
        "<svg><p></svg>" + "<![CDATA[ ]]>" + "<x>" * N,
        # Breakouts as lexbor reads them: <font> by an attribute named so, wherever it starts;
        # <sup>, which lexbor keeps in SVG (the foreign elements stay counted); a frameset
        # ignores <svg> (an attacker's review).
        '<svg><font a=""color>' + "<x/>" * N,
        "<svg><sup></sup>" * N,
        '<svg><font a=" color "></font>' * N,
        "<frameset></svg><svg>" * N,
        # A frameset ignores a raw-text start tag, and what follows is markup.
        "<frameset><iframe>" + "<frameset>" * N,
    ],
    ids=[
        "quote-in-attribute-name",
        "lt-in-tag-name",
        "kelvin-sign",
        "bogus-comment",
        "processing-instruction",
        "end-tag-of-no-name",
        "unquoted-slash",
        "script-end-of-another-name",
        "script-double-escape",
        "void-in-svg",
        "cell-in-mathml",
        "svg-broken-out-of",
        "self-closed-svg",
        "paragraph-in-foreign-object",
        "mathml-foreign-object",
        "stray-end-tag-in-svg",
        "cdata-when-unsure",
        "font-attribute-after-a-value",
        "sup-in-svg",
        "font-colour-in-a-value",
        "svg-in-a-frameset",
        "frameset",
    ],
)
def test_disguised_depth_is_refused_before_parsing(runner: SandboxRunner, page: str) -> None:
    """Each page builds a tree 20,000 deep in lexbor (the test checks that too); the count
    before the parser read each as shallow."""
    assert _parsed_depth(page) > nesting.MAX_NESTING
    started = time.monotonic()
    with pytest.raises(CeilingExceeded, match="nests elements more than 2048 deep"):
        runner.run("html", HTML, page.encode(), ROOMY)
    assert time.monotonic() - started < WALL_SECONDS


def test_a_chart_of_thousands_of_shapes_is_read(runner: SandboxRunner) -> None:
    """Self-closing SVG elements open nothing: a scatter plot of 5,000 points was refused as
    nesting 2,048 deep. So are MathML's, and a chart's HTML labels close with it."""
    points = "".join(
        f'<circle cx="{n % 400}" cy="{n // 400}" r="1.5" fill="#36c"/>' for n in range(5_000)
    )
    chart = (
        '<figure><svg viewBox="0 0 400 20" width="400"><g class="points">'
        + points
        + '</g><g><path d="M0 0L400 20" stroke="black"></path><text x="5" y="15">Growth</text>'
        + "</g></svg><figcaption>Figure 1</figcaption></figure>"
    )
    formula = "<math><mrow>" + "<mspace width='1em'/>" * 3_000 + "<mi>x</mi></mrow></math>"
    labelled = '<svg><foreignObject width="90" height="20"><div>label</div></foreignObject></svg>'
    page = f"<html><body><h1>Report</h1>{chart}{formula}{labelled}<p>end</p></body></html>"
    assert _parsed_depth(page) < 20
    text = runner.run("html", HTML, page.encode(), ROOMY).text
    assert "Growth" in text and "Figure 1" in text and "label" in text
    assert text.endswith("end")


def test_long_lists_without_end_tags_are_read(runner: SandboxRunner) -> None:
    """List items and definitions are left uncounted, as a sibling closes them: long lists
    without end tags are read, and items left holding an open link or span count only those
    (a review found such lists refused while items were counted)."""
    lists = "<ul><li>a<li>b<li><a href='#'>c</a></ul>" * 3_000
    sloppy = "<ul>" + "<li><a href=#>item" * 500 + "</ul>"
    loose = "<dl>" + "<dt><b>Term</b><dd><span>def" * 300 + "</dl>"
    terms = "<dl><dt>term<dd>one<dd>two<dt>next<dd>three</dl>" * 3_000 + sloppy + loose
    nested = "<ol>" + "<li>x<ol>" * 1_000 + "<li>deep" + "</ol>" * 1_001
    page = lists + terms + nested + "<p>end"
    assert _parsed_depth(page) < 2_048
    text = runner.run("html", HTML, page.encode(), ParseLimits(max_text_chars=2_000_000)).text
    assert text.endswith("end")


@pytest.mark.parametrize("seed", range(4))
def test_the_count_is_never_far_under_the_parsers_depth(seed: int) -> None:
    """Random pages of the tags the count treats apart, a short unit repeated so that any
    depth it misses per unit grows: the count must reach the depth lexbor builds, but for the
    implied elements it never counts (html, body, tbody...) and a list item's span."""
    rng = random.Random(seed)
    for _ in range(150):
        prefix = "".join(rng.choice(_TOKENS) for _ in range(rng.randint(0, 6)))
        unit = "".join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 5)))
        page = prefix + unit * 300
        parsed = _parsed_depth(page)
        counted = _counted_depth(page)
        assert parsed <= 2 * counted + 10, (prefix, unit, parsed, counted)


_TOKENS = [
    "<svg>",
    "</svg>",
    "<math>",
    "</math>",
    "<g>",
    "</g>",
    "<circle/>",
    "<g/>",
    "<div>",
    "</div>",
    "<p>",
    "</p>",
    "<foreignObject>",
    "</foreignObject>",
    "<mi>",
    "</mi>",
    "<b>",
    "</b>",
    "<font>",
    "</font>",
    "<![CDATA[",
    "]]>",
    "<!--",
    "-->",
    "<script>",
    "</script>",
    "<style>",
    "</style>",
    "<table>",
    "<td>",
    "<tr>",
    "<link>",
    "<x/>",
    "<x\xa0a/>",
    "<title>",
    "</title>",
    "<desc>",
    "</desc>",
    "<annotation-xml>",
    "</annotation-xml>",
    "</br>",
    "<select>",
    "</select>",
    "<template>",
    "</template>",
    "<li>",
    "<dt>",
    "<dd>",
    "</dl>",
    "</ul>",
    "<ul>",
    "<span>",
    "</span>",
    "text",
    "<svg/>",
    "<math/>",
    "<td/>",
    "<link/>",
    "<textarea>",
    "</textarea>",
    "<plaintext>",
    "<!x>",
    "<?x>",
    "</3>",
    "<mglyph>",
    "<mtext>",
    "</mtext>",
    "<frameset>",
    "<noscript>",
    "</noscript>",
    "<iframe>",
    "</iframe>",
    "<a>",
    "</a>",
    "<nobr>",
    "<button>",
    "<form>",
    "</form>",
    "<option>",
    "<optgroup>",
    "<head>",
    "<body>",
    "</body>",
    "</html>",
    "<img>",
    "<br>",
    "<ruby>",
    "<rb>",
    "<object>",
    "</object>",
    "<caption>",
    "<col>",
    "<h1>",
    "</h2>",
    "<font\tcolor=red>",
    "<x\ta=1/>",
    "<x\ta='/>",
    "'>",
]


def _parsed_depth(page: str) -> int:
    """The depth of the deepest element of the tree lexbor builds of ``page``."""
    tree = LexborHTMLParser(page, scripting=True)
    deepest = 0
    pending = [] if tree.root is None else [(tree.root, 1)]
    while pending:
        node, depth = pending.pop()
        deepest = max(deepest, depth)
        child = node.child
        while child is not None:
            if child.tag is not None and not child.tag.startswith(("-", "_")):
                pending.append((child, depth + 1))
            child = child.next
    return deepest


def _counted_depth(page: str) -> int:
    """The least ceiling the count lets ``page`` under, found by bisection."""
    low, high = 0, 4 * nesting.MAX_NESTING
    while low < high:
        middle = (low + high) // 2
        try:
            nesting.bound_nesting(page, ceiling=middle)
        except Refusal:
            low = middle + 1
        else:
            high = middle
    return low


@pytest.mark.parametrize(
    "page",
    [
        "<svg></p></svg>" + "<![CDATA[" * 200_000,
        "<svg></p>" + "<script>" * 2_100 + "<!---->" * 100_000,
    ],
    ids=["cdata-never-closed", "scripts-over-escapes"],
)
def test_the_count_costs_little_where_it_cannot_tell_markup_from_text(page: str) -> None:
    """Each opening in an undecided span searched the rest of the page for its end (25 s of
    CPU on 87 KB): a search is kept, and a page's scripts get 100,000 steps through their
    escapes in all. Ten times the page must cost under thirty times the time (pages large
    enough to be timed, least of three runs: no allowance in seconds)."""

    def cost(part: str) -> float:

        def bound() -> None:
            with contextlib.suppress(Refusal):
                nesting.bound_nesting(part)

        return least_cpu_seconds(bound)

    assert cost(page) < 30 * cost(page[: len(page) // 10])


def test_charts_after_a_breakout_and_template_scripts_are_read(runner: SandboxRunner) -> None:
    """A breakout (``<br>`` in SVG text) closes the SVG, and the next chart is followed again
    (giving up for the rest of the page refused 800 charts after it); the step bound on
    script escapes holds only where the count cannot tell markup from text (a Vue template
    of 25,000 comment pairs was refused)."""
    chart = "<svg viewBox='0 0 1 1'><path d='M0 0'/><path d='M1 1'/><circle r='1'/></svg>"
    charts = "<svg><text>a<br>b</text></svg>" + chart * 800
    template = "<script type='text/x-template'>" + "<!--[--><!--]-->" * 25_001 + "</script>"
    page = charts + template + "<p>end</p>"
    assert _parsed_depth(page) < 20
    assert runner.run("html", HTML, page.encode(), ROOMY).text.endswith("end")
