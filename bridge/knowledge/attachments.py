"""The attachment bridge: untrusted uploads in, bounded and labelled text blocks out.

``extract_attachment`` runs the cheap guards first (AS-ING-6), types whatever the parser does
(AS-ING-5) and drops text over its ceiling whole; ``AttachmentSource`` turns attachments into
one ``IngestSelection`` with a reason for each one left out (docs/spec-decisions.md).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, Protocol

from bridge.knowledge import sections
from bridge.knowledge.archive import ArchiveLimitExceeded, inspect_zip_limits, is_zip_container
from bridge.knowledge.ceilings import EXTRACTION_SETTINGS, explain_failure
from bridge.knowledge.contracts import (
    BLOCK_SEPARATOR,
    ContextContribution,
    ContextLayer,
    ContextRead,
    ContextRequest,
    IngestSelection,
    session_contribution,
)
from bridge.knowledge.errors import BridgeContractError, ExtractionFailed, IngestionRejected
from bridge.knowledge.failures import Failure
from bridge.knowledge.labels import safe_label, strip_invisible
from bridge.knowledge.markers import escape_markers
from bridge.knowledge.pages import PageSpan, page_map

#: The kinds a parser exists for. Anything else is refused before dispatch: an unknown
#: container is not handed to a parser "to find out what it is".
EXTRACTABLE_KINDS = frozenset(
    {
        "pdf",
        "docx",
        "odt",
        "rtf",
        "epub",
        "html",
        "email",
        "archive",
        "spreadsheet",
        "presentation",
        "image",
        "text",
    }
)

#: The kinds whose files are read apart, each as an attachment of its own
#: (bridge/knowledge/enclosures.py): an e-mail, whose own text is its headers and body, and a
#: ZIP archive, which has none.
CONTAINER_KINDS = frozenset({"email", "archive"})

# Kinds whose parser opens the payload as a ZIP package (a spreadsheet unless it is an XLS,
# an OLE2 compound file).
_ZIP_PARSED_KINDS = frozenset({"docx", "odt", "epub", "spreadsheet", "presentation", "archive"})
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

# C0 and C1 controls other than tab and newline: terminal escapes, NULs and form feeds in
# extracted text reach a model (and an operator's terminal) as instructions, not as content.
# Also the bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which make
# text display in another order than it is read (U+202E shows "txt.exe" as "exe.txt"), and
# U+FEFF, a byte-order mark that is invisible inside text and splits a word for a matcher.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufeff]")
# Characters that carry text no reader sees. Tag characters (U+E0000-U+E007F, with the rest of
# that plane's reserved default-ignorables) spell ASCII that tokenizers pass to a model while
# screens show nothing: 78 of them carried an invisible "SYSTEM: ignore previous instructions".
# Variation selectors (U+FE00-U+FE0F, U+E0100-U+E01EF, Mongolian U+180B-U+180D, U+180F) can
# encode a byte each after any character. The Hangul fillers stand in for a space or hide
# inside a word. What is lost: emoji presentation (U+FE0F), ideographic variants and the
# subdivision flags' tag sequences, which no extracted fact depends on.
_HIDDEN_CARRIERS = re.compile(
    "[\U000e0000-\U000e0fff\ufe00-\ufe0f\u180b-\u180d\u180f\u115f\u1160\u3164\uffa0]"
)
# The braille blank renders as a space and is one in braille text: kept readable, as a space.
_BRAILLE_BLANK = "\u2800"
# The Unicode line and paragraph separators break a line for a reader and for str.splitlines();
# left in, a body line could begin with a block heading that no "\n"-based check sees.
_LINE_SEPARATORS = re.compile("[\u2028\u2029]")

# How much of an untrusted string (a kind, a media type, a parser's message) a reason quotes:
# enough to recognise it, too little to carry a payload of its own into a log or a prompt.
_QUOTED_NAME_CHARS = 80
_QUOTED_MESSAGE_CHARS = 400


@dataclass(frozen=True)
class AttachmentRef:
    """One attachment as it arrived: an untrusted name, declared kind and type, and bytes."""

    label: str
    kind: str
    media_type: str
    payload: bytes = field(repr=False)

    def __post_init__(self) -> None:
        for name in ("label", "kind", "media_type"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"AttachmentRef.{name} must be a str")
        if isinstance(self.payload, bytearray | memoryview):
            object.__setattr__(self, "payload", bytes(self.payload))
        if not isinstance(self.payload, bytes):
            raise TypeError("AttachmentRef.payload must be bytes")


@dataclass(frozen=True)
class ExtractedAttachment:
    """One attachment after extraction: a safe label, normalised text, the raw size."""

    label: str
    kind: str
    media_type: str
    text: str
    byte_size: int

    @property
    def pages(self) -> tuple[PageSpan, ...]:
        """Where each page of :attr:`text` lies (none for a document without pages)."""
        return page_map(self.text)


@dataclass(frozen=True)
class ExtractionLimits:
    """The ceilings applied around one parser call and around the assembled set."""

    max_bytes: int = 8 * 1024 * 1024
    max_uncompressed_bytes: int = 8 * 1024 * 1024
    max_expansion_ratio: float = 100.0
    max_members: int = 1024
    max_nesting_depth: int = 1
    max_pages: int = 20
    max_text_chars: int = 50_000
    max_total_chars: int = 120_000

    def __post_init__(self) -> None:
        # A zero or negative ceiling silently refuses everything (or, compared the other way,
        # nothing); either is a misconfiguration to report at construction.
        for name in (member.name for member in fields(self) if member.type == "int"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BridgeContractError(f"ExtractionLimits.{name} must be a positive integer")
        if not self.max_expansion_ratio > 0:
            raise BridgeContractError("ExtractionLimits.max_expansion_ratio must be positive")


DEFAULT_LIMITS = ExtractionLimits()


class TextExtractor(Protocol):
    """The port a format extractor satisfies.

    It receives bytes, never a path: a path would make the framework write untrusted bytes
    under a name derived from an untrusted label (the AS-ING-2 failure, with extra steps).
    What it raises becomes the attachment's :class:`Failure` (``Failure.of``).
    """

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str: ...


def remove_hidden_text(text: str) -> str:
    """``text`` without the characters that carry text no reader sees (tag characters,
    variation selectors, Hangul fillers), and the braille blank as the space it shows."""
    return _HIDDEN_CARRIERS.sub("", text).replace(_BRAILLE_BLANK, " ")


def normalise_extracted(text: str) -> str:
    """Unix line endings (U+2028 and U+2029 included), no control characters but tab and
    newline, no bidi controls, byte-order marks or hidden text, no trailing spaces."""
    unified = _LINE_SEPARATORS.sub("\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    stripped = remove_hidden_text(_CONTROL.sub("", unified))
    return "\n".join(line.rstrip() for line in stripped.split("\n"))


def quoted(untrusted: str, limit: int = _QUOTED_NAME_CHARS, *, keep_runs: bool = False) -> str:
    """An untrusted string as a reason may show it: one line, invisible characters gone, short.

    Runs of whitespace shrink to one space, unless ``keep_runs``: a worker's refusal names the
    label as ``safe_label`` keeps it, runs and all, and must read as the local path's does.
    """
    visible = strip_invisible(untrusted.replace("\n", " "))
    if keep_runs:
        visible = "".join(" " if char.isspace() else char for char in visible).strip()
    else:
        visible = " ".join(visible.split())
    if len(visible) > limit:
        return visible[: limit - 1] + "…"
    return visible


def over_byte_ceiling(
    label: str, size: int, limits: ExtractionLimits, *, at_least: bool = False
) -> IngestionRejected:
    """The refusal of a file of ``size`` bytes (``at_least``: or more) over ``max_bytes``.

    Also given by a caller that stops reading a file at the ceiling (the CLI), so a 600 MB
    upload or ``/dev/zero`` is refused without being held in memory first.
    """
    more = " or more" if at_least else ""
    return IngestionRejected(
        f"attachment {safe_label(label)!r} is {size} bytes{more}, which exceeds the "
        f"{limits.max_bytes}-byte raw-input ceiling checked before dispatch (AS-ING-6); "
        "archive expansion is bounded separately. To admit it, "
        f"{EXTRACTION_SETTINGS['max_bytes'].to_admit(size, at_least=at_least)}."
    )


def dropped_entry(label: str, refusal: IngestionRejected | ExtractionFailed) -> tuple[str, str]:
    """How a refused file is listed in ``IngestSelection.dropped``: its label, and the
    error's name with its message."""
    return safe_label(label), _reason(refusal)


def _reason(refusal: IngestionRejected | ExtractionFailed) -> str:
    return f"{type(refusal).__name__}: {refusal}"


def check_before_dispatch(ref: AttachmentRef, limits: ExtractionLimits = DEFAULT_LIMITS) -> None:
    """The cheap guards that run before any parser sees the bytes (AS-ING-6).

    The bridge runs them before enqueuing and the worker runs them again on what it dequeued,
    because anyone who can write to the queue can skip the first run.
    """
    if ref.kind not in EXTRACTABLE_KINDS:
        raise IngestionRejected(
            f"attachment kind {quoted(repr(ref.kind))} is not extractable; permitted kinds are "
            f"{sorted(EXTRACTABLE_KINDS)}. An unrecognised container is refused before "
            "dispatch, not handed to a parser to find out."
        )
    label = safe_label(ref.label)
    if not ref.payload:
        raise IngestionRejected(
            f"attachment {label!r} carries an empty payload; there is nothing to extract and "
            "an empty block would render a heading over nothing."
        )
    if len(ref.payload) > limits.max_bytes:
        raise over_byte_ceiling(label, len(ref.payload), limits)
    # A docx or an XLSX is opened as a ZIP whatever its declared media type says, so it is
    # inspected even when the type and the leading bytes hide that it is an archive.
    zip_parsed = ref.kind in _ZIP_PARSED_KINDS and not ref.payload.startswith(_OLE2)
    if zip_parsed or is_zip_container(ref.media_type, ref.payload):
        try:
            inspect_zip_limits(
                ref.payload,
                max_uncompressed_bytes=limits.max_uncompressed_bytes,
                max_expansion_ratio=limits.max_expansion_ratio,
                max_members=limits.max_members,
                max_nesting_depth=limits.max_nesting_depth,
                # An archive's files are unpacked and each guarded as an upload before it is
                # read; an archive among them costs a nesting level then (enclosures.py).
                follow_nested=ref.kind != "archive",
            )
        except ArchiveLimitExceeded as exc:
            hint = (
                "; " + EXTRACTION_SETTINGS[exc.ceiling].to_admit(exc.needed, at_least=True)
                if exc.ceiling is not None
                else ""
            )
            raise IngestionRejected(
                f"attachment {label!r} was rejected before dispatch: {exc}{hint}"
            ) from exc


def admit_text(
    ref: AttachmentRef, untrusted_text: object, limits: ExtractionLimits = DEFAULT_LIMITS
) -> ExtractedAttachment:
    """Normalise what a parser produced and hold it to the per-attachment ceiling.

    The same function checks text from an in-process extractor, a sandbox child and a queue
    envelope, so all three paths admit byte-identical text or refuse with the same reason.
    Text over the ceiling is dropped, never truncated: a cut fact reads as a complete one.
    """
    label = safe_label(ref.label)
    if not isinstance(untrusted_text, str):
        raise ExtractionFailed(
            f"extraction of attachment {label!r} returned {type(untrusted_text).__name__}, "
            "not text."
        )
    text = normalise_extracted(untrusted_text)
    # A container's files are held to the ceiling one by one where the text is split; its own
    # text is held here.
    own = _sections(label, text).own if ref.kind in CONTAINER_KINDS else text
    over_text_ceiling(label, own, limits)
    return ExtractedAttachment(
        label=label,
        kind=ref.kind,
        media_type=ref.media_type,
        text=text,
        byte_size=len(ref.payload),
    )


def over_text_ceiling(label: str, text: str, limits: ExtractionLimits) -> None:
    """Refuse ``text`` over ``max_text_chars``: dropped, never truncated."""
    if len(text) > limits.max_text_chars:
        raise IngestionRejected(
            f"attachment {label!r} extracted to {len(text)} characters, which exceeds the "
            f"{limits.max_text_chars}-character ceiling; extracted text is dropped, never "
            "truncated — a cut fact reads as a complete one. To admit it, "
            f"{EXTRACTION_SETTINGS['max_text_chars'].to_admit(len(text))}."
        )


def enclosed_outcomes(
    extracted: ExtractedAttachment, limits: ExtractionLimits
) -> Iterator[tuple[str, Outcome]]:
    """An attachment's outcome as the selection lists it: a container's own text (when it
    has any) and each of its files under a label of its own, each file held to
    ``max_text_chars`` as an upload is, and each left out with its reason."""
    if extracted.kind not in CONTAINER_KINDS:
        yield extracted.label, extracted
        return
    try:
        read = _sections(extracted.label, extracted.text)
    except ExtractionFailed as exc:
        yield extracted.label, exc
        return
    files = read.files
    if extracted.kind == "archive" and not files:
        yield extracted.label, IngestionRejected(_EMPTY_ARCHIVE)
    elif read.own.strip() or not files:
        yield extracted.label, dataclasses.replace(extracted, text=read.own)
    labels = _UniqueLabels(extracted.label)
    for index, file in enumerate(files):
        label = sections.member_label(extracted.label, file.path)
        if file.error:
            error = ExtractionFailed if file.error == "ExtractionFailed" else IngestionRejected
            yield label, error(file.reason)
            continue
        if not file.text.strip() and file.kind in CONTAINER_KINDS:
            if _speaks_for(file.path, files[index + 1 :]):
                continue  # a container without text of its own: what follows speaks for it
            if file.kind == "archive":
                yield labels.unique(label), IngestionRejected(_EMPTY_ARCHIVE)
                continue
        label = labels.unique(label)
        try:
            over_text_ceiling(label, file.text, limits)
        except IngestionRejected as exc:
            yield label, exc
            continue
        yield (
            label,
            ExtractedAttachment(label, file.kind, file.media_type, file.text, file.byte_size or 0),
        )


_EMPTY_ARCHIVE = "the archive holds no file to read"


def _sections(label: str, text: str) -> sections.Sections:
    """A container's text split into its own and its files', or the attachment's failure:
    a stored answer can hold markers nobody on the trusted side wrote."""
    try:
        return sections.read(text)
    except sections.MalformedSections as exc:
        raise ExtractionFailed(f"the text of attachment {label!r} is malformed: {exc}") from exc


def _speaks_for(path: tuple[str, ...], following: Sequence[sections.Section]) -> bool:
    """Whether the section after a container's own one belongs to it (its first file, or the
    refusal of its own text): a container's sections are written right after it."""
    return bool(following) and following[0].path[: len(path)] == path


class _UniqueLabels:
    """Labels a selection can cite by: a second file of the same label (``a.txt`` and
    ``./a.txt``, two unnamed parts, a name cut at 128 characters) is told apart by a number
    in brackets, which no sanitised name holds."""

    def __init__(self, container: str) -> None:
        self._taken = {container}

    def unique(self, label: str) -> str:
        candidate, number = label, 1
        while candidate in self._taken:
            number += 1
            candidate = f"{label} ({number})"
        self._taken.add(candidate)
        return candidate


def extraction_failure(ref: AttachmentRef, failure: Failure) -> ExtractionFailed:
    """The one wording of "the parser lost on this attachment", whichever path saw it lose.

    A sandbox ceiling's or limit's reason ends with the setting that raises it, after the
    quoted message so a long message cannot cut it off.
    """
    hint = explain_failure(failure.code, failure.reason)
    return ExtractionFailed(
        f"extraction of attachment {safe_label(ref.label)!r} "
        f"({quoted(ref.kind)}/{quoted(ref.media_type)}) failed: "
        f"{quoted(failure.code)}: {quoted(failure.reason, _QUOTED_MESSAGE_CHARS)}{hint}",
        failure,
    )


def extract_attachment(
    ref: AttachmentRef,
    extractor: TextExtractor,
    limits: ExtractionLimits = DEFAULT_LIMITS,
) -> ExtractedAttachment:
    """Extract one attachment's text under the ingestion ceilings.

    Raises :class:`IngestionRejected` when a guard fires and :class:`ExtractionFailed` when
    the parser loses; nothing a parser raises escapes untyped.
    """
    check_before_dispatch(ref, limits)
    try:
        raw = extractor.extract(ref.kind, ref.media_type, ref.payload, max_pages=limits.max_pages)
    except Exception as exc:  # a parser is a hostile black box: anything it raises is typed
        raise extraction_failure(ref, Failure.of(exc)) from exc
    return admit_text(ref, raw, limits)


Outcome = ExtractedAttachment | IngestionRejected | ExtractionFailed


def check_on_rejection(on_rejection: str) -> None:
    """Refuse an ``on_rejection`` other than ``'omit'`` or ``'raise'`` while the caller wires."""
    if on_rejection not in ("omit", "raise"):
        raise BridgeContractError(f"on_rejection must be 'omit' or 'raise', not {on_rejection!r}")


def assemble_selection(
    outcomes: Iterable[tuple[AttachmentRef, Outcome]],
    limits: ExtractionLimits = DEFAULT_LIMITS,
    on_rejection: Literal["omit", "raise"] = "omit",
) -> IngestSelection:
    """Fold per-attachment outcomes, in input order, into one selection.

    The local and the queued path both end here, so their selections cannot differ in
    ordering, ceilings or reason wording. ``outcomes`` may be lazy: with ``'raise'`` nothing
    after the first refusal is consumed.
    """
    blocks: list[str] = []
    labels: list[str] = []
    dropped: list[tuple[str, str]] = []
    used = 0
    for label, outcome in _listed(outcomes, limits):
        if isinstance(outcome, IngestionRejected | ExtractionFailed):
            if on_rejection == "raise":
                raise outcome
            dropped.append((label, _reason(outcome)))
            continue
        if not outcome.text.strip():
            dropped.append((outcome.label, "the extractor returned nothing but whitespace"))
            continue
        # The body is escaped here, where both the local and the queued path end, so no
        # attachment can render a line that reads as another block's heading or a role.
        block = f"ATTACHMENT [{outcome.label}]\n{escape_markers(outcome.text)}"
        cost = len(block) + (len(BLOCK_SEPARATOR) if blocks else 0)
        if used + cost > limits.max_total_chars:
            admit = EXTRACTION_SETTINGS["max_total_chars"].to_admit(used + cost)
            if on_rejection == "raise":
                raise IngestionRejected(
                    f"attachment {outcome.label!r} would take the assembled block past the "
                    f"{limits.max_total_chars}-character ceiling; the per-attachment cap "
                    f"bounds one file, this one bounds the set. To admit it, {admit}."
                )
            dropped.append(
                (
                    outcome.label,
                    "would take the assembled block past the "
                    f"{limits.max_total_chars}-character ceiling; {admit}",
                )
            )
            continue
        blocks.append(block)
        labels.append(f"{outcome.label}:{outcome.byte_size}")
        used += cost
    return IngestSelection(
        text=BLOCK_SEPARATOR.join(blocks), revision="|".join(labels), dropped=tuple(dropped)
    )


def _listed(
    outcomes: Iterable[tuple[AttachmentRef, Outcome]], limits: ExtractionLimits
) -> Iterator[tuple[str, Outcome]]:
    """Each outcome under the label the selection lists it by; a container's files each
    under their own (:func:`enclosed_outcomes`)."""
    for ref, outcome in outcomes:
        if isinstance(outcome, ExtractedAttachment):
            yield from enclosed_outcomes(outcome, limits)
        else:
            yield safe_label(ref.label), outcome


def extraction_outcome(
    ref: AttachmentRef, extractor: TextExtractor, limits: ExtractionLimits = DEFAULT_LIMITS
) -> Outcome:
    """:func:`extract_attachment`, with a refusal returned as the outcome instead of raised.

    The shape :func:`assemble_selection` folds; every path that extracts (the source, the CLI,
    the worker) gets its outcomes here.
    """
    try:
        return extract_attachment(ref, extractor, limits)
    except (IngestionRejected, ExtractionFailed) as exc:
        return exc


@dataclass(frozen=True)
class AttachmentSource:
    """A context source over a fixed set of attachments."""

    refs: Sequence[AttachmentRef]
    extractor: TextExtractor
    limits: ExtractionLimits = DEFAULT_LIMITS
    on_rejection: Literal["omit", "raise"] = "omit"
    scope_aware: bool = False
    offline_safe: bool = True

    def __post_init__(self) -> None:
        check_on_rejection(self.on_rejection)

    def select(self, request: ContextRequest) -> IngestSelection:
        """Extract every attachment and say why each omitted one was omitted.

        ``'raise'`` ends the read at the first refusal; ``'omit'`` (the default, right when
        four of five files should still reach the model) carries each omission and its
        reason on the selection, so an operator can be told "report.pdf: parser failed"
        instead of guessing why a file is absent.
        """
        outcomes = (
            (ref, extraction_outcome(ref, self.extractor, self.limits)) for ref in self.refs
        )
        return assemble_selection(outcomes, self.limits, self.on_rejection)

    def read(self, request: ContextRequest) -> ContextRead:
        return self.select(request).as_read()


def attachment_contribution(
    contribution_id: str,
    source: AttachmentSource,
    *,
    order: int = 0,
    scope: str | None = None,
) -> ContextContribution:
    """Declare this turn's attachments as per-turn (L2), session-tier context."""
    return session_contribution(contribution_id, source, ContextLayer.L2, order=order, scope=scope)
