"""airlock's bridge: the knowledge capability and the trusted side of the extraction service.

Every public name of the spec is importable from here as well as from its own module.
"""

from bridge.archive import ArchiveLimitExceeded, inspect_zip_limits, is_zip_container
from bridge.assembly import contribution_spec
from bridge.attachments import (
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
from bridge.contracts import (
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
from bridge.errors import (
    BridgeContractError,
    ExtractionFailed,
    IngestionRejected,
    KnowledgeBridgeError,
    OutboundRejected,
)
from bridge.labels import FALLBACK_LABEL, MAX_LABEL_CHARS, MAX_SOURCE_CHARS, safe_label, safe_source

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_LIMITS",
    "EXTRACTABLE_KINDS",
    "FALLBACK_LABEL",
    "MAX_LABEL_CHARS",
    "MAX_SOURCE_CHARS",
    "ArchiveLimitExceeded",
    "AttachmentRef",
    "AttachmentSource",
    "BridgeContractError",
    "ContextContribution",
    "ContextContributor",
    "ContextLayer",
    "ContextRead",
    "ContextRequest",
    "ContextScope",
    "ContextSource",
    "ContextTier",
    "ExtractedAttachment",
    "ExtractionFailed",
    "ExtractionLimits",
    "IngestSelection",
    "IngestionRejected",
    "KnowledgeBridgeError",
    "OutboundRejected",
    "StaticContextSource",
    "TextExtractor",
    "attachment_contribution",
    "contribution_spec",
    "extract_attachment",
    "inspect_zip_limits",
    "is_zip_container",
    "layer_index",
    "normalise_extracted",
    "ordering_key",
    "resolve_scope",
    "safe_label",
    "safe_source",
]
