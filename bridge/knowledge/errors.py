"""The one error hierarchy of the knowledge capability.

Every refusal this package makes is a :class:`KnowledgeBridgeError`, so a caller can catch the
capability's failures without also catching its own bugs.
"""

from __future__ import annotations


class KnowledgeBridgeError(Exception):
    """Root of everything the bridge raises on purpose."""


class BridgeContractError(KnowledgeBridgeError):
    """A declaration that cannot be honoured (authored tier, L0, pinned, unusable source).

    Raised while a deployment wires itself up, so a misconfiguration is reported before the
    first turn rather than discovered in a rendered prompt.
    """


class IngestionRejected(KnowledgeBridgeError):
    """One input failed a cheap guard (size, count, shape, identifier) before any parser ran."""


class ExtractionFailed(KnowledgeBridgeError):
    """A parser lost on one input; ``__cause__`` holds what it raised.

    Parsers are treated as compromise-prone, so their failures are typed here and never leak
    out as a third-party exception a caller would not think to catch.
    """


class OutboundRejected(KnowledgeBridgeError):
    """A URL or wire payload was refused before it left (scheme, host, media type)."""
