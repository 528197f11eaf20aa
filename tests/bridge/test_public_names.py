"""Every public name of the spec's index is importable from ``bridge`` and from its module."""

from __future__ import annotations

import importlib

import pytest

import bridge
from bridge.memory import MemoryContractError, MemoryUnavailable

SPEC_NAMES = {
    "bridge.attachments": [
        "AttachmentRef", "AttachmentSource", "ExtractedAttachment", "ExtractionLimits",
        "TextExtractor", "attachment_contribution", "extract_attachment", "normalise_extracted",
    ],
    "bridge.archive": ["ArchiveLimitExceeded", "inspect_zip_limits", "is_zip_container"],
    "bridge.errors": [
        "BridgeContractError", "ExtractionFailed", "IngestionRejected", "KnowledgeBridgeError",
        "OutboundRejected",
    ],
    "bridge.labels": ["safe_label", "safe_source"],
    "bridge.contracts": [
        "ContextContribution", "ContextContributor", "ContextLayer", "ContextRead",
        "ContextRequest", "ContextScope", "ContextSource", "ContextTier", "IngestSelection",
        "StaticContextSource", "layer_index", "ordering_key", "resolve_scope",
    ],
    "bridge.assembly": ["contribution_spec"],
    "bridge.citations": [
        "Citation", "CitationIndex", "CitationTagFilter", "drop_ungrounded_citations",
    ],
    "bridge.documents": [
        "DocumentPolicy", "DocumentSource", "DocumentStore", "StoredDocument",
        "document_contribution", "validate_document_id",
    ],
    "bridge.retrieval": [
        "FragmentSelection", "KnowledgeRetriever", "KnowledgeSource", "RetrievalPolicy",
        "RetrievedFragment", "flatten_content", "knowledge_contribution", "render_fragments",
        "select_fragments", "selection_revision",
    ],
    "bridge.multimodal": [
        "ContentPart", "media_part", "text_part", "to_anthropic_blocks", "to_openai_blocks",
    ],
    "bridge.outbound": ["check_outbound_url"],
    "bridge.factory": ["knowledge_sources"],
    "bridge.provider": ["KnowledgeFragment", "KnowledgeProvider"],
    "bridge.memory": [
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
    if module != "bridge.memory":
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
