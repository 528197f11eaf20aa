"""An e-mail's attachments and an archive's files, each read as an attachment of its own.

A file inside a container is an upload someone else chose: it meets the same guards
(:func:`check_before_dispatch`), ceilings and sandbox as one, in a child of its own, and is
cited by its own label (``message.eml/report.pdf``). The reader of a container (the sandbox)
answers its files as bytes; :class:`Unpacking` reads each and writes the container's text as
its own text followed by one section per file, each opened by a marker line only this module
writes. Every path that stores or carries text (the result cache, the queue) carries that one
string unchanged, and the selection's assembly splits it (bridge/knowledge/sections.py), so
a file left out is listed in ``dropped`` with its reason on every path alike. See
docs/spec-decisions.md, "Attachments inside attachments".
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from bridge.knowledge import sections
from bridge.knowledge.attachments import (
    CONTAINER_KINDS,
    AttachmentRef,
    ExtractedAttachment,
    ExtractionLimits,
    TextExtractor,
    extraction_outcome,
    normalise_extracted,
    quoted,
)
from bridge.knowledge.ceilings import EXTRACTION_SETTINGS, explain_failure
from bridge.knowledge.errors import ExtractionFailed, IngestionRejected
from bridge.knowledge.failures import Failure
from bridge.knowledge.kinds import guess_kind
from bridge.knowledge.sections import Section

_NOUNS = {"email": "an e-mail message", "archive": "a ZIP archive"}
# The notices with which a message's text names what it carries (sandbox/extractors/
# messages.py, whose module this package may not import, writes them; the renderer quotes any
# other line that opens so). A message's text without one carries nothing to unpack. A child
# that left them out could as well answer its unpacking empty: nothing is trusted that was not.
_FILE_NOTICES = re.compile(r"^\[airlock: (?:attached file |\d+ more attached files\])", re.M)
# How much of a reason a section carries: what a dropped entry shows of a parser's message.
_REASON_CHARS = 400
_NAME_CHARS = 255


class UnpackedFile(Protocol):
    """One file as a container's reader hands it back: decoded ``data``, or None and the
    ``reason`` it was left out, with the ``ExtractionLimits`` field that would admit it."""

    @property
    def name(self) -> str: ...

    @property
    def media_type(self) -> str: ...

    @property
    def data(self) -> bytes | None: ...

    @property
    def reason(self) -> str: ...

    @property
    def ceiling(self) -> str | None: ...


class UnpackedFiles(Protocol):
    """A container's files in its order, and how many more it held past ``max_members``."""

    @property
    def files(self) -> Sequence[UnpackedFile]: ...

    @property
    def unlisted(self) -> int: ...


class ContainerReader(TextExtractor, Protocol):
    """An extractor that also unpacks a container (``sandbox.extractor.SandboxExtractor``):
    decoding the files is parsing the container, so it happens where parsing does."""

    def unpack(
        self, kind: str, media_type: str, payload: bytes, *, max_pages: int
    ) -> UnpackedFiles: ...


@dataclass(frozen=True)
class Unpacking:
    """A :class:`TextExtractor` that reads an e-mail's or archive's files apart.

    ``limits`` are the call's: each file is held to them as an upload is, and a container
    inside a container costs a level of ``max_nesting_depth``. One upload lists at most
    ``max_members`` files (read or left out) and reads ``max_total_chars`` of text across all
    its levels, so nesting cannot multiply the children it costs. A file whose failure code
    is in ``hand_on`` (the queue's light stage: a scan needs the OCR stage), or whose failure
    is the host's (``transient``), ends the container's read with that failure: the container
    is retried or handed on whole, and no such outcome is kept in its text (or its cache
    entry).
    """

    reader: ContainerReader
    limits: ExtractionLimits
    hand_on: frozenset[str] = frozenset()

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        tree = _Tree(self.limits.max_members, self.limits.max_total_chars)
        level = _Level(self, tree, self.limits.max_nesting_depth)
        return level.extract(kind, media_type, payload, max_pages=max_pages)


@dataclass
class _Tree:
    """What one upload may still list and read, across all its levels: files (a child each
    when read, a marker each when left out) and characters of text."""

    files: int
    chars: int


@dataclass(frozen=True)
class _Level:
    """:class:`Unpacking` at one level of an upload's containers, ``depth`` levels allowed."""

    unpacking: Unpacking
    tree: _Tree
    depth: int

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        reader, limits = self.unpacking.reader, self.unpacking.limits
        if kind not in CONTAINER_KINDS:
            return reader.extract(kind, media_type, payload, max_pages=max_pages)
        own, files = "", list[Section]()
        if kind == "email":
            own, own_refusal = self._own_text(media_type, payload, max_pages)
            files += [] if own_refusal is None else [own_refusal]
        if kind == "email" and not files and not _FILE_NOTICES.search(own):
            return own  # nothing attached: one child for the message, not two
        try:
            unpacked = reader.unpack(kind, media_type, payload, max_pages=max_pages)
        except Exception as exc:  # the container's verdict when there is nothing else to give
            if kind != "email" or files:
                raise
            return sections.write(own, [self._own_refusal("its attached files", exc)])
        self.tree.chars -= len(own)
        unlisted = unpacked.unlisted
        for file in unpacked.files:
            name = _one_spelling(file.name)[:_NAME_CHARS]
            if self.tree.files <= 0:
                unlisted += 1  # the upload has listed all the files it may, at every level
                continue
            self.tree.files -= 1
            if file.data is None:
                reason = file.reason + _to_admit(file.ceiling)
                files.append(_refused(name, None, IngestionRejected(reason)))
            elif self.tree.chars <= 0:
                refusal = IngestionRejected(
                    f"the text read before it fills the {limits.max_total_chars}-character "
                    "ceiling of the selection, so it was not read" + _to_admit("max_total_chars")
                )
                files.append(_refused(name, len(file.data), refusal))
            else:
                read = list(self._read(name, file.media_type, file.data, max_pages))
                if read[0].kind not in CONTAINER_KINDS:
                    # A container inside charged the shared budget with its texts itself.
                    self.tree.chars -= len(read[0].text)
                files += read
        if unlisted:
            refusal = IngestionRejected(
                f"{unlisted:,} more files were not read: one upload lists at most "
                f"{limits.max_members:,}, at all its levels" + _to_admit("max_members")
            )
            files.append(_refused(None, None, refusal))
        return sections.write(own, files)

    def _own_text(
        self, media_type: str, payload: bytes, max_pages: int
    ) -> tuple[str, Section | None]:
        """A message's own text, or its refusal: a message whose own text cannot be read or
        admitted (junk in its body, a body over the text ceiling) still hands on its files."""
        limits = self.unpacking.limits
        try:
            untrusted = self.unpacking.reader.extract(
                "email", media_type, payload, max_pages=max_pages
            )
        except Exception as exc:  # noqa: BLE001 - a reader's verdict, typed as on every path
            return "", self._own_refusal("its own text", exc)
        own = sections.quote_markers(normalise_extracted(untrusted))
        if len(own) <= limits.max_text_chars:
            return own, None
        refusal = IngestionRejected(
            f"its own text is {len(own)} characters, over the {limits.max_text_chars}-character "
            "ceiling; extracted text is dropped, never truncated"
            + _to_admit("max_text_chars", len(own))
        )
        return "", _refused(None, None, refusal)

    def _own_refusal(self, what: str, exc: Exception) -> Section:
        """The container's own part left out, unless the failure is the host's or one to
        hand on (then the container's read ends with it)."""
        failure = Failure.of(exc)
        if failure.transient or failure.code in self.unpacking.hand_on:
            raise exc
        hint = explain_failure(failure.code, failure.reason)
        refusal = ExtractionFailed(
            f"{what} could not be read: {quoted(failure.code)}: "
            f"{quoted(failure.reason, _REASON_CHARS)}{hint}"
        )
        return _refused(None, None, refusal)

    def _read(self, name: str, media_type: str, data: bytes, max_pages: int) -> Iterator[Section]:
        """One file's section, or its refusal; a container's own section, then its files',
        their paths continued from its name."""
        kind, declared_type = guess_kind(name, data, media_type)
        specific = media_type not in ("", "application/octet-stream")
        ref = AttachmentRef(name, kind, media_type if specific else declared_type, data)
        extractor: TextExtractor = self.unpacking.reader
        if kind in CONTAINER_KINDS:
            if self.depth <= 1:
                refusal = IngestionRejected(
                    f"it is {_NOUNS[kind]} inside a container; nesting depth "
                    f"{self.unpacking.limits.max_nesting_depth - self.depth + 2} exceeds the "
                    f"limit of {self.unpacking.limits.max_nesting_depth}"
                    + _to_admit(
                        "max_nesting_depth",
                        self.unpacking.limits.max_nesting_depth - self.depth + 2,
                    )
                )
                yield _refused(name, len(data), refusal)
                return
            extractor = dataclasses.replace(self, depth=self.depth - 1)
        outcome = extraction_outcome(ref, extractor, self.unpacking.limits)
        if isinstance(outcome, ExtractedAttachment):
            # Only a container's text, written here, has sections; any other file's lines that
            # open as one are its own words (an extractor plugged in that does not quote them).
            text = outcome.text if kind in CONTAINER_KINDS else sections.quote_markers(outcome.text)
            read = sections.read(text)
            yield Section((name,), outcome.byte_size, kind, ref.media_type, read.own)
            for file in read.files:
                yield dataclasses.replace(file, path=(name, *file.path))
            return
        if isinstance(outcome, ExtractionFailed) and outcome.__cause__ is not None:
            failure = outcome.failure
            if failure.transient or failure.code in self.unpacking.hand_on:
                raise outcome.__cause__
        yield _refused(name, len(data), outcome)


def _one_spelling(untrusted_name: str) -> str:
    """A file's name in its composed (NFC) spelling: ``café.txt`` precomposed and decomposed
    are two members to a container but one text on screen, and would be two blocks a model
    cannot tell apart; spelt alike, the second is numbered as any other repeated label is."""
    return unicodedata.normalize("NFC", untrusted_name)


def _refused(
    name: str | None, size: int | None, refusal: IngestionRejected | ExtractionFailed
) -> Section:
    return Section(
        () if name is None else (name,),
        size,
        error=type(refusal).__name__,
        reason=quoted(str(refusal), _REASON_CHARS),
    )


def _to_admit(ceiling: str | None, needed: int | None = None) -> str:
    setting = EXTRACTION_SETTINGS.get(ceiling or "")
    if setting is None:
        return ""
    return "; " + setting.to_admit(needed, at_least=needed is not None)
