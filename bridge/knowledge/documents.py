"""The document bridge: documents pinned into a conversation, read from a store by id.

An id is an opaque key from a fixed charset, never a path (AS-ING-2); a title passes through
``safe_source`` so it cannot close its heading or claim another id. Rendering and omission
order: docs/spec-decisions.md (Retrieval, documents, citations, factory).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bridge.knowledge.attachments import quoted, remove_hidden_text
from bridge.knowledge.contracts import (
    BLOCK_SEPARATOR,
    ContextContribution,
    ContextLayer,
    ContextRead,
    ContextRequest,
    IngestSelection,
    session_contribution,
)
from bridge.knowledge.errors import BridgeContractError, IngestionRejected
from bridge.knowledge.labels import safe_source
from bridge.knowledge.markers import escape_markers
from bridge.knowledge.retrieval import check_positive_ints

#: What a document id may look like. ASCII only (``[0-9]`` is not ``\d``, which would admit
#: every script's digits) and anchored at the true end, so a trailing newline is refused too.
DOCUMENT_ID_CHARSET = re.compile(r"[A-Za-z0-9_.:-]{1,128}\Z")


def validate_document_id(document_id: str) -> str:
    """Return ``document_id`` if it is an opaque key, else raise :class:`IngestionRejected`.

    A refused id is quoted short and on one line: it is untrusted, and the reason is logged
    and shown to operators.
    """
    if not isinstance(document_id, str) or not DOCUMENT_ID_CHARSET.match(document_id):
        raise IngestionRejected(
            f"document id {quoted(repr(document_id))} is outside the permitted charset "
            "[A-Za-z0-9_.:-]{1,128}. A document id is an opaque key: untrusted input must "
            "never be able to select a filesystem path (AS-ING-2)."
        )
    if ".." in document_id:
        raise IngestionRejected(
            f"document id {document_id!r} contains '..'; a traversal sequence is never a "
            "legitimate key, whatever the store does with it."
        )
    return document_id


@dataclass(frozen=True)
class StoredDocument:
    """One document as a store returns it; every field but the id is untrusted."""

    document_id: str
    title: str
    text: str
    revision: str = ""
    media_type: str = "text/plain"


class DocumentStore(Protocol):
    """The port a document-store adapter satisfies.

    ``None`` means the store holds no such document, which is not the same as an empty one:
    a store that answered a deleted id with an empty document would make the bridge render a
    heading over nothing and leave the operator unable to tell deletion from blankness.
    """

    def fetch(self, document_id: str) -> StoredDocument | None: ...


@dataclass(frozen=True)
class DocumentPolicy:
    """The ceilings applied to one document and to the assembled block."""

    max_document_chars: int = 20_000
    max_total_chars: int = 60_000

    def __post_init__(self) -> None:
        check_positive_ints(self, "max_document_chars", "max_total_chars")


DEFAULT_DOCUMENT_POLICY = DocumentPolicy()


def _render(document_id: str, document: StoredDocument) -> str:
    name = safe_source(document.title) or document_id
    # A stored document's text is as untrusted as an attachment's: it may neither forge a block
    # nor carry text no reader sees.
    body = escape_markers(remove_hidden_text(document.text))
    return f"DOCUMENT [{name}] (id: {document_id})\n{body}"


@dataclass(frozen=True)
class DocumentSource:
    """A context source over a fixed list of documents in a store."""

    store: DocumentStore
    document_ids: Sequence[str]
    policy: DocumentPolicy = DEFAULT_DOCUMENT_POLICY
    scope_aware: bool = False
    offline_safe: bool = False

    def __post_init__(self) -> None:
        if not callable(getattr(self.store, "fetch", None)):
            raise BridgeContractError(
                f"{type(self.store).__name__} has no callable fetch(); a document source needs "
                "a DocumentStore."
            )
        # A bare string is a sequence of one-character ids, which would read "a", "b", "c".
        if isinstance(self.document_ids, str):
            raise BridgeContractError("document_ids must be a sequence of ids, not a single string")
        # Frozen into a tuple so a caller's list changing later cannot change what is read.
        object.__setattr__(self, "document_ids", tuple(self.document_ids))

    def select(self, request: ContextRequest) -> IngestSelection:
        """Read the documents in declared order, with a reason for each one left out.

        Five things keep a document out — no such id, a store answering with a different id,
        blank text, the per-document ceiling, the aggregate ceiling — and the rendered text
        looks the same in all of them, so the reason is the only way an operator can tell.
        An id outside the charset is not an omission but an attack, and ends the read.
        """
        blocks: list[str] = []
        revisions: list[str] = []
        dropped: list[tuple[str, str]] = []
        used = 0
        for document_id in self.document_ids:
            validate_document_id(document_id)
            document = self.store.fetch(document_id)
            if document is None:
                dropped.append((document_id, "the store holds no document under this id"))
                continue
            # Rendered under the requested id, the text of another document would be
            # attributed to one the caller asked for, whatever confused the store.
            if document.document_id != document_id:
                dropped.append(
                    (document_id, "the store answered with a document under a different id")
                )
                continue
            if not document.text.strip():
                dropped.append((document_id, "the document is present but its text is blank"))
                continue
            if len(document.text) > self.policy.max_document_chars:
                dropped.append(
                    (
                        document_id,
                        f"{len(document.text)} chars exceeds the per-document cap of "
                        f"{self.policy.max_document_chars}; documents are dropped, "
                        "never truncated",
                    )
                )
                continue
            block = _render(document_id, document)
            cost = len(block) + (len(BLOCK_SEPARATOR) if blocks else 0)
            if used + cost > self.policy.max_total_chars:
                dropped.append(
                    (
                        document_id,
                        "would take the assembled block past the "
                        f"{self.policy.max_total_chars}-char ceiling",
                    )
                )
                continue
            blocks.append(block)
            revisions.append(f"{document_id}:{document.revision}")
            used += cost
        return IngestSelection(
            text=BLOCK_SEPARATOR.join(blocks),
            revision="|".join(revisions),
            dropped=tuple(dropped),
        )

    def read(self, request: ContextRequest) -> ContextRead:
        return self.select(request).as_read()


def document_contribution(
    contribution_id: str,
    source: DocumentSource,
    *,
    order: int = 0,
    scope: str | None = None,
) -> ContextContribution:
    """Declare a document set as standing (L1), session-tier context.

    L1, not L2: a conversation's documents do not change turn to turn, and on the per-turn
    layer they would sit below the cache boundary and be paid for again on every turn.
    """
    return session_contribution(contribution_id, source, ContextLayer.L1, order=order, scope=scope)
