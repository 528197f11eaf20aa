"""The one seam between the bridges and the prompt compiler.

See docs/spec-decisions.md, Foundation (labels, contracts, attachments).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from bridge.knowledge.contracts import ContextContribution


def contribution_spec(contribution: ContextContribution) -> Mapping[str, object]:
    """Validate a declaration, then project it into compiler-ready keyword values.

    Validation is unconditional: emitting a spec for a declaration this capability would
    refuse moves the refusal into the compiler, whose error can no longer say which bridge got
    it wrong. Enums go out as their string values, which the compiler's own enums share.
    """
    contribution.validate()
    return MappingProxyType(
        {
            "contribution_id": contribution.contribution_id,
            "source": contribution.source,
            "capability": contribution.capability,
            "layer": contribution.layer.value,
            "tier": contribution.tier.value,
            "scope": contribution.scope.value,
            "order": contribution.order,
            "inherit": contribution.inherit,
            "pinned": contribution.pinned,
            "requires_hydration": contribution.requires_hydration,
        }
    )
