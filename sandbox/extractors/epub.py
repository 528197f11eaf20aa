"""EPUB books: each document of the spine, in order, read as a web page.

The container and the package document are parsed under the one XML policy
(sandbox/extractors/package_parts.py); each chapter is read by the HTML reader
(sandbox/extractors/html.py) as XHTML, so the book's hidden text is left out by the same rules
as a web page's, its stylesheets included. The EPUB 3 navigation document is not read when it
is in the spine (its entries repeat the chapters' headings); a spine that lists a document
twice is refused, since it would read the same text again and again. A chapter that cannot be
read, is encrypted, or is missing is said in a notice and the rest of the book is kept. See
docs/sandbox.md, "Parsers".
"""

from __future__ import annotations

import posixpath
import zipfile
from collections import Counter
from dataclasses import dataclass
from urllib.parse import unquote, urldefrag

from lxml import etree

from sandbox import codes
from sandbox.document import Block, Document, Notice
from sandbox.extractors import css, html, package_parts
from sandbox.extractors.registry import Refusal, extractor, report_progress
from sandbox.extractors.text import TextBudget
from sandbox.limits import ParseLimits

_CONTAINER = "META-INF/container.xml"
_ENCRYPTION = "META-INF/encryption.xml"
_PACKAGE_MEDIA_TYPE = "application/oebps-package+xml"
_XHTML = "application/xhtml+xml"
_CHAPTER_MEDIA_TYPES = frozenset({_XHTML, "text/html"})
#: No book has more: a spine of a million entries costs the walk before any text is read.
MAX_SPINE = 10_000
#: Stylesheet text the chapters of one book may link, counted each time a chapter links it
#: (each chapter's rules are matched anew): one 7 MB sheet linked by every chapter of a book
#: cost 19 s of CPU.
MAX_STYLESHEET_CHARS = 32 << 20
#: ``@import`` followed this deep.
_MAX_IMPORT_DEPTH = 4


@dataclass(frozen=True)
class _Item:
    """A manifest entry: its reference, the member it names (None when it points outside the
    package), its media type, and whether it is the navigation document."""

    href: str
    path: str | None
    media_type: str
    navigation: bool


@extractor("epub")
def extract_epub(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    archive = package_parts.opened(payload, "EPUB")
    package_path = _package_path(archive)
    package = _xml(archive, package_path)
    manifest = _manifest(package, posixpath.dirname(package_path))
    spine = _spine(package, manifest)
    encrypted = _encrypted(archive)
    budget = TextBudget(limits)
    sheets = _Stylesheets(archive)
    blocks: list[Block] = []
    hidden: Counter[str] = Counter()
    not_chapters: Counter[str] = Counter()
    for done, item in enumerate(spine, start=1):
        if item.navigation:
            continue
        if item.media_type not in _CHAPTER_MEDIA_TYPES:
            not_chapters[item.media_type] += 1
        elif item.path is None:
            blocks.append(Notice(f"[airlock: {item.href!r} points outside the book; left out]"))
        elif item.path in encrypted:
            blocks.append(Notice(f"[airlock: {item.path!r} is encrypted; left out]"))
        else:
            xhtml = item.media_type == _XHTML
            blocks += _chapter(
                archive, item.path, xhtml=xhtml, budget=budget, hidden=hidden, sheets=sheets
            )
        report_progress(done, len(spine))
    if not_chapters:
        kinds = ", ".join(map(repr, sorted(not_chapters)))
        count = sum(not_chapters.values())
        blocks.append(Notice(f"[airlock: {count} spine documents that are not XHTML ({kinds})]"))
    return Document(blocks + html.hidden_notice(hidden))


def _chapter(
    archive: zipfile.ZipFile,
    path: str,
    *,
    xhtml: bool,
    budget: TextBudget,
    hidden: Counter[str],
    sheets: _Stylesheets,
) -> list[Block]:
    """One spine document's blocks; a document that cannot be read is a notice saying why,
    but a ceiling refuses the book (its budget is the book's)."""
    try:
        markup = html.decoded(package_parts.member(archive, path))
        page = html.read_page(
            markup,
            budget,
            xhtml=xhtml,
            stylesheets=lambda href: sheets.linked(path, href),
        )
    except Refusal as refusal:
        if refusal.code == codes.CEILING:
            raise
        return [Notice(f"[airlock: {path!r} left out: {refusal.reason}]")]
    hidden.update(page.hidden)
    return page.blocks


class _Stylesheets:
    """The book's stylesheets, each read and decoded once, with what it imports, and the
    characters the chapters link counted against :data:`MAX_STYLESHEET_CHARS`."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self._archive = archive
        self._texts: dict[str, str] = {}
        self._linked = 0

    def linked(self, chapter: str, href: str) -> str:
        """The text of the stylesheet ``chapter`` links as ``href``, its imports first; ""
        when the book has none by that name."""
        path = _resolved(posixpath.dirname(chapter), href)
        text = "" if path is None else "\n".join(self._with_imports(path, 0, set()))
        self._linked += len(text)
        if self._linked > MAX_STYLESHEET_CHARS:
            raise Refusal(
                codes.CEILING,
                f"the chapters link more than {MAX_STYLESHEET_CHARS >> 20} Mi characters of "
                "stylesheets",
            )
        return text

    def _with_imports(self, path: str, depth: int, included: set[str]) -> list[str]:
        """The stylesheet at ``path`` after what it imports, each stylesheet once: expanded
        anew wherever it was imported, 40 imports of one another grew a 1 KB book past 1 GiB
        of memory before the ceiling was looked at."""
        included.add(path)
        own = self._text(path)
        texts = []
        if depth < _MAX_IMPORT_DEPTH:
            for url in css.imports(own):
                target = _resolved(posixpath.dirname(path), url)
                if target is not None and target not in included:
                    texts += self._with_imports(target, depth + 1, included)
        return [*texts, own]

    def _text(self, path: str) -> str:
        if path not in self._texts:
            try:
                self._texts[path] = html.decoded(package_parts.member(self._archive, path))
            except Refusal as refusal:
                if refusal.code == codes.CEILING:
                    raise
                self._texts[path] = ""
        return self._texts[path]


def _package_path(archive: zipfile.ZipFile) -> str:
    container = _xml(archive, _CONTAINER)
    for rootfile in container.iter("{*}rootfile"):
        path = str(rootfile.get("full-path") or "")
        if path and rootfile.get("media-type", _PACKAGE_MEDIA_TYPE) == _PACKAGE_MEDIA_TYPE:
            return path
    raise Refusal(codes.UNREADABLE, f"the EPUB's {_CONTAINER} names no package document")


def _manifest(package: etree._Element, base: str) -> dict[str, _Item]:
    items: dict[str, _Item] = {}
    for entry in package.iterfind("{*}manifest/{*}item"):
        identifier, href = entry.get("id"), entry.get("href") or ""
        if identifier:
            navigation = "nav" in (entry.get("properties") or "").split()
            media_type = entry.get("media-type", "")
            items[identifier] = _Item(href, _resolved(base, href), media_type, navigation)
    return items


def _spine(package: etree._Element, manifest: dict[str, _Item]) -> list[_Item]:
    references = package.findall("{*}spine/{*}itemref")
    if len(references) > MAX_SPINE:
        raise Refusal(codes.CEILING, f"a spine of {len(references)} documents exceeds {MAX_SPINE}")
    seen: set[str] = set()
    spine: list[_Item] = []
    for reference in references:
        identifier = reference.get("idref", "")
        if identifier not in manifest:
            raise Refusal(
                codes.UNREADABLE, f"the spine names {identifier!r}, which the manifest lacks"
            )
        item = manifest[identifier]
        # By the document, not the entry: one chapter under 300 manifest ids was read 300
        # times (a spine that loops, as surely as one that repeats an id).
        document = item.path or item.href
        if document in seen:
            raise Refusal(
                codes.UNREADABLE,
                f"the spine lists {document!r} more than once (a spine that loops)",
            )
        seen.add(document)
        spine.append(item)
    if not spine:
        raise Refusal(codes.UNREADABLE, "the EPUB's spine lists no document")
    return spine


def _encrypted(archive: zipfile.ZipFile) -> frozenset[str]:
    """The members META-INF/encryption.xml says are encrypted (DRM, or obfuscated fonts)."""
    try:
        encryption = _xml(archive, _ENCRYPTION)
    except package_parts.MissingPart:
        return frozenset()
    return frozenset(
        unquote(reference.get("URI", "")) for reference in encryption.iter("{*}CipherReference")
    )


def _resolved(base: str, href: str) -> str | None:
    """The member a relative reference names, None when it leaves the package or is absolute
    (a URL, a path from the root)."""
    target = unquote(urldefrag(href).url)
    if not target or target.startswith("/") or ":" in target.split("/", 1)[0]:
        return None
    path = posixpath.normpath(posixpath.join(base, target))
    return None if path.startswith("../") or path == ".." else path


def _xml(archive: zipfile.ZipFile, name: str) -> etree._Element:
    return package_parts.xml_part(package_parts.member(archive, name), name)
