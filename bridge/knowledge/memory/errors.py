"""The memory side's two failures, placed in the bridge's one error hierarchy.

A bad memory port is a ``BridgeContractError`` like any wiring mistake; an unreachable store is
its own branch under ``KnowledgeBridgeError``. See docs/spec-decisions.md, Memory
(`bridge.knowledge.memory`).
"""

from __future__ import annotations

from bridge.knowledge.errors import BridgeContractError, KnowledgeBridgeError


class MemoryContractError(BridgeContractError):
    """A memory port that cannot do what the seam it is wired into requires."""


class MemoryUnavailable(KnowledgeBridgeError):
    """The memory store could not be reached or did not answer.

    Raised, never turned into an empty result: an empty result means "nothing was remembered",
    and an unreachable store must never look like that to the policy deciding the turn.
    """
