"""airlock's bridge: the knowledge capability and the trusted side of the extraction service.

Every public name of the spec is importable from here as well as from its own module. See
docs/architecture.md.
"""

from importlib import metadata

from bridge.knowledge.archive import ArchiveLimitExceeded, inspect_zip_limits, is_zip_container
from bridge.knowledge.assembly import contribution_spec
from bridge.knowledge.attachments import (
    DEFAULT_LIMITS,
    EXTRACTABLE_KINDS,
    AttachmentRef,
    AttachmentSource,
    ExtractedAttachment,
    ExtractionLimits,
    TextExtractor,
    attachment_contribution,
    extract_attachment,
    normalise_extracted,
)
from bridge.knowledge.citations import (
    DEFAULT_LAYER_NAMES,
    SOURCE_REFERENCE,
    Citation,
    CitationIndex,
    CitationTagFilter,
    drop_ungrounded_citations,
)
from bridge.knowledge.contracts import (
    ContextContribution,
    ContextContributor,
    ContextLayer,
    ContextRead,
    ContextRequest,
    ContextScope,
    ContextSource,
    ContextTier,
    IngestSelection,
    StaticContextSource,
    layer_index,
    ordering_key,
    resolve_scope,
)
from bridge.knowledge.documents import (
    DocumentPolicy,
    DocumentSource,
    DocumentStore,
    StoredDocument,
    document_contribution,
    validate_document_id,
)
from bridge.knowledge.errors import (
    BridgeContractError,
    ExtractionFailed,
    IngestionRejected,
    KnowledgeBridgeError,
    OutboundRejected,
)
from bridge.knowledge.factory import knowledge_sources
from bridge.knowledge.labels import (
    FALLBACK_LABEL,
    MAX_LABEL_CHARS,
    MAX_SOURCE_CHARS,
    safe_label,
    safe_source,
)
from bridge.knowledge.multimodal import (
    ContentPart,
    PartType,
    media_part,
    text_part,
    to_anthropic_blocks,
    to_openai_blocks,
)
from bridge.knowledge.outbound import ALLOWED_URL_SCHEMES, check_outbound_url
from bridge.knowledge.provider import (
    KnowledgeFragment,
    KnowledgeProvider,
    ProviderRetriever,
    ProviderUnavailable,
)
from bridge.knowledge.retrieval import (
    FragmentSelection,
    KnowledgeRetriever,
    KnowledgeSource,
    RetrievalPolicy,
    RetrievedFragment,
    flatten_content,
    knowledge_contribution,
    render_fragments,
    select_fragments,
    selection_revision,
)

#: Read from the installed distribution, so pyproject.toml is the one place a release is named.
__version__ = metadata.version("airlock")

__all__ = [
    "ALLOWED_URL_SCHEMES",
    "DEFAULT_LAYER_NAMES",
    "DEFAULT_LIMITS",
    "EXTRACTABLE_KINDS",
    "FALLBACK_LABEL",
    "MAX_LABEL_CHARS",
    "MAX_SOURCE_CHARS",
    "SOURCE_REFERENCE",
    "ArchiveLimitExceeded",
    "AttachmentRef",
    "AttachmentSource",
    "BridgeContractError",
    "Citation",
    "CitationIndex",
    "CitationTagFilter",
    "ContentPart",
    "ContextContribution",
    "ContextContributor",
    "ContextLayer",
    "ContextRead",
    "ContextRequest",
    "ContextScope",
    "ContextSource",
    "ContextTier",
    "DocumentPolicy",
    "DocumentSource",
    "DocumentStore",
    "ExtractedAttachment",
    "ExtractionFailed",
    "ExtractionLimits",
    "FragmentSelection",
    "IngestSelection",
    "IngestionRejected",
    "KnowledgeBridgeError",
    "KnowledgeFragment",
    "KnowledgeProvider",
    "KnowledgeRetriever",
    "KnowledgeSource",
    "OutboundRejected",
    "PartType",
    "ProviderRetriever",
    "ProviderUnavailable",
    "RetrievalPolicy",
    "RetrievedFragment",
    "StaticContextSource",
    "StoredDocument",
    "TextExtractor",
    "attachment_contribution",
    "check_outbound_url",
    "contribution_spec",
    "document_contribution",
    "drop_ungrounded_citations",
    "extract_attachment",
    "flatten_content",
    "inspect_zip_limits",
    "is_zip_container",
    "knowledge_contribution",
    "knowledge_sources",
    "layer_index",
    "media_part",
    "normalise_extracted",
    "ordering_key",
    "render_fragments",
    "resolve_scope",
    "safe_label",
    "safe_source",
    "select_fragments",
    "selection_revision",
    "text_part",
    "to_anthropic_blocks",
    "to_openai_blocks",
    "validate_document_id",
]
