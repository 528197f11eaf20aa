"""No road from a PDF to PDFium's JPEG 2000 and JBIG2 decoders.

PDFium decodes a stream filtered with /JPXDecode with OpenJPEG and one filtered with
/JBIG2Decode with its own JBIG2 decoder wherever its page draws it: an image of the page, and
just as well an image inside a tiling pattern, a form, an annotation's appearance, a Type3 glyph
or a soft mask, or an inline image in any content stream. The sandbox runs neither codec, so a
check of the page's own images left every other road open. PDFium opens only a page copied
alone by pypdf (``sandbox/extractors/pdf.py``), so it can reach nothing but the copy's objects;
:func:`refuse_hidden_decoders` walks all of them before it does. See docs/sandbox.md,
"What PDFium opens".
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from pypdf import PdfWriter, get_configuration
from pypdf.errors import LimitReachedError
from pypdf.filters import (
    ASCII85Decode,
    ASCIIHexDecode,
    FlateDecode,
    LZWDecode,
    RunLengthDecode,
)
from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject, NameObject, PdfObject
from pypdf.generic import StreamObject as Stream

from sandbox import codes
from sandbox.extractors.registry import Refusal

#: The filters PDFium hands to a codec the sandbox never runs. The short forms name no filter
#: (inline images abbreviate neither codec) and are refused all the same: a reader that expands
#: them reaches the same decoders, and no honest file needs them.
REFUSED = {
    "/JPXDecode": "JPEG 2000",
    "/JPX": "JPEG 2000",
    "/JBIG2Decode": "JBIG2",
    "/JBIG2": "JBIG2",
}

Decoder = Callable[[bytes, DictionaryObject], bytes]
#: The filters PDFium itself undoes before it parses a stream as content (the list of its
#: ValidateDecoderPipeline). At any other filter PDFium stops and parses what the filters before
#: it produced, so the check stops there too. /Crypt is passed over, as PDFium does.
DECODERS: dict[str, Decoder] = {
    "/FlateDecode": FlateDecode.decode,
    "/Fl": FlateDecode.decode,
    "/LZWDecode": LZWDecode.decode,
    "/LZW": LZWDecode.decode,
    "/ASCII85Decode": ASCII85Decode.decode,
    "/A85": ASCII85Decode.decode,
    "/ASCIIHexDecode": ASCIIHexDecode.decode,
    "/AHx": ASCIIHexDecode.decode,
    "/RunLengthDecode": RunLengthDecode.decode,
    "/RL": RunLengthDecode.decode,
}
PASSED_OVER = "/Crypt"
_LZW = frozenset({"/LZWDecode", "/LZW"})

#: PDF's white-space and delimiter characters: what ends a name or an operator.
_DELIMITER_BYTES = b"\x00\t\n\x0c\r ()<>[]{}/%"
_DELIMITERS = re.escape(_DELIMITER_BYTES)
#: A name in a content stream that may spell a refused filter: one of them as it is, or any name
#: with a #-escape (``/JPX#44ecode`` is /JPXDecode to every reader), decoded to be sure. Names
#: are found anywhere in the bytes, whatever a parser would take them for: a string that reads
#: "/JPXDecode" refuses the page too, which costs a false alarm on a page that needs PDFium and
#: talks about these filters, never a missed image.
_SUSPECT_NAME = re.compile(
    rb"/(JPXDecode|JBIG2Decode|JPX|JBIG2|[^%s]*#[^%s]*)(?=[%s]|\Z)"
    % (_DELIMITERS, _DELIMITERS, _DELIMITERS)
)
_ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")
#: Every delimiter as a space, so that a token is found by a plain search for it between spaces
#: (C speed whatever the bytes: a regular expression with look-arounds took 1.4 s on 70 MB).
_DELIMITERS_AS_SPACES = bytes.maketrans(_DELIMITER_BYTES, b" " * len(_DELIMITER_BYTES))

_XOBJECTS = "/XObject"
_IMAGE = "/Image"
#: The entries of an image through which PDFium reaches another image, and only ever decodes it.
_IMAGE_MASKS = frozenset({"/SMask", "/Mask"})
#: The objects that may lead to a stream. A number, name or string leads nowhere, and a visit
#: to each cost a text copy most of its walk: a CID font's widths are thousands of numbers.
_LEADING = (IndirectObject, DictionaryObject, ArrayObject)


class _Role(enum.Enum):
    """How an object was reached, which decides what PDFium may do with a stream there."""

    #: Anything PDFium may parse as content (or as data): its stream's data is searched.
    CONTENT = enum.auto()
    #: An XObject whose /Subtype is /Image, or an image's mask: PDFium only decodes it, never
    #: parses it, so its data (a scan's megabytes) is not searched for inline images. Reached
    #: any other way, the same stream is.
    IMAGE = enum.auto()
    #: A resources' /XObject dictionary, whose entries are images or forms by their /Subtype.
    XOBJECTS = enum.auto()


class _Visit(NamedTuple):
    """An object still to check, the path it was reached by, and in which role. A tuple: the
    walk makes one for every container of the copy, where a frozen dataclass's own setting of
    each field cost a tenth of the walk."""

    item: PdfObject
    path: str
    role: _Role
    #: False under a page other than the copy's own (a link's destination drags it into the
    #: copy): PDFium renders none of it, so its images are not the page's to check.
    on_page: bool = True


@dataclass(frozen=True)
class CheckedCopy:
    """What the walk of a page's copy found for the check of its images: the image streams
    the page may draw (images and their masks), each once, and whether any view PDFium may
    parse of the page's own content streams holds the operator that opens an inline image."""

    images: list[Stream]
    opens_inline_image: bool


def refuse_hidden_decoders(writer: PdfWriter, *, one_page: bool = True) -> CheckedCopy:
    """Refuse the one-page copy in ``writer`` if any stream in it is filtered with a codec in
    :data:`REFUSED`, or any stream PDFium may parse as content names one (an inline image);
    return what the check of what the page's images hold needs (``pdf_images``), read in the
    same pass over the content: decoding it twice cost the inflating twice. Another page a
    link's destination drags into the copy is checked for the codecs too, but its images are
    not the page's. A copy of every page (``one_page`` false: the text copy) is checked the
    same way, no page's images are gathered, and whether any stream PDFium may parse as
    content opens an inline image is told.

    Every object the copy's catalog and page lead to is visited, once in each role it is
    reached in, whatever refers to it: no list of the roads PDFium takes to a stream is needed,
    so none can be missing.
    """
    images: dict[int, Stream] = {}
    page_content: set[int] | None = None  # None: every stream parsed as content
    if one_page:
        contents = resolved(writer.pages[0].get("/Contents"))
        page_content = {
            id(stream)
            for item in (contents if isinstance(contents, ArrayObject) else [contents])
            if isinstance(stream := resolved(item), Stream)
        }
    opens_inline_image = False
    for stream, visit in _streams(writer, one_page=one_page):
        looked_for = page_content is None or id(stream) in page_content
        opens = _check_stream(stream, visit, page_content=looked_for)
        opens_inline_image = opens_inline_image or opens
        if visit.role is _Role.IMAGE and visit.on_page:
            images.setdefault(id(stream), stream)  # pypdf resolves a number to one object
    return CheckedCopy(list(images.values()), opens_inline_image)


def reached_only_as_images(writer: PdfWriter) -> list[Stream]:
    """The streams of a copy of every page that every road to reaches as an image (an
    XObject whose ``/Subtype`` is ``/Image``, an image's mask): what PDFium may only decode
    and draw. A stream also reached another way (a page's content, a font's map dressed as an
    image) is not one: blanked, its words were lost or changed without a word."""
    roles: dict[int, tuple[Stream, set[_Role]]] = {}
    for stream, visit in _streams(writer, one_page=False):
        roles.setdefault(id(stream), (stream, set()))[1].add(visit.role)
    return [stream for stream, reached in roles.values() if reached == {_Role.IMAGE}]


def _streams(writer: PdfWriter, *, one_page: bool) -> Iterator[tuple[Stream, _Visit]]:
    """Every stream the copy's catalog (and, for a one-page copy, its page) leads to, with
    how it was reached, once in each role."""
    stack = [_Visit(writer.root_object, "catalog", _Role.CONTENT)]
    own_page: PdfObject | None = None
    if one_page:
        page = writer.pages[0]
        stack.append(_Visit(page.indirect_reference or page, "page", _Role.CONTENT))
        own_page = page.get_object()
    seen: set[tuple[int, int, int, _Role, bool]] = set()
    while stack:
        visit = stack.pop()
        item = visit.item
        if isinstance(item, IndirectObject):
            key = (id(item.pdf), item.idnum, item.generation, visit.role, visit.on_page)
            if key in seen:
                continue
            seen.add(key)
            target = item.get_object()
            if target is None:
                continue  # a reference to nothing: PDFium reads null
            item = target
        if isinstance(item, Stream):
            yield item, visit
        if isinstance(item, DictionaryObject):
            on_page = visit.on_page and (item is own_page or not _is_page(item))
            stack.extend(
                _Visit(value, f"{visit.path}{key}", _role(visit.role, key, value), on_page)
                for key, value in item.items()
                if isinstance(value, _LEADING)
            )
        elif isinstance(item, ArrayObject):
            stack.extend(
                _Visit(value, f"{visit.path}[{index}]", _Role.CONTENT, visit.on_page)
                for index, value in enumerate(item)
                if isinstance(value, _LEADING)
            )


def _role(parent: _Role, key: str, value: PdfObject) -> _Role:
    """The role of the entry ``key`` of a dictionary reached as ``parent``."""
    if parent is _Role.XOBJECTS:
        return _Role.IMAGE if _is_image(value) else _Role.CONTENT
    if key == _XOBJECTS:
        return _Role.XOBJECTS
    if parent is _Role.IMAGE and key in _IMAGE_MASKS:
        return _Role.IMAGE
    return _Role.CONTENT


def _is_page(dictionary: DictionaryObject) -> bool:
    kind = resolved(dictionary.get("/Type"))
    return isinstance(kind, NameObject) and kind == "/Page"


def _is_image(xobject: PdfObject) -> bool:
    target = xobject.get_object()
    if not isinstance(target, Stream):
        return False
    subtype = resolved(target.get("/Subtype"))
    return isinstance(subtype, NameObject) and subtype == _IMAGE


def _check_stream(stream: Stream, visit: _Visit, *, page_content: bool) -> bool:
    """Refuse the stream as :func:`refuse_hidden_decoders` says; for a stream it looks in for
    inline images (``page_content``), whether a view of it PDFium may parse holds the operator
    that opens one."""
    chain = filter_chain(stream)
    for name, _ in chain:
        if name in REFUSED:
            raise Refusal(
                codes.UNREADABLE,
                f"{visit.path} is filtered with {name} ({REFUSED[name]}), a format the sandbox "
                "does not decode: no stream of a page PDFium opens may name it",
            )
    opens_inline_image = False
    if visit.role is not _Role.IMAGE:
        for data in _content_views(stream, chain, visit.path):
            _refuse_named(data, visit.path)
            opens_inline_image = opens_inline_image or (
                page_content and _may_hold_inline_image(data)
            )
    return opens_inline_image


def filter_chain(stream: Stream) -> list[tuple[str | None, DictionaryObject]]:
    """The stream's filters in order, each with its parameters, as PDFium pairs them: one name
    with the dictionary /DecodeParms, or an array of names with an array of dictionaries. An
    entry that is not a name is None (PDFium then decodes nothing, and parses the stored data)."""
    filters = resolved(stream.get("/Filter"))
    parameters = resolved(stream.get("/DecodeParms"))
    if isinstance(filters, NameObject):
        return [(str(filters), _dictionary(parameters))]
    if not isinstance(filters, ArrayObject):
        return []
    each = parameters if isinstance(parameters, ArrayObject) else []
    return [
        (
            str(name) if isinstance(name := resolved(entry), NameObject) else None,
            _dictionary(resolved(each[index]) if index < len(each) else None),
        )
        for index, entry in enumerate(filters)
    ]


def _content_views(
    stream: Stream, chain: list[tuple[str | None, DictionaryObject]], path: str
) -> Iterator[bytes]:
    """What PDFium may parse as content from the stream: its stored data (what it parses when a
    filter fails), and that data through the filters PDFium undoes itself, up to the first
    other one.

    Where pypdf's decoder fails or cannot decode as PDFium would, the check cannot see what
    PDFium parses, and the page is refused rather than passed unseen.
    """
    # pypdf keeps a stream's stored bytes only here; its own decoders read them the same way.
    stored: bytes = stream._data
    yield stored
    data = stored
    work = DecodingWork(len(chain), path)
    for name, parameters in chain:
        if name == PASSED_OVER:
            continue
        decode = DECODERS.get(name or "")
        if decode is None:
            break
        work.take_in(data)
        if not decodes_as_pdfium(name, parameters):
            raise Refusal(
                codes.UNREADABLE,
                f"{path} is LZW-encoded with a predictor or without early change, which the "
                "check cannot reproduce: what PDFium would parse from it cannot be checked",
            )
        data = undone(
            decode,
            data,
            parameters,
            f"{path} does not decode ({name}: ",
            "): what PDFium would parse from it cannot be checked",
        )
    if data is not stored:
        yield data


class DecodingWork:
    """pypdf's own ceilings on undoing one stream's filters, held wherever the sandbox undoes
    them itself: its filter count, and the bytes all its filters take in together. Without them
    100 nested Flate layers took 11 CPU-s to undo (and PDFium would undo them all again); an
    annotation's appearance or a pattern, which pypdf's text path never decodes, met no
    ceiling at all. Over either, :class:`LimitReachedError`, a ceiling like pypdf's own."""

    def __init__(self, filters: int, what: str) -> None:
        settings = get_configuration()
        if filters > settings.stream_filters_maximum_length:
            raise LimitReachedError(
                f"{what} has {filters} filters, over the "
                f"{settings.stream_filters_maximum_length} a stream may have"
            )
        self._what = what
        self._maximum = settings.stream_decoding_work_maximum_length
        self._taken_in = 0

    def take_in(self, data: bytes) -> None:
        """Count ``data`` as the input of the next filter."""
        self._taken_in += len(data)
        if self._taken_in > self._maximum:
            raise LimitReachedError(f"{self._what}'s filters take in over {self._maximum} bytes")


def undone(
    decode: Decoder, data: bytes, parameters: DictionaryObject, before: str, after: str = ")"
) -> bytes:
    """``data`` through one of pypdf's decoders. A ceiling and the memory limit are verdicts of
    their own; any other failure of the decoder (pypdf's raise their own errors and builtins
    alike) refuses the stream as unreadable, the failure's words between ``before`` and
    ``after``."""
    try:
        return decode(data, parameters)
    except (LimitReachedError, MemoryError):
        raise
    except Exception as exc:
        raise Refusal(codes.UNREADABLE, f"{before}{exc}{after}") from exc


def decodes_as_pdfium(name: str | None, parameters: DictionaryObject) -> bool:
    """Whether pypdf's decoder of the filter ``name`` undoes it as PDFium does: its LZW decoder
    applies neither a predictor nor /EarlyChange 0, where PDFium does both."""
    if name not in _LZW:
        return True
    predictor = resolved(parameters.get("/Predictor"))
    early_change = resolved(parameters.get("/EarlyChange"))
    return not (
        (predictor is not None and not (isinstance(predictor, int) and predictor == 1))
        or (isinstance(early_change, int) and early_change == 0)
    )


def _may_hold_inline_image(content: bytes) -> bool:
    """Whether ``content`` holds the operator that opens an inline image, as a token anywhere in
    its bytes (in a string too, which costs a false alarm, never a miss). pypdf finds inline
    images only by parsing the whole content in Python: a 1 KB PDF whose page content inflates
    to 70 MB of spaces cost 10 CPU-s that way, where this search costs milliseconds."""
    tokens = content.translate(_DELIMITERS_AS_SPACES)
    return b" BI " in tokens or tokens[:3] == b"BI " or tokens[-3:] == b" BI" or tokens == b"BI"


def _refuse_named(data: bytes, path: str) -> None:
    for match in _SUSPECT_NAME.finditer(data):
        name = "/" + _ESCAPE.sub(_unescaped, match.group(1)).decode("latin-1")
        if name in REFUSED:
            raise Refusal(
                codes.UNREADABLE,
                f"{path} names {name} ({REFUSED[name]}) in its data, as an inline image in that "
                "format does: a format the sandbox does not decode, and no stream of a page "
                "PDFium opens may name it",
            )


def _unescaped(escape: re.Match[bytes]) -> bytes:
    return bytes((int(escape.group(1), 16),))


def resolved(value: PdfObject | None) -> PdfObject | None:
    return value.get_object() if value is not None else None


def _dictionary(value: PdfObject | None) -> DictionaryObject:
    """Decode parameters as PDFium takes them: a dictionary (or a stream's), else none."""
    return value if isinstance(value, DictionaryObject) else DictionaryObject()
