"""The copy of a PDF that PDFium reads its text from: every page with what its text needs, and
none of what PDFium's text never reads.

PDFium never opens the upload (docs/sandbox.md, "What PDFium opens"): its xref repair, its
reading of object streams and incremental updates may find objects pypdf never sees. pypdf
writes each page again, keeping only the entries that draw its text (its content, resources
and boxes: no annotations, whose appearances were 60 of the IRS form's 82 ms a page, no
thumbnails, no ``/Kids``, which PDFium would walk whatever ``/Type`` says, and no ``/Rotate``:
PDFium orders a turned page's lines as they are shown, bottom line first on a page turned a
quarter, where the content's own order is pypdf's), and every stream reached only as an image
becomes one blank pixel: text is never read from an image, and no codec's data is left to
decode. What is left is checked as the page copies for OCR are (:func:`refuse_hidden_decoders`)
before PDFium opens it; a content stream holding an inline image is refused too, since PDFium
inflates an inline image's data to find its end, under no ceiling of the check's.
"""

from __future__ import annotations

import io

from pypdf import PdfReader, PdfWriter
from pypdf.generic import DictionaryObject, IndirectObject, NameObject, NumberObject, PdfObject
from pypdf.generic import StreamObject as Stream

from sandbox import codes
from sandbox.extractors.pdf_decoders import reached_only_as_images, refuse_hidden_decoders
from sandbox.extractors.registry import Refusal

_RESOURCES = "/Resources"
#: The entries of a page its text needs; pypdf has already set the inherited ones on it. Its
#: resources are copied apart (:func:`_resources`).
_KEPT = frozenset({"/Type", "/Contents", "/MediaBox", "/CropBox"})
#: What an image becomes: one grey pixel, unfiltered.
_PLACEHOLDER = {
    "/Type": NameObject("/XObject"),
    "/Subtype": NameObject("/Image"),
    "/Width": NumberObject(1),
    "/Height": NumberObject(1),
    "/BitsPerComponent": NumberObject(8),
    "/ColorSpace": NameObject("/DeviceGray"),
}


def text_copy(reader: PdfReader) -> bytes:
    """Every page of ``reader`` written again for PDFium's text, checked; a Refusal when a
    stream of it names a codec the sandbox never runs, cannot be decoded to be checked, or
    opens an inline image."""
    writer = PdfWriter()
    shared: dict[int, PdfObject] = {}
    for page in reader.pages:
        copied = writer.add_page(page, excluded_keys=tuple(key for key in page if key not in _KEPT))
        resources = _resources(
            writer, page.raw_get(_RESOURCES) if _RESOURCES in page else None, shared
        )
        if resources is not None:
            copied[NameObject(_RESOURCES)] = resources
    for image in reached_only_as_images(writer):
        _blank(image)
    buffer = io.BytesIO()
    writer.write(buffer)
    # Checked as written: writing is the last step that could add an object to the copy.
    if refuse_hidden_decoders(writer, one_page=False).opens_inline_image:
        raise Refusal(
            codes.UNREADABLE,
            "a content stream opens an inline image, whose data PDFium inflates to find its end",
        )
    return buffer.getvalue()


def _resources(
    writer: PdfWriter, value: PdfObject | None, shared: dict[int, PdfObject]
) -> PdfObject | None:
    """A page's resources in the copy, each dictionary copied once: pypdf sets an inherited
    dictionary on every page it reaches, and copied with each page, 200 pages sharing one of
    50,000 entries ran the copy out of memory."""
    if value is None:
        return None
    if isinstance(value, IndirectObject):
        return value.clone(writer)
    if id(value) not in shared:
        copied = value.clone(writer)
        shared[id(value)] = (
            writer._add_object(copied) if isinstance(copied, DictionaryObject) else copied
        )
    return shared[id(value)]


def _blank(image: Stream) -> None:
    """Make ``image`` one unfiltered pixel: its masks, filters and data go with the rest."""
    image.clear()
    image.update({NameObject(key): value for key, value in _PLACEHOLDER.items()})
    image._data = b"\x80"
