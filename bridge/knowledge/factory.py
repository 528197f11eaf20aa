"""One call that turns a deployment's knowledge inputs into the sources that can use them.

See docs/spec-decisions.md, Retrieval, documents, citations, factory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from bridge.knowledge.attachments import (
    AttachmentRef,
    AttachmentSource,
    ExtractionLimits,
    TextExtractor,
)
from bridge.knowledge.contracts import ContextSource, StaticContextSource
from bridge.knowledge.documents import DocumentPolicy, DocumentSource, DocumentStore
from bridge.knowledge.errors import BridgeContractError
from bridge.knowledge.retrieval import KnowledgeRetriever, KnowledgeSource, RetrievalPolicy

_Built = TypeVar("_Built")

# The policy keywords knowledge_sources forwards, and the type each must have. Anything else is
# refused: a misspelt "polcy=" that was silently ignored would leave the defaults in force
# while the deployment believed its own ceilings applied.
_POLICY_TYPES: dict[str, type] = {
    "policy": RetrievalPolicy,
    "document_policy": DocumentPolicy,
    "limits": ExtractionLimits,
}


def _built(factory: Callable[..., _Built], /, **fields: Any) -> _Built:
    # A policy left as None is not passed at all, so the source's own default applies rather
    # than a None it would fail on later.
    return factory(**{name: value for name, value in fields.items() if value is not None})


def _checked_policies(policies: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(policies) - set(_POLICY_TYPES))
    if unknown:
        raise BridgeContractError(
            f"unknown policy keyword(s) {unknown}; knowledge_sources accepts "
            f"{sorted(_POLICY_TYPES)}. A misspelt policy would be ignored and the defaults "
            "would apply while the deployment believed its own ceilings did."
        )
    for name, value in policies.items():
        expected = _POLICY_TYPES[name]
        if value is not None and not isinstance(value, expected):
            raise BridgeContractError(
                f"{name} must be a {expected.__name__}, not {type(value).__name__}; a policy "
                "handed to the wrong source would fail on the first turn instead of now."
            )
    return policies


def knowledge_sources(
    *,
    retriever: KnowledgeRetriever | None = None,
    query: str = "",
    store: DocumentStore | None = None,
    document_ids: Sequence[str] = (),
    attachments: Sequence[AttachmentRef] = (),
    extractor: TextExtractor | None = None,
    context: str = "",
    **policies: Any,
) -> tuple[ContextSource, ...]:
    """The sources through which this deployment's knowledge reaches the prompt.

    Each input adds a source only when that source can produce something: a retriever needs a
    non-blank query, a store needs ids, attachments need an extractor, and static context must
    not be blank. A source that can only ever answer nothing would still cost the compiler a
    budget slot and a delimiter around an empty block.

    ``policy`` (a :class:`RetrievalPolicy`), ``document_policy`` (a :class:`DocumentPolicy`)
    and ``limits`` (an :class:`ExtractionLimits`) are forwarded to their own source; one left
    out or ``None`` leaves that source's default. Any other keyword, or a policy of the wrong
    type, raises :class:`BridgeContractError`.
    """
    checked = _checked_policies(policies)
    sources: list[ContextSource] = []
    if retriever is not None and query.strip():
        sources.append(
            _built(KnowledgeSource, retriever=retriever, query=query, policy=checked.get("policy"))
        )
    if store is not None and document_ids:
        sources.append(
            _built(
                DocumentSource,
                store=store,
                document_ids=document_ids,
                policy=checked.get("document_policy"),
            )
        )
    if attachments and extractor is not None:
        sources.append(
            _built(
                AttachmentSource,
                refs=tuple(attachments),
                extractor=extractor,
                limits=checked.get("limits"),
            )
        )
    if context.strip():
        sources.append(StaticContextSource(text=context.strip()))
    return tuple(sources)
