"""The one error hierarchy of the knowledge capability.

Every refusal this package makes is a :class:`KnowledgeBridgeError`, so a caller can catch the
capability's failures without also catching its own bugs. See docs/spec-decisions.md,
Foundation (labels, contracts, attachments).
"""

from __future__ import annotations

from bridge.knowledge.failures import REFUSED, Failure


class KnowledgeBridgeError(Exception):
    """Root of everything the bridge raises on purpose."""


class BridgeContractError(KnowledgeBridgeError):
    """A declaration that cannot be honoured (authored tier, L0, pinned, unusable source).

    Raised while a deployment wires itself up, so a misconfiguration is reported before the
    first turn rather than discovered in a rendered prompt.
    """


class IngestionRejected(KnowledgeBridgeError):
    """One input failed a cheap guard (size, count, shape, identifier) before any parser ran."""

    @property
    def failure(self) -> Failure:
        """This refusal as plain data, worded where its guard decided: its words are its reason."""
        return Failure(REFUSED, str(self))


class ExtractionFailed(KnowledgeBridgeError):
    """A parser lost on one input; ``__cause__`` holds what it raised, ``failure`` the value it
    was worded from.

    Parsers are treated as compromise-prone, so their failures are typed here and never leak
    out as a third-party exception a caller would not think to catch.
    """

    def __init__(self, message: str, failure: Failure | None = None) -> None:
        super().__init__(message)
        self._failure = failure

    @property
    def failure(self) -> Failure:
        """The failure as plain data; for one worded where it happened, its words."""
        return self._failure or Failure(type(self).__name__, str(self))


class OutboundRejected(KnowledgeBridgeError):
    """A URL or wire payload was refused before it left (scheme, host, media type)."""
