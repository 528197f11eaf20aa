"""DOCX text Word does not show: hidden text through the style hierarchy's toggles and table
styles, elements in ignorable namespaces Word does not understand, and headers a later section
inherits. Text Word hides is where a planted instruction sits; text Word shows must not be lost.
"""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

import docx as python_docx
import pytest
from docx.document import Document as WordDocument
from docx.oxml.parser import parse_xml

from sandbox.extractors import docx as docx_extractor
from sandbox.limits import ParseLimits
from tests.helpers import least_cpu_seconds
from tests.in_process import rendered_by
from tests.sandbox.canary import Canary
from tests.sandbox.docx_builders import (
    DRAWING_NAMESPACES,
    WORD_NAMESPACE,
    anchored_shape,
    document_xml,
    docx_with,
    settings_xml,
    styles_xml,
    theme_xml,
)
from tests.sandbox.spreadsheet_builders import external, laughs

rendered_docx = rendered_by(docx_extractor.extract_docx)
LIMITS = ParseLimits()

_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_HIDDEN_BY_DEFAULT = (
    "<w:docDefaults><w:rPrDefault><w:rPr><w:vanish/></w:rPr></w:rPrDefault></w:docDefaults>"
)
_STYLES = (
    '<w:style w:type="paragraph" w:styleId="HiddenPara"><w:rPr><w:vanish/></w:rPr></w:style>'
    '<w:style w:type="paragraph" w:styleId="ShownPara"><w:rPr><w:vanish w:val="0"/></w:rPr>'
    "</w:style>"
    '<w:style w:type="character" w:styleId="HiddenChar"><w:rPr><w:vanish/></w:rPr></w:style>'
    '<w:style w:type="character" w:styleId="HiddenCharChild"><w:basedOn w:val="HiddenChar"/>'
    "</w:style>"
    '<w:style w:type="character" w:styleId="ShownChar"><w:rPr><w:vanish w:val="false"/>'
    "</w:rPr></w:style>"
    '<w:style w:type="table" w:styleId="HiddenTable"><w:rPr><w:vanish/></w:rPr></w:style>'
    '<w:style w:type="table" w:styleId="HiddenTableChild"><w:basedOn w:val="HiddenTable"/>'
    "</w:style>"
)
_SHOWN = ["Text."]
_HIDDEN = ["[airlock: 5 characters of hidden text left out]"]
# A one-cell table without a header row, as the parent renders it.
_SHOWN_IN_A_TABLE = ["|  |", "| --- |", "| Text. |"]


def _run(character_style: str, direct: str) -> str:
    style = f'<w:rStyle w:val="{character_style}"/>' if character_style else ""
    return f"<w:r><w:rPr>{style}{direct}</w:rPr><w:t>Text.</w:t></w:r>"


def _paragraph(paragraph_style: str, run: str) -> str:
    style = f'<w:pPr><w:pStyle w:val="{paragraph_style}"/></w:pPr>' if paragraph_style else ""
    return f"<w:p>{style}{run}</w:p>"


def _table(table_style: str, content: str) -> str:
    style = f'<w:tblStyle w:val="{table_style}"/>' if table_style else ""
    return f"<w:tbl><w:tblPr>{style}</w:tblPr><w:tr><w:tc>{content}</w:tc></w:tr></w:tbl>"


def _rendered(
    body: str,
    styles: str,
    root_attributes: str = "",
    background: str = "",
    parts: dict[str, bytes] | None = None,
) -> list[str]:
    """The rendered lines of a document of ``body`` and ``styles``, ``parts`` (settings, a
    theme, numbering) replacing the template's."""
    payload = docx_with(
        {
            "word/document.xml": document_xml(
                body, root_attributes=root_attributes, background=background
            ),
            "word/styles.xml": styles_xml(styles),
            **(parts or {}),
        }
    )
    return rendered_docx("application/octet-stream", payload, LIMITS).splitlines()


@pytest.mark.parametrize(
    ("paragraph_style", "character_style", "direct", "expected"),
    [
        # A paragraph style and a character style that both hide cancel out: Word shows it.
        ("HiddenPara", "HiddenChar", "", _SHOWN),
        ("HiddenPara", "HiddenCharChild", "", _SHOWN),
        # Direct formatting is absolute, whatever the styles say.
        ("HiddenPara", "HiddenChar", "<w:vanish/>", _HIDDEN),
        ("HiddenPara", "HiddenChar", '<w:vanish w:val="0"/>', _SHOWN),
        ("", "", "<w:vanish/>", _HIDDEN),
        # A style setting the toggle off leaves it as the levels before left it.
        ("HiddenPara", "ShownChar", "", _HIDDEN),
        ("", "HiddenChar", "", _HIDDEN),
        ("ShownPara", "HiddenChar", "", _HIDDEN),
        ("HiddenPara", "", "", _HIDDEN),
        ("", "", "", _SHOWN),
    ],
)
def test_docx_vanish_toggles_between_paragraph_and_character_styles(
    paragraph_style: str, character_style: str, direct: str, expected: list[str]
) -> None:
    """Vanish is a toggle property (ECMA-376 Part 1, 17.7.3): a paragraph style and a character
    style that both set it cancel, and Word shows the text; it was left out as hidden."""
    body = _paragraph(paragraph_style, _run(character_style, direct))
    assert _rendered(body, _STYLES) == expected


@pytest.mark.parametrize(
    ("table_style", "paragraph_style", "character_style", "direct", "expected"),
    [
        ("HiddenTable", "", "", "", _HIDDEN),
        ("HiddenTableChild", "", "", "", _HIDDEN),
        # The table style's toggle and a character style's cancel.
        ("HiddenTable", "", "HiddenChar", "", _SHOWN),
        ("HiddenTable", "", "", '<w:vanish w:val="0"/>', _SHOWN),
        # Word sets the toggle to what a paragraph style says rather than toggling it
        # ([MS-OI29500] 2.1.258, on ECMA-376 Part 1, 17.7.8).
        ("HiddenTable", "HiddenPara", "", "", _HIDDEN),
        ("HiddenTable", "ShownPara", "", "", _SHOWN),
        ("HiddenTable", "HiddenPara", "HiddenChar", "", _SHOWN),
        ("", "", "", "", _SHOWN),
    ],
)
def test_docx_text_a_table_style_hides_is_left_out(
    table_style: str, paragraph_style: str, character_style: str, direct: str, expected: list[str]
) -> None:
    """A table style's run properties apply to every paragraph in its cells; a table style
    hiding its text was ignored, and the hidden text was read as the table's."""
    body = _table(table_style, _paragraph(paragraph_style, _run(character_style, direct)))
    lines = _rendered(body, _STYLES)
    assert lines == (_SHOWN_IN_A_TABLE if expected == _SHOWN else expected)


def test_docx_the_default_table_style_and_only_the_nearest_tables_style_apply() -> None:
    """A table naming no style has the document's default table style; a table nested in a
    cell has its own style, not the outer table's."""
    styles = (
        '<w:style w:type="table" w:default="1" w:styleId="Plain"><w:rPr><w:vanish/></w:rPr>'
        '</w:style><w:style w:type="table" w:styleId="Shown"/>'
    )
    inner = _table("Shown", _paragraph("", _run("", "")))
    body = _table("", _paragraph("", "<w:r><w:t>Outer</w:t></w:r>") + inner)
    assert _rendered(body, styles) == [
        *_SHOWN_IN_A_TABLE,
        "",
        "[airlock: 5 characters of hidden text left out]",
    ]


@pytest.mark.parametrize("part", ["wholeTable", "firstRow", "band1Horz", "nwCell"])
def test_docx_a_table_styles_conditional_formatting_that_hides_hides_the_table(part: str) -> None:
    """A part of a table style's conditional formatting (``w:tblStylePr``) that hides text
    hides the table's text: which cells each part reaches is not worked out, and text hidden
    by one was read."""
    styles = (
        f'<w:style w:type="table" w:styleId="Banded"><w:tblStylePr w:type="{part}"><w:rPr>'
        "<w:vanish/></w:rPr></w:tblStylePr></w:style>"
    )
    assert _rendered(_table("Banded", _paragraph("", _run("", ""))), styles) == _HIDDEN


@pytest.mark.parametrize(
    ("character_style", "defaults"), [("HiddenChar", ""), ("", _HIDDEN_BY_DEFAULT)]
)
def test_docx_conditional_formatting_never_turns_hidden_text_on(
    character_style: str, defaults: str
) -> None:
    """A table style's conditional part that hides is not a toggle: read as one, it turned
    on the text a character style or the defaults hide (a third review's finding)."""
    styles = (
        defaults + _STYLES + '<w:style w:type="table" w:styleId="Banded"><w:tblStylePr '
        'w:type="firstRow"><w:rPr><w:vanish/></w:rPr></w:tblStylePr></w:style>'
    )
    assert _rendered(_table("Banded", _paragraph("", _run(character_style, ""))), styles) == (
        _HIDDEN
    )


def test_docx_a_table_style_does_not_reach_a_text_box_anchored_in_its_cell() -> None:
    """A text box is a story of its own, outside the table its anchor stands in."""
    box = "<w:txbxContent><w:p><w:r><w:t>Text.</w:t></w:r></w:p></w:txbxContent>"
    anchor = f'<w:r><w:rPr><w:vanish w:val="0"/></w:rPr>{box}</w:r>'
    assert _rendered(_table("HiddenTable", _paragraph("", anchor)), _STYLES) == _SHOWN_IN_A_TABLE


@pytest.mark.parametrize(
    ("table_style", "character_style", "expected"),
    [
        # The defaults are where the hierarchy starts: a style that sets vanish toggles them.
        ("", "HiddenChar", _SHOWN),
        ("HiddenTable", "", _SHOWN),
        ("", "ShownChar", _HIDDEN),
        ("", "", _HIDDEN),
    ],
)
def test_docx_styles_toggle_the_documents_default_vanish(
    table_style: str, character_style: str, expected: list[str]
) -> None:
    """With ``w:docDefaults`` hiding text, a character or table style that sets vanish shows it
    again; such a run was left out as hidden."""
    body = _table(table_style, _paragraph("", _run(character_style, "")))
    lines = _rendered(body, _HIDDEN_BY_DEFAULT + _STYLES)
    assert lines == (_SHOWN_IN_A_TABLE if expected == _SHOWN else expected)


def test_docx_elements_in_an_ignorable_namespace_word_does_not_know_are_not_read() -> None:
    """Word ignores an element in a namespace ``mc:Ignorable`` names and it does not know, with
    all it holds, unless ``mc:ProcessContent`` names it (then only the element is ignored): the
    text inside such an element, which no reader of the document sees, was read."""
    root = (
        f'xmlns:mc="{_MC}" xmlns:x="urn:airlock-test:unknown" mc:Ignorable="x" '
        'mc:ProcessContent="x:wrap"'
    )
    body = (
        "<w:p><w:r><w:t>Shown.</w:t></w:r><x:foo><w:r><w:t>IGNORED</w:t></w:r></x:foo>"
        "<w:r><x:bar><w:t>IGNORED</w:t></x:bar></w:r>"
        "<x:wrap><w:r><w:t> Processed.</w:t></w:r></x:wrap></w:p>"
        "<x:wrap><w:p><w:r><w:t>Block processed.</w:t></w:r></w:p></x:wrap>"
        "<x:block><w:p><w:r><w:t>IGNORED</w:t></w:r></w:p></x:block>"
    )
    assert _rendered(body, "", root) == ["Shown. Processed.", "Block processed."]


def test_docx_an_ignorable_declaration_cannot_hide_what_word_knows() -> None:
    """Word never ignores WordprocessingML itself, whatever ``mc:Ignorable`` names."""
    root = f'xmlns:mc="{_MC}" mc:Ignorable="w"'
    body = "<w:p><w:hyperlink><w:r><w:t>Shown.</w:t></w:r></w:hyperlink></w:p>"
    assert _rendered(body, "", root) == ["Shown."]


def _saved(document: WordDocument) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _first_page_header_unshown(text: str) -> WordDocument:
    """A document whose one section names a first-page header holding ``text`` but does not
    give its first page one (no ``w:titlePg``), with a paragraph of body."""
    document = python_docx.Document()
    section = document.sections[0]
    section.different_first_page_header_footer = True
    section.first_page_header.paragraphs[0].text = text
    section.different_first_page_header_footer = False
    document.add_paragraph("Body text.")
    return document


def test_docx_a_first_page_header_a_later_section_inherits_is_read() -> None:
    """A section giving its first page a header of its own (``w:titlePg``) without naming one
    has the previous section's first-page header; where only the later section showed it, it
    was left out as a header Word does not show."""
    document = _first_page_header_unshown("Inherited first-page header")
    later = document.add_section()
    later.different_first_page_header_footer = True
    document.add_paragraph("More text.")
    text = rendered_docx("application/octet-stream", _saved(document), LIMITS)
    assert text.splitlines()[:2] == ["[first-page header]", "Inherited first-page header"]
    assert "Word does not show" not in text


def test_docx_a_tracked_former_section_does_not_show_a_header() -> None:
    """``w:sectPrChange`` holds a section's properties before a tracked change, which Word no
    longer applies: its ``w:titlePg`` does not show the first-page header."""
    document = _first_page_header_unshown("UNSHOWN first-page header")
    former = parse_xml(
        f'<w:sectPrChange xmlns:w="{WORD_NAMESPACE}" w:id="1" w:author="a"><w:sectPr>'
        "<w:titlePg/></w:sectPr></w:sectPrChange>"
    )
    document.element.body.sectPr.append(former)
    lines = rendered_docx("application/octet-stream", _saved(document), LIMITS).splitlines()
    assert "UNSHOWN first-page header" not in lines
    assert lines[-1].startswith("[airlock: a header or footer Word does not show")


_HIDDEN_DEFAULT_CHARACTER_STYLE = (
    '<w:style w:type="character" w:default="1" w:styleId="DefaultParagraphFont">'
    "<w:rPr><w:vanish/></w:rPr></w:style>"
)


@pytest.mark.parametrize(
    ("paragraph_style", "run", "expected"),
    [
        ("", "<w:r><w:t>Text.</w:t></w:r>", _HIDDEN),
        ("", _run("", "<w:b/>"), _HIDDEN),
        # Whether Word toggles a hidden paragraph's vanish with it is not known: the run stays
        # hidden (as a toggle it was shown: a review's finding). A run naming another style
        # has that one instead.
        ("HiddenPara", _run("", ""), _HIDDEN),
        ("", _run("ShownChar", ""), _SHOWN),
        # A style that does not exist, or of another type, is no character style: the default.
        ("", _run("NoSuchStyle", ""), _HIDDEN),
        ("", _run("HiddenPara", ""), _HIDDEN),
        ("", _run("", '<w:vanish w:val="0"/>'), _SHOWN),
    ],
)
def test_docx_the_default_character_style_hides_runs_naming_none(
    paragraph_style: str, run: str, expected: list[str]
) -> None:
    """A run naming no character style has the document's default one (``w:default="1"``),
    as a paragraph has the default paragraph style: its ``w:vanish`` was not read, and the
    text it hides was."""
    body = _paragraph(paragraph_style, run)
    assert _rendered(body, _STYLES + _HIDDEN_DEFAULT_CHARACTER_STYLE) == expected


# Text Word draws where no reader sees it: white on the white page, or too small to see.
_WHITE = '<w:color w:val="FFFFFF"/>'
_DARK_FILL = '<w:shd w:val="clear" w:color="auto" w:fill="1F3864"/>'
_INK_STYLES = (
    '<w:style w:type="character" w:styleId="WhiteChar"><w:rPr><w:color w:val="FFFFFF"/>'
    "</w:rPr></w:style>"
    '<w:style w:type="character" w:styleId="WhiteCharChild"><w:basedOn w:val="WhiteChar"/>'
    "</w:style>"
    '<w:style w:type="paragraph" w:styleId="WhitePara"><w:rPr><w:color w:val="FFFFFF"/>'
    "</w:rPr></w:style>"
    '<w:style w:type="paragraph" w:styleId="TinyPara"><w:rPr><w:sz w:val="1"/></w:rPr>'
    "</w:style>"
    '<w:style w:type="paragraph" w:styleId="ShadedPara"><w:pPr><w:shd w:val="clear" '
    'w:fill="000000"/></w:pPr></w:style>'
    '<w:style w:type="table" w:styleId="WhiteTable"><w:rPr><w:color w:val="FFFFFF"/></w:rPr>'
    "</w:style>"
    '<w:style w:type="table" w:styleId="HeaderRow"><w:tblStylePr w:type="firstRow"><w:rPr>'
    '<w:color w:val="FFFFFF"/></w:rPr><w:tcPr><w:shd w:val="clear" w:color="auto" '
    'w:fill="4472C4"/></w:tcPr></w:tblStylePr></w:style>'
    '<w:style w:type="table" w:styleId="HeaderRowChild"><w:basedOn w:val="HeaderRow"/>'
    "</w:style>"
)
_WHITE_BY_DEFAULT = (
    '<w:docDefaults><w:rPrDefault><w:rPr><w:color w:val="FFFFFF"/></w:rPr></w:rPrDefault>'
    "</w:docDefaults>"
)


@pytest.mark.parametrize(
    ("paragraph_style", "character_style", "direct", "styles"),
    [
        ("", "", _WHITE, ""),
        ("", "", '<w:color w:val="ffffff"/>', ""),
        # Within 16 of white in each channel, the HTML reader's measure of a colour unseen.
        ("", "", '<w:color w:val="F0F0F0"/>', ""),
        ("", "", '<w:color w:val="EFFFEF"/>', ""),
        ("", "WhiteChar", "", ""),
        ("", "WhiteCharChild", "", ""),
        ("WhitePara", "", "", ""),
        ("", "", "", _WHITE_BY_DEFAULT),
        # Nothing painted behind it: a clear shading with no fill, a white one, no highlight.
        ("", "", _WHITE + '<w:shd w:val="clear" w:color="auto" w:fill="auto"/>', ""),
        ("", "", _WHITE + '<w:shd w:val="clear" w:fill="FFFFFF"/>', ""),
        ("", "", _WHITE + '<w:highlight w:val="none"/>', ""),
        ("", "", _WHITE + '<w:highlight w:val="white"/>', ""),
        # Too small to see: half a point, under the HTML reader's one pixel.
        ("", "", '<w:sz w:val="1"/>', ""),
        ("TinyPara", "", "", ""),
        # Hidden and white at once is counted once.
        ("", "", "<w:vanish/>" + _WHITE, ""),
        ("", "", "<w:vanish/>" + '<w:sz w:val="1"/>', ""),
    ],
)
def test_docx_white_or_tiny_text_is_left_out(
    paragraph_style: str, character_style: str, direct: str, styles: str
) -> None:
    """White text on the white page, or text half a point high, is drawn where no reader sees
    it (the planted instruction in a résumé's white text): it was read."""
    body = _paragraph(paragraph_style, _run(character_style, direct))
    assert _rendered(body, styles + _INK_STYLES) == _HIDDEN


def test_docx_white_text_in_a_table_style_without_shading_is_left_out() -> None:
    """A table style's text colour reaches its cells' runs as a paragraph style's does."""
    body = _table("WhiteTable", _paragraph("", _run("", "")))
    assert _rendered(body, _INK_STYLES) == _HIDDEN


@pytest.mark.parametrize(
    ("paragraph_style", "character_style", "direct", "styles"),
    [
        # Something painted behind it.
        ("", "", _WHITE + _DARK_FILL, ""),
        ("", "WhiteChar", _DARK_FILL, ""),
        ("", "", _WHITE + '<w:shd w:val="pct50" w:color="auto" w:fill="auto"/>', ""),
        ("", "", _WHITE + '<w:shd w:val="clear" w:fill="auto" w:themeFill="text1"/>', ""),
        ("", "", _WHITE + '<w:highlight w:val="black"/>', ""),
        ("ShadedPara", "", _WHITE, ""),
        # Drawn around: a shadow, an outline, an embossing, a Word 2010 text effect.
        ("", "", _WHITE + "<w:shadow/>", ""),
        ("", "", _WHITE + "<w:emboss/>", ""),
        ("", "", _WHITE + "<w:outline/>", ""),
        (
            "",
            "",
            _WHITE + '<w14:textOutline xmlns:w14="http://schemas.microsoft.com/office/word/'
            '2010/wordml" w14:w="9525"/>',
            "",
        ),
        # Not white: automatic, a pale grey just past the measure, a colour run over nearer.
        ("", "", '<w:color w:val="auto"/>', ""),
        ("", "", '<w:color w:val="EEEEEE"/>', ""),
        ("", "", '<w:color w:val="FFFF00"/>', ""),
        ("", "WhiteChar", '<w:color w:val="000000"/>', ""),
        ("WhitePara", "", '<w:color w:val="auto"/>', ""),
        (
            "",
            "",
            "",
            _WHITE_BY_DEFAULT.replace("<w:color", '<w:sz w:val="20"/><w:color')
            + (
                '<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:rPr>'
                '<w:color w:val="222222"/></w:rPr></w:style>'
            ),
        ),
        # Word's smallest size, one point (1.33 pixels), is read; a tiny size run over nearer.
        ("", "", '<w:sz w:val="2"/>', ""),
        ("TinyPara", "", '<w:sz w:val="24"/>', ""),
        # A size of 0 is no size (as RTF's \\fs0), one not a count is not known.
        ("", "", '<w:sz w:val="0"/>', ""),
        ("", "", '<w:sz w:val="pt"/>', ""),
    ],
)
def test_docx_white_or_small_text_word_shows_is_read(
    paragraph_style: str, character_style: str, direct: str, styles: str
) -> None:
    """White text on a shading, a highlight or with an effect drawn around it shows, as does
    text of another colour or at Word's smallest size: none of it may be lost."""
    body = _paragraph(paragraph_style, _run(character_style, direct))
    assert _rendered(body, styles + _INK_STYLES) == _SHOWN


@pytest.mark.parametrize(
    "table",
    [
        # A shaded cell, a shaded table, a table style with a dark header row (and one based
        # on it), where Word's tables put white text.
        '<w:tbl><w:tr><w:tc><w:tcPr><w:shd w:val="clear" w:fill="000000"/></w:tcPr>{}</w:tc>'
        "</w:tr></w:tbl>",
        '<w:tbl><w:tblPr><w:shd w:val="clear" w:fill="000000"/></w:tblPr><w:tr><w:tc>{}</w:tc>'
        "</w:tr></w:tbl>",
        _table("HeaderRow", "{}"),
        _table("HeaderRowChild", "{}"),
        # A row whose table properties are made different for it, shading it.
        '<w:tbl><w:tr><w:tblPrEx><w:shd w:val="clear" w:fill="000000"/></w:tblPrEx><w:tc>{}'
        "</w:tc></w:tr></w:tbl>",
        # The outer table's shaded cell is behind a table nested in it.
        '<w:tbl><w:tr><w:tc><w:tcPr><w:shd w:val="clear" w:fill="000000"/></w:tcPr>'
        + _table("", "{}")
        + "<w:p/></w:tc></w:tr></w:tbl>",
    ],
)
def test_docx_white_text_on_a_shaded_table_is_read(table: str) -> None:
    """White text in a cell a table's shading or its style's conditional formatting paints
    (a header row's white on blue) shows."""
    body = table.format(_paragraph("", _run("", _WHITE)))
    lines = _rendered(body, _INK_STYLES)
    assert "| Text. |" in lines
    assert not any(line.startswith("[airlock:") for line in lines)


def test_docx_a_table_style_and_the_default_paragraph_style_decide_together() -> None:
    """Whether Word puts a table style's text colour over the default paragraph style's is not
    known: white under either order is read, not left out."""
    styles = _INK_STYLES + (
        '<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:rPr>'
        '<w:color w:val="000000"/></w:rPr></w:style>'
    )
    assert _rendered(_table("WhiteTable", _paragraph("", _run("", ""))), styles) == (
        _SHOWN_IN_A_TABLE
    )


def test_docx_white_text_in_a_text_box_or_on_a_coloured_page_is_read() -> None:
    """A text box whose shape is not known has a fill, and a page colour (``w:background``)
    Word displays is behind all the text: white text on either shows. The box of a white
    anchor run is read all the same."""
    box = f"<w:txbxContent>{_paragraph('', _run('', _WHITE))}</w:txbxContent>"
    anchor = f"<w:r><w:rPr>{_WHITE}</w:rPr><w:t>Anchor</w:t>{box}</w:r>"
    assert _rendered(_paragraph("", anchor), "") == [
        "Text.",
        "[airlock: 6 characters of hidden text left out]",
    ]
    page = '<w:background w:color="1F3864"/>'
    shown = _rendered(
        _paragraph("", _run("", _WHITE)), "", background=page, parts=_DISPLAY_BACKGROUND
    )
    assert shown == _SHOWN


def test_docx_white_text_in_an_equation_is_left_out() -> None:
    """An equation's runs (``m:r``) carry run properties of their own, colour among them."""
    math = "http://schemas.openxmlformats.org/officeDocument/2006/math"
    body = (
        f'<w:p><m:oMath xmlns:m="{math}"><m:r><w:rPr>{_WHITE}</w:rPr><m:t>Text.</m:t></m:r>'
        "<m:r><m:t>x</m:t></m:r></m:oMath></w:p>"
    )
    assert _rendered(body, "") == ["x", *_HIDDEN]


def test_docx_a_white_space_between_words_is_read() -> None:
    """A space is a space whatever its colour: a white one between two words keeps them
    apart."""
    runs = (
        "<w:r><w:t>Two</w:t></w:r>"
        f'<w:r><w:rPr>{_WHITE}</w:rPr><w:t xml:space="preserve"> </w:t></w:r>'
        "<w:r><w:t>words.</w:t></w:r>"
    )
    assert _rendered(_paragraph("", runs), "") == ["Two words."]


@pytest.mark.parametrize(
    ("direct", "text", "expected"),
    [
        # Word sizes complex-script text (Arabic, Hebrew, Thai, Devanagari) by w:szCs.
        ('<w:sz w:val="1"/><w:szCs w:val="24"/>', "\u0645\u0631\u062d\u0628\u0627", "shown"),
        ('<w:sz w:val="1"/><w:szCs w:val="24"/><w:rtl/>', "Text.", "shown"),
        ('<w:sz w:val="1"/><w:szCs w:val="24"/><w:cs/>', "Text.", "shown"),
        ('<w:sz w:val="1"/><w:szCs w:val="24"/>', "Text.", "hidden"),
        ('<w:sz w:val="1"/><w:szCs w:val="1"/><w:rtl/>', "Text.", "hidden"),
    ],
)
def test_docx_complex_script_text_is_sized_by_its_own_size(
    direct: str, text: str, expected: str
) -> None:
    """Word draws complex-script text, and a run marked right-to-left or complex script, at
    ``w:szCs``, not ``w:sz``: a tiny ``w:sz`` does not hide Arabic at twelve points."""
    body = f"<w:p><w:r><w:rPr>{direct}</w:rPr><w:t>{text}</w:t></w:r></w:p>"
    lines = _rendered(body, "")
    assert lines == ([text] if expected == "shown" else [lines[0]])
    assert (expected == "hidden") == lines[0].startswith("[airlock:")


@pytest.mark.parametrize(
    ("color", "expected"),
    [
        # Word draws a theme colour, not the value cached beside it: background1 is light1
        # by the settings' mapping, the theme's window colour, white.
        ('w:val="000000" w:themeColor="background1"', _HIDDEN),
        ('w:val="000000" w:themeColor="light1"', _HIDDEN),
        ('w:val="FFFFFF" w:themeColor="text1"', _SHOWN),
        ('w:val="FFFFFF" w:themeColor="accent1"', _SHOWN),
        # Shaded to three quarters: grey, not white.
        ('w:val="FFFFFF" w:themeColor="background1" w:themeShade="BF"', _SHOWN),
        ('w:val="FFFFFF" w:themeColor="background1" w:themeTint="33"', _HIDDEN),
        ('w:val="FFFFFF" w:themeColor="nonsense"', _SHOWN),
    ],
)
def test_docx_a_theme_colour_is_resolved_through_the_theme(color: str, expected: list[str]) -> None:
    """A run coloured by the theme's background colour is white on the page whatever its
    ``w:val`` says."""
    body = _paragraph("", _run("", f"<w:color {color}/>"))
    assert _rendered(body, "") == expected


@pytest.mark.parametrize(
    ("member", "content"),
    [
        # The settings map background1 to the theme's dark colour (a dark-mapped document).
        (
            "word/settings.xml",
            f'<w:settings xmlns:w="{WORD_NAMESPACE}"><w:clrSchemeMapping w:bg1="dark1" '
            'w:t1="light1"/></w:settings>',
        ),
        # A theme that is not well-formed decides nothing, and refuses nothing.
        ("word/theme/theme1.xml", "<a:theme"),
    ],
)
def test_docx_a_theme_colour_not_known_to_be_white_is_read(member: str, content: str) -> None:
    """Only a theme colour the theme and the settings' mapping make white leaves text out."""
    body = _paragraph("", _run("", '<w:color w:val="FFFFFF" w:themeColor="background1"/>'))
    payload = docx_with({"word/document.xml": document_xml(body), member: content.encode()})
    assert rendered_docx("application/octet-stream", payload, LIMITS).splitlines() == _SHOWN


def test_docx_white_text_in_a_header_is_left_out() -> None:
    """Headers, footers and notes are read by the same walk as the body."""
    document = python_docx.Document()
    header = document.sections[0].header.paragraphs[0]
    header.add_run("Header. ")
    header.add_run("Planted.").font.color.rgb = python_docx.shared.RGBColor(0xFF, 0xFF, 0xFF)
    document.add_paragraph("Body.")
    lines = rendered_docx("application/octet-stream", _saved(document), LIMITS).splitlines()
    assert "Planted." not in "\n".join(lines)
    assert lines[-1] == "[airlock: 8 characters of hidden text left out]"


def test_docx_ink_costs_linear_time_in_runs() -> None:
    """Each run's colour and size are looked up in what each style resolves to once, not
    walked through the styles again: ten times the runs must cost under thirty times the time
    (enough runs to be timed, least of three: no allowance in seconds)."""
    styles = _INK_STYLES + "".join(
        f'<w:style w:type="character" w:styleId="C{n}"><w:basedOn w:val="C{n + 1}"/></w:style>'
        for n in range(60)
    )
    run = '<w:r><w:rPr><w:rStyle w:val="C0"/><w:sz w:val="1"/></w:rPr><w:t>a</w:t></w:r>'

    def cost(runs: int) -> float:
        payload = docx_with(
            {
                "word/document.xml": document_xml(_paragraph("WhitePara", run * runs)),
                "word/styles.xml": styles_xml(styles),
            }
        )
        return least_cpu_seconds(
            lambda: docx_extractor.extract_docx("application/octet-stream", payload, LIMITS)
        )

    assert cost(100_000) < 30 * cost(10_000)


# What an attacker's review of the white-text rule found: typography taken for an effect drawn
# around the letters, and what is behind white text (a shape behind it, a table style's other
# colours, shading from numbering or the defaults, a text box's fill) missed, or taken as
# painted when it paints white.
_W14 = 'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml"'
_LIGATURES = f'<w14:ligatures {_W14} w14:val="standardContextual"/>'


def _fill(colour: str) -> str:
    """A Word 2010 text fill (``w14:textFill``) of one colour element."""
    return f"<w14:textFill {_W14}><w14:solidFill>{colour}</w14:solidFill></w14:textFill>"


@pytest.mark.parametrize(
    ("styles", "direct"),
    [
        # Word 365's own document defaults set ligatures: typography, nothing drawn around.
        (
            '<w:docDefaults><w:rPrDefault><w:rPr><w:kern w:val="2"/><w:sz w:val="24"/>'
            f"{_LIGATURES}</w:rPr></w:rPrDefault></w:docDefaults>",
            _WHITE,
        ),
        ("", _WHITE + _LIGATURES + f'<w14:numForm {_W14} w14:val="oldStyle"/>'),
        ("", _WHITE + f'<w14:stylisticSets {_W14}><w14:styleSet w14:id="1"/></w14:stylisticSets>'),
        ("", _WHITE + f"<w14:cntxtAlts {_W14}/>"),
        # An outline without a fill draws nothing.
        ("", _WHITE + f'<w14:textOutline {_W14} w14:w="9525"><w14:noFill/></w14:textOutline>'),
        # Letters with no fill are drawn in no colour, whatever w:color says.
        ("", f'<w:color w:val="000000"/><w14:textFill {_W14}><w14:noFill/></w14:textFill>'),
        # The text fill is the letters' colour: white, by value or by the theme's background.
        ("", '<w:color w:val="000000"/>' + _fill(f'<w14:srgbClr {_W14} w14:val="FFFFFF"/>')),
        ("", '<w:color w:val="000000"/>' + _fill(f'<w14:schemeClr {_W14} w14:val="bg1"/>')),
    ],
)
def test_docx_typography_and_unfilled_letters_do_not_show_text(styles: str, direct: str) -> None:
    """Only a Word 2010 effect that paints (a glow, a shadow, a reflection, an outline in a
    colour) draws white text where a reader sees it; ligatures (in every Word 365 document's
    defaults) turned the rule off everywhere, and letters without a fill were read."""
    assert _rendered(_paragraph("", _run("", direct)), styles) == _HIDDEN


@pytest.mark.parametrize(
    "direct",
    [
        _WHITE + f'<w14:glow {_W14} w14:rad="63500"><w14:srgbClr w14:val="1F3864"/></w14:glow>',
        _WHITE + f'<w14:shadow {_W14} w14:blurRad="38100"/>',
        _WHITE + f'<w14:reflection {_W14} w14:blurRad="6350"/>',
        _WHITE + f'<w14:props3d {_W14} w14:extrusionH="57150"/>',
        _WHITE
        + f'<w14:textOutline {_W14} w14:w="9525"><w14:solidFill><w14:srgbClr w14:val="000000"/>'
        "</w14:solidFill></w14:textOutline>",
        # A fill of another colour, or one not known (modified, a gradient): read.
        _WHITE + _fill(f'<w14:srgbClr {_W14} w14:val="000000"/>'),
        _WHITE + _fill(f'<w14:schemeClr {_W14} w14:val="tx1"/>'),
        _WHITE
        + _fill(
            f'<w14:srgbClr {_W14} w14:val="FFFFFF"><w14:lumMod w14:val="50000"/></w14:srgbClr>'
        ),
        _WHITE + f"<w14:textFill {_W14}><w14:gradFill/></w14:textFill>",
    ],
)
def test_docx_word_2010_effects_that_paint_show_white_text(direct: str) -> None:
    """A glow, a shadow, a reflection, 3-D depth, an outline in a colour, or letters filled
    with a colour that is not white: the text shows."""
    assert _rendered(_paragraph("", _run("", direct)), "") == _SHOWN


def test_docx_word_2010_properties_cost_no_memory_per_style_and_property() -> None:
    """A character style setting thousands of distinct Word 2010 properties, and thousands of
    styles based on it: each style's resolved properties copied every one (441 MB for a
    0.36 MB styles part). Twice the styles and properties must cost under three times the
    memory (four times if each style copies each property)."""

    def peak(count: int) -> int:
        properties = "".join(f"<w14:p{n} {_W14}/>" for n in range(count))
        styles = f'<w:style w:type="character" w:styleId="C"><w:rPr>{properties}</w:rPr></w:style>'
        styles += "".join(
            f'<w:style w:type="character" w:styleId="C{n}"><w:basedOn w:val="C"/></w:style>'
            for n in range(count)
        )
        payload = docx_with(
            {
                "word/document.xml": document_xml(_paragraph("", _run("C0", _WHITE))),
                "word/styles.xml": styles_xml(styles),
            }
        )
        tracemalloc.start()
        try:
            docx_extractor.extract_docx("application/octet-stream", payload, LIMITS)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(1200) < 3 * peak(600)


_NAVY = '<a:solidFill><a:srgbClr val="1F3864"/></a:solidFill>'
_BANNER = anchored_shape(f'<wps:spPr><a:prstGeom prst="rect"/>{_NAVY}</wps:spPr>', behind=True)


def _vml_behind(attributes: str, content: str = "") -> str:
    """A VML rectangle below the text's layer (a negative z-index), as Word 2007 draws one."""
    return (
        '<w:r><w:pict><v:rect style="position:absolute;width:612pt;height:100pt;z-index:-1" '
        f"{attributes}>{content}</v:rect></w:pict></w:r>"
    )


@pytest.mark.parametrize(
    "shape",
    [
        _BANNER,
        # A picture behind the text, whatever it shows.
        _BANNER.replace(_NAVY, ""),
        _vml_behind('fillcolor="#1f3864" stroked="f"'),
        _vml_behind('filled="f"', "<v:imagedata/>"),
        # A watermark (Word's "DRAFT" or picture one) is behind the text wherever it stands.
        '<w:r><w:pict><v:shape id="PowerPlusWaterMarkObject1" style="position:absolute" '
        'fillcolor="silver"/></w:pict></w:r>',
    ],
)
def test_docx_white_text_on_a_shape_behind_the_text_is_read(shape: str) -> None:
    """A résumé's name in white on a navy banner drawn behind the text (an anchored shape
    behind it, a VML shape below the text's layer): where the banner reaches is not worked
    out, so white text anywhere in its part shows."""
    body = _paragraph("", shape + _run("", _WHITE)) + _paragraph(
        "", f"<w:r><w:rPr>{_WHITE}</w:rPr><w:t>Engineer.</w:t></w:r>"
    )
    assert _rendered(body, "", root_attributes=DRAWING_NAMESPACES) == ["Text.", "Engineer."]


def test_docx_a_banner_behind_a_headers_text_is_read() -> None:
    """A banner anchored in the header is drawn on every page, behind the body's text too."""
    document = python_docx.Document()
    header = document.sections[0].header.paragraphs[0]
    header._p.append(
        parse_xml(
            _BANNER.replace("<w:r>", f'<w:r xmlns:w="{WORD_NAMESPACE}" {DRAWING_NAMESPACES}>', 1)
        )
    )
    document.add_paragraph("Jane Doe").runs[0].font.color.rgb = python_docx.shared.RGBColor(
        0xFF, 0xFF, 0xFF
    )
    lines = rendered_docx("application/octet-stream", _saved(document), LIMITS).splitlines()
    assert lines == ["Jane Doe"]


@pytest.mark.parametrize(
    "shape",
    [
        # Behind the text but painting nothing; a banner in front of the text (not behind it).
        _vml_behind('filled="f" stroked="f"'),
        _vml_behind('fillcolor="white"'),
        _BANNER.replace('behindDoc="1"', 'behindDoc="0"'),
    ],
)
def test_docx_a_shape_that_paints_nothing_behind_the_text_backs_nothing(shape: str) -> None:
    """White text stays unseen beside a shape that puts no colour behind it."""
    body = _paragraph("", shape + _run("", _WHITE))
    assert _rendered(body, "", root_attributes=DRAWING_NAMESPACES) == _HIDDEN


_CONDITIONAL_COLOUR = (
    '<w:style w:type="table" w:styleId="T"><w:rPr><w:color w:val="FFFFFF"/></w:rPr>'
    '<w:tblStylePr w:type="firstRow"><w:rPr><w:color w:val="{}"/></w:rPr></w:tblStylePr>'
    "</w:style>"
)


def test_docx_a_table_styles_other_colours_show_its_white() -> None:
    """A table style white at its base and black in its header row: which rows the parts
    reach is not worked out, so its white hides nothing (the header row Word draws black was
    dropped); a style white in every part still hides."""
    table = (
        '<w:tbl><w:tblPr><w:tblStyle w:val="T"/><w:tblLook w:val="0020" w:firstRow="1"/>'
        f"</w:tblPr><w:tr><w:tc>{_paragraph('', _run('', ''))}</w:tc></w:tr></w:tbl>"
    )
    assert _rendered(table, _CONDITIONAL_COLOUR.format("000000")) == [
        "| Text. |",
        "| --- |",
    ]
    assert _rendered(table, _CONDITIONAL_COLOUR.format("FFFFFF")) == _HIDDEN


_DISPLAY_BACKGROUND = {"word/settings.xml": settings_xml("<w:displayBackgroundShape/>")}


@pytest.mark.parametrize(
    ("background", "parts", "expected"),
    [
        # Word shows the page colour only when the settings say to (ECMA-376 17.15.1.26).
        ('<w:background w:color="1F3864"/>', None, _HIDDEN),
        ('<w:background w:color="1F3864"/>', _DISPLAY_BACKGROUND, _SHOWN),
        ('<w:background w:color="FFFFFF"/>', _DISPLAY_BACKGROUND, _HIDDEN),
        ("<w:background/>", _DISPLAY_BACKGROUND, _HIDDEN),
        ('<w:background w:color="FFFFFF" w:themeColor="text1"/>', _DISPLAY_BACKGROUND, _SHOWN),
        # A picture or a fill for the page: what it shows is not known.
        (
            '<w:background w:color="FFFFFF"><v:background xmlns:v="urn:schemas-microsoft-com:vml"'
            ' id="_x0000_s1025"><v:fill type="frame"/></v:background></w:background>',
            _DISPLAY_BACKGROUND,
            _SHOWN,
        ),
    ],
)
def test_docx_the_page_colour_backs_white_text_when_shown_and_not_white(
    background: str, parts: dict[str, bytes] | None, expected: list[str]
) -> None:
    """A white page colour, none, or one Word does not display is the white page."""
    body = _paragraph("", _run("", _WHITE))
    assert _rendered(body, "", background=background, parts=parts) == expected


@pytest.mark.parametrize(
    ("direct", "text", "expected"),
    [
        # A run marked complex-script or right-to-left is drawn at w:szCs, all of it.
        ('<w:cs/><w:sz w:val="24"/><w:szCs w:val="1"/>', "Text.", _HIDDEN),
        ('<w:rtl/><w:sz w:val="24"/><w:szCs w:val="1"/>', "Text.", _HIDDEN),
        # Hebrew letters at w:szCs, the Latin ones beside them at w:sz.
        ('<w:sz w:val="24"/><w:szCs w:val="1"/>', "\u05e9\u05dc\u05d5\u05dd", None),
        (
            '<w:sz w:val="24"/><w:szCs w:val="1"/>',
            "Hi \u05e9\u05dc\u05d5\u05dd",
            ["Hi \u05e9\u05dc\u05d5\u05dd"],
        ),
        ('<w:sz w:val="24"/><w:szCs w:val="1"/>', "Text.", _SHOWN),
    ],
)
def test_docx_each_script_is_sized_by_its_own_size(
    direct: str, text: str, expected: list[str] | None
) -> None:
    """A tiny w:szCs hid nothing once w:sz was not tiny: Hebrew at half a point was read."""
    body = f"<w:p><w:r><w:rPr>{direct}</w:rPr><w:t>{text}</w:t></w:r></w:p>"
    lines = _rendered(body, "")
    if expected is None:
        assert len(lines) == 1 and lines[0].startswith("[airlock: 4 characters")
    else:
        assert lines == expected


@pytest.mark.parametrize(
    ("shading", "expected"),
    [
        # Shading that paints white: a white fill named by the theme, a white pattern.
        ('<w:shd w:val="clear" w:fill="FFFFFF" w:themeFill="background1"/>', _HIDDEN),
        ('<w:shd w:val="solid" w:color="FFFFFF"/>', _HIDDEN),
        ('<w:shd w:val="pct10" w:color="FFFFFF" w:fill="FFFFFF"/>', _HIDDEN),
        # A pattern in automatic colour (black), a theme fill shaded to grey or dark: read.
        ('<w:shd w:val="solid" w:color="auto"/>', _SHOWN),
        ('<w:shd w:val="pct10" w:color="000000" w:fill="FFFFFF"/>', _SHOWN),
        (
            '<w:shd w:val="clear" w:fill="FFFFFF" w:themeFill="background1" '
            'w:themeFillShade="80"/>',
            _SHOWN,
        ),
        ('<w:shd w:val="clear" w:fill="FFFFFF" w:themeFill="text1"/>', _SHOWN),
        ('<w:shd w:val="clear" w:fill="FFFFFF" w:themeFill="nonsense"/>', _SHOWN),
    ],
)
def test_docx_shading_paints_only_a_colour_not_white(shading: str, expected: list[str]) -> None:
    """A shading's pattern is drawn in its ``w:color`` over its fill: only a colour not white
    among them backs white text, in the run, the paragraph or the table."""
    assert _rendered(_paragraph("", _run("", _WHITE + shading)), "") == expected
    paragraph = f"<w:p><w:pPr>{shading}</w:pPr>{_run('', _WHITE)}</w:p>"
    assert _rendered(paragraph, "") == expected
    table = (
        f"<w:tbl><w:tblPr>{shading}</w:tblPr><w:tr><w:tc>{_paragraph('', _run('', _WHITE))}"
        "</w:tc></w:tr></w:tbl>"
    )
    assert _rendered(table, "")[-1] == (expected[0] if expected == _HIDDEN else "| Text. |")


@pytest.mark.parametrize(
    ("light1", "expected"),
    [
        # The system's window colour is white, whatever colour it last had.
        ('<a:sysClr val="window" lastClr="000000"/>', _HIDDEN),
        ('<a:sysClr val="window"/>', _HIDDEN),
        ('<a:srgbClr val="FFFFFF"><a:lumMod val="100000"/></a:srgbClr>', _HIDDEN),
        ('<a:prstClr val="white"/>', _HIDDEN),
        ('<a:sysClr val="windowText" lastClr="FFFFFF"/>', _SHOWN),
        ('<a:prstClr val="black"/>', _SHOWN),
        ('<a:srgbClr val="FFFFFF"><a:lumMod val="50000"/></a:srgbClr>', _SHOWN),
        ('<a:sysClr val="btnFace" lastClr="FFFFFF"/>', _SHOWN),
    ],
)
def test_docx_a_theme_colour_is_read_as_word_draws_it(light1: str, expected: list[str]) -> None:
    """The theme's colours as Word draws them: a system colour by its name, not the value it
    last had; a preset colour; a modifier that changes nothing."""
    body = _paragraph("", _run("", '<w:color w:val="000000" w:themeColor="background1"/>'))
    parts = {"word/theme/theme1.xml": theme_xml(light1)}
    assert _rendered(body, "", parts=parts) == expected


@pytest.mark.parametrize("insertion", ["ins", "moveTo"])
def test_docx_white_text_tracked_as_inserted_is_judged_by_its_colour(insertion: str) -> None:
    """Word's default view of tracked changes (Simple Markup) draws inserted text in its own
    colour: white inserted text is as unseen as any; inserted text in ink is read."""
    white = f'<w:{insertion} w:id="1" w:author="a">{_run("", _WHITE)}</w:{insertion}>'
    assert _rendered(_paragraph("", white), "") == _HIDDEN
    inked = f'<w:{insertion} w:id="1" w:author="a">{_run("", "")}</w:{insertion}>'
    assert _rendered(_paragraph("", inked), "") == _SHOWN


_NUMBERING = (
    f'<w:numbering xmlns:w="{WORD_NAMESPACE}"><w:abstractNum w:abstractNumId="9"><w:lvl '
    'w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="bullet"/><w:lvlText w:val="-"/><w:pPr>'
    '<w:shd w:val="clear" w:fill="{}"/></w:pPr></w:lvl></w:abstractNum><w:num w:numId="5">'
    '<w:abstractNumId w:val="9"/></w:num></w:numbering>'
)


@pytest.mark.parametrize(("fill", "expected"), [("000000", ["- Text."]), ("auto", None)])
def test_docx_a_list_levels_shading_is_behind_its_paragraphs(
    fill: str, expected: list[str] | None
) -> None:
    """A list level's paragraph shading is behind the white text of its items."""
    body = (
        '<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="5"/></w:numPr></w:pPr>'
        f"{_run('', _WHITE)}</w:p>"
    )
    parts = {"word/numbering.xml": _NUMBERING.format(fill).encode()}
    lines = _rendered(body, "", parts=parts)
    assert lines == (expected or _HIDDEN)


def test_docx_the_default_paragraph_shading_is_behind_all_text() -> None:
    """The document defaults' paragraph shading (``w:pPrDefault``) is behind every paragraph."""
    defaults = (
        '<w:docDefaults><w:pPrDefault><w:pPr><w:shd w:val="clear" w:fill="{}"/></w:pPr>'
        "</w:pPrDefault></w:docDefaults>"
    )
    body = _paragraph("", _run("", _WHITE))
    assert _rendered(body, defaults.format("000000")) == _SHOWN
    assert _rendered(body, defaults.format("FFFFFF")) == _HIDDEN


def _text_box(shape: str) -> str:
    """A floating text box holding a white paragraph, its shape's properties ``shape``."""
    content = (
        f"<wps:txbx><w:txbxContent>{_paragraph('', _run('', _WHITE))}</w:txbxContent></wps:txbx>"
    )
    return anchored_shape(shape + content)


def _vml_text_box(attributes: str) -> str:
    """A VML text box (Word 2007's) holding a white paragraph, its shape's ``attributes``."""
    content = f"<w:txbxContent>{_paragraph('', _run('', _WHITE))}</w:txbxContent>"
    shape = f"<v:shape {attributes}><v:textbox>{content}</v:textbox></v:shape>"
    return f"<w:r><w:pict>{shape}</w:pict></w:r>"


@pytest.mark.parametrize(
    ("box", "expected"),
    [
        # No fill, or a white one: the white page shows through.
        (_text_box("<wps:spPr><a:noFill/></wps:spPr>"), _HIDDEN),
        (
            _text_box('<wps:spPr><a:solidFill><a:schemeClr val="lt1"/></a:solidFill></wps:spPr>'),
            _HIDDEN,
        ),
        (
            _text_box('<wps:spPr><a:solidFill><a:srgbClr val="FFFFFF"/></a:solidFill></wps:spPr>'),
            _HIDDEN,
        ),
        (_text_box("<wps:spPr/>"), _HIDDEN),
        (_vml_text_box('filled="f"'), _HIDDEN),
        (_vml_text_box(""), _HIDDEN),
        # A coloured fill, one the shape's style gives, or one not known: read.
        (_text_box(f"<wps:spPr>{_NAVY}</wps:spPr>"), _SHOWN),
        (
            _text_box(
                '<wps:spPr><a:solidFill><a:schemeClr val="accent1"/></a:solidFill></wps:spPr>'
            ),
            _SHOWN,
        ),
        (_text_box("<wps:spPr><a:gradFill/></wps:spPr>"), _SHOWN),
        (
            _text_box(
                '<wps:spPr/><wps:style><a:lnRef idx="2"/><a:fillRef idx="1"/><a:effectRef idx="0"/>'
                '<a:fontRef idx="minor"/></wps:style>'
            ),
            _SHOWN,
        ),
        (_vml_text_box('fillcolor="#1f3864"'), _SHOWN),
    ],
)
def test_docx_a_text_box_backs_white_text_only_with_a_colour(box: str, expected: list[str]) -> None:
    """A text box with no fill or a white one shows the page behind its white text."""
    assert _rendered(_paragraph("", box), "", root_attributes=DRAWING_NAMESPACES) == expected


@pytest.mark.parametrize(
    "shape",
    [
        anchored_shape(f"<wps:spPr>{_NAVY}</wps:spPr>"),
        '<w:r><w:pict><v:rect style="position:absolute" fillcolor="#1f3864"/></w:pict></w:r>',
    ],
)
def test_docx_a_text_box_without_a_fill_on_another_shape_is_read(shape: str) -> None:
    """A text box without a fill of its own may stand on another shape (a navy sidebar): where
    shapes stand is not worked out, so white text in it is read beside any shape that paints."""
    box = _text_box("<wps:spPr><a:noFill/></wps:spPr>")
    body = _paragraph("", shape) + _paragraph("", box)
    assert _rendered(body, "", root_attributes=DRAWING_NAMESPACES) == _SHOWN


def test_entities_in_the_theme_part_are_never_expanded_or_fetched(
    canary: Canary, tmp_path: Path
) -> None:
    """The theme is parsed now, for theme colours: a billion laughs or an external entity in it
    (the canary's URL, a local file) decides nothing, refuses nothing, and is never expanded
    or fetched; the white text is read, as under a theme not known."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0")
    body = _paragraph("", _run("", '<w:color w:val="FFFFFF" w:themeColor="background1"/>'))
    root = "a:theme"
    for prologue in (laughs(root), external(root, canary.url), external(root, secret.as_uri())):
        theme = (
            theme_xml("<a:srgbClr val='FFFFFF'/>")
            .decode()
            .replace("<a:theme ", f"{prologue}<a:theme ", 1)
            .replace("<a:lt1>", "<a:lt1>&bomb;", 1)
        )
        payload = docx_with(
            {"word/document.xml": document_xml(body), "word/theme/theme1.xml": theme.encode()}
        )
        text = rendered_docx("application/octet-stream", payload, LIMITS)
        assert text.splitlines() == _SHOWN
    assert canary.hits == []
