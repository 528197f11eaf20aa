"""Every public name of the spec's index is importable from ``bridge`` and from its module."""

from __future__ import annotations

import importlib

import pytest

import bridge
from bridge.knowledge.memory import MemoryContractError, MemoryUnavailable

SPEC_NAMES = {
    "bridge.knowledge.attachments": [
        "AttachmentRef", "AttachmentSource", "ExtractedAttachment", "ExtractionLimits",
        "TextExtractor", "attachment_contribution", "extract_attachment", "normalise_extracted",
    ],
    "bridge.knowledge.archive": ["ArchiveLimitExceeded", "inspect_zip_limits", "is_zip_container"],
    "bridge.knowledge.errors": [
        "BridgeContractError", "ExtractionFailed", "IngestionRejected", "KnowledgeBridgeError",
        "OutboundRejected",
    ],
    "bridge.knowledge.labels": ["safe_label", "safe_source"],
    "bridge.knowledge.contracts": [
        "ContextContribution", "ContextContributor", "ContextLayer", "ContextRead",
        "ContextRequest", "ContextScope", "ContextSource", "ContextTier", "IngestSelection",
        "StaticContextSource", "layer_index", "ordering_key", "resolve_scope",
    ],
    "bridge.knowledge.assembly": ["contribution_spec"],
    "bridge.knowledge.citations": [
        "Citation", "CitationIndex", "CitationTagFilter", "drop_ungrounded_citations",
    ],
    "bridge.knowledge.documents": [
        "DocumentPolicy", "DocumentSource", "DocumentStore", "StoredDocument",
        "document_contribution", "validate_document_id",
    ],
    "bridge.knowledge.retrieval": [
        "FragmentSelection", "KnowledgeRetriever", "KnowledgeSource", "RetrievalPolicy",
        "RetrievedFragment", "flatten_content", "knowledge_contribution", "render_fragments",
        "select_fragments", "selection_revision",
    ],
    "bridge.knowledge.multimodal": [
        "ContentPart", "media_part", "text_part", "to_anthropic_blocks", "to_openai_blocks",
    ],
    "bridge.knowledge.outbound": ["check_outbound_url"],
    "bridge.knowledge.factory": ["knowledge_sources"],
    "bridge.knowledge.provider": ["KnowledgeFragment", "KnowledgeProvider"],
    "bridge.knowledge.memory": [
        "PortCandidateSource", "MemoryQuery", "MemoryLayer", "Candidate", "RelevanceSignals",
        "RetrievalResult", "MemoryContractError", "MemoryUnavailable",
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("module", "name"),
    [(module, name) for module, names in SPEC_NAMES.items() for name in names],
)
def test_name_is_importable(module: str, name: str) -> None:
    owner = importlib.import_module(module)
    assert hasattr(owner, name)
    if module != "bridge.knowledge.memory":
        assert getattr(bridge, name) is getattr(owner, name)
        assert name in bridge.__all__


def test_every_error_is_in_one_hierarchy() -> None:
    for error in (
        bridge.BridgeContractError,
        bridge.IngestionRejected,
        bridge.ExtractionFailed,
        bridge.OutboundRejected,
        bridge.ArchiveLimitExceeded,
        bridge.ProviderUnavailable,
        MemoryContractError,
        MemoryUnavailable,
    ):
        assert issubclass(error, bridge.KnowledgeBridgeError)
