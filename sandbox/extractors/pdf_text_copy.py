"""The copy of a PDF that PDFium reads its text from: every page with what its text needs, and
none of what PDFium's text never reads.

PDFium never opens the upload (docs/sandbox.md, "What PDFium opens"): its xref repair, its
reading of object streams and incremental updates may find objects pypdf never sees. pypdf
writes each page again, keeping only the entries that draw its text (its content, resources,
boxes and rotation: no annotations, whose appearances were 60 of the IRS form's 82 ms a page,
no thumbnails, and no ``/Kids``, which PDFium would walk whatever ``/Type`` says), and every
image becomes one blank pixel: text is never read from an image, and the copy then holds no
codec's data at all. What is left is checked as the page copies for OCR are
(:func:`refuse_hidden_decoders`) before PDFium opens it.
"""

from __future__ import annotations

import io

from pypdf import PdfReader, PdfWriter
from pypdf.generic import NameObject, NumberObject
from pypdf.generic import StreamObject as Stream

from sandbox.extractors.pdf_decoders import refuse_hidden_decoders, resolved

#: The entries of a page its text needs; pypdf has already set the inherited ones on it.
_KEPT = frozenset({"/Type", "/Contents", "/Resources", "/MediaBox", "/CropBox", "/Rotate"})
_SUBTYPE = "/Subtype"
_IMAGE = "/Image"
#: What an image becomes: one grey pixel, unfiltered.
_PLACEHOLDER = {
    "/Type": NameObject("/XObject"),
    _SUBTYPE: NameObject(_IMAGE),
    "/Width": NumberObject(1),
    "/Height": NumberObject(1),
    "/BitsPerComponent": NumberObject(8),
    "/ColorSpace": NameObject("/DeviceGray"),
}


def text_copy(reader: PdfReader) -> bytes:
    """Every page of ``reader`` written again for PDFium's text, checked; a Refusal when a
    stream of it names a codec the sandbox never runs or cannot be decoded to be checked."""
    writer = PdfWriter()
    for page in reader.pages:
        writer.add_page(page, excluded_keys=tuple(key for key in page if key not in _KEPT))
    for item in writer._objects:  # every object the copy holds, each once
        if isinstance(item, Stream) and resolved(item.get(_SUBTYPE)) == NameObject(_IMAGE):
            _blank(item)
    buffer = io.BytesIO()
    writer.write(buffer)
    # Checked as written: writing is the last step that could add an object to the copy.
    refuse_hidden_decoders(writer, one_page=False)
    return buffer.getvalue()


def _blank(image: Stream) -> None:
    """Make ``image`` one unfiltered pixel: its masks, filters and data go with the rest."""
    image.clear()
    image.update({NameObject(key): value for key, value in _PLACEHOLDER.items()})
    image._data = b"\x80"
