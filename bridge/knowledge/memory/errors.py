"""The memory side's two failures, placed in the bridge's one error hierarchy.

A wiring mistake is a `BridgeContractError` wherever it is made, so a
composition root catches a bad memory port with the same clause as a bad knowledge source. An
unreachable store is not a wiring mistake and not a refusal of content: it is its own branch
directly under :class:`~bridge.knowledge.errors.KnowledgeBridgeError`.
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
