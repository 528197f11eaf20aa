"""The declaration every bridge emits, and the values a source answers with.

A bridge declares what it supplies, on which layer, tier and scope; the prompt compiler places
it. Unsafe declarations are refused while the deployment is wired, not when a prompt renders.
See docs/spec-decisions.md, Foundation (labels, contracts, attachments).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from bridge.knowledge.errors import BridgeContractError

#: Separates the rendered blocks of one source (two attachments, two documents). A blank line
#: keeps each ``ATTACHMENT [label]`` heading at the start of a line of its own.
BLOCK_SEPARATOR = "\n\n"


class ContextLayer(StrEnum):
    """Where a contribution renders: L0 the cached authored prefix, L1 standing, L2 per turn."""

    L0 = "L0"
    L1 = "L1"
    L2 = "L2"


#: Render order of the layers; lower renders earlier.
LAYER_LADDER: tuple[ContextLayer, ...] = (ContextLayer.L0, ContextLayer.L1, ContextLayer.L2)


class ContextTier(StrEnum):
    """How far a block is trusted, in the prompt contract's vocabulary."""

    SYSTEM = "system"
    OPERATOR = "operator"
    SESSION = "session"
    USER = "user"


#: Tiers whose text renders verbatim beside the operator's own instructions.
AUTHORED_TIERS = frozenset({ContextTier.SYSTEM, ContextTier.OPERATOR})


class ContextScope(StrEnum):
    """How widely one contribution's content is shared."""

    DEPLOYMENT = "deployment"
    TENANT = "tenant"
    USER = "user"
    SESSION = "session"


# Ids end up in isolation keys and inside the rendered untrusted delimiter, where a separator
# or an angle bracket would forge a boundary.
_ID_CHARSET = re.compile(r"[A-Za-z0-9_.\-]+\Z")


@dataclass(frozen=True)
class ContextRequest:
    """What a source is asked for: one contribution, one scope path, one turn."""

    contribution_id: str
    scope_path: str = ""
    turn: int = 0


@dataclass(frozen=True)
class ContextRead:
    """A source's answer. Untrusted unless someone says otherwise, and nothing here does."""

    text: str
    revision: str = ""
    untrusted: bool = True


@runtime_checkable
class ContextSource(Protocol):
    """Reads the current content of one contribution for one scope.

    A source that serves different content per tenant says so with a truthy ``scope_aware``
    attribute; one without it is assumed to serve the same text to everyone.
    """

    def read(self, request: ContextRequest) -> ContextRead: ...


@dataclass(frozen=True)
class IngestSelection:
    """What a source emitted, plus ``(label, reason)`` for everything it left out.

    Without the reasons an operator asking why a file is missing from the prompt could not
    tell a parser failure from a size ceiling from an empty document: the text shows the same
    absence in every case.
    """

    text: str = ""
    revision: str = ""
    dropped: tuple[tuple[str, str], ...] = ()

    def as_read(self) -> ContextRead:
        """The value :meth:`ContextSource.read` returns: the text, always untrusted."""
        return ContextRead(text=self.text, revision=self.revision, untrusted=True)


@dataclass(frozen=True)
class StaticContextSource:
    """Text fixed when the deployment is declared; for seeds and tests."""

    text: str
    revision: str = "static"
    scope_aware: bool = False
    offline_safe: bool = True

    def read(self, request: ContextRequest) -> ContextRead:
        return ContextRead(text=self.text, revision=self.revision, untrusted=True)


@dataclass(frozen=True)
class ContextContribution:
    """One bridge's declaration of the ingested context it contributes."""

    contribution_id: str
    source: ContextSource
    capability: str = "knowledge"
    layer: ContextLayer = ContextLayer.L2
    tier: ContextTier = ContextTier.SESSION
    scope: ContextScope = ContextScope.DEPLOYMENT
    order: int = 0
    inherit: bool = True
    pinned: bool = False
    requires_hydration: bool = True

    def validate(self) -> None:
        """Refuse every declaration this capability may not make, each with its reason."""
        cid = self.contribution_id
        if not cid:
            raise BridgeContractError(
                "an ingested-context contribution needs a non-empty contribution_id."
            )
        if not _ID_CHARSET.match(cid):
            raise BridgeContractError(
                f"contribution id {cid!r} is outside the permitted charset [A-Za-z0-9_.-]; "
                "the id is rendered in the untrusted delimiter and used in isolation keys, "
                "where a separator or an angle bracket would forge a boundary."
            )
        if not callable(getattr(self.source, "read", None)):
            raise BridgeContractError(
                f"contribution {cid!r} declares a source that cannot read: "
                f"{type(self.source).__name__} has no callable read()."
            )
        if self.tier in AUTHORED_TIERS:
            raise BridgeContractError(
                f"contribution {cid!r} declares the authored tier {self.tier.value!r}. "
                "Retrieved, stored and extracted content is untrusted by definition (AS-ING-1); "
                "an authored tier would render it verbatim beside the operator's instructions."
            )
        if self.layer is ContextLayer.L0:
            raise BridgeContractError(
                f"contribution {cid!r} declares layer L0, the cached authored prefix: ingested "
                "content there is served again on every later turn, so one poisoned retrieval "
                "outlives the turn that fetched it. Declare L1 (standing) or L2 (per turn)."
            )
        if self.pinned:
            raise BridgeContractError(
                f"contribution {cid!r} declares itself pinned. Pinned content fails the compile "
                "instead of being dropped for budget; ingested content is evidence, not "
                "instruction, and a turn without it is still a correct turn."
            )
        if self.scope is not ContextScope.DEPLOYMENT and not getattr(
            self.source, "scope_aware", False
        ):
            raise BridgeContractError(
                f"contribution {cid!r} declares scope={self.scope.value!r} but its source "
                f"{type(self.source).__name__} is not scope_aware: it serves one value to every "
                "tenant. Declare scope='deployment', or supply a source keyed on the scope path."
            )


class ContextContributor(Protocol):
    """What a knowledge-side capability registers with the composition root."""

    def contributions(self) -> tuple[ContextContribution, ...]: ...


def session_contribution(
    contribution_id: str,
    source: ContextSource,
    layer: ContextLayer,
    *,
    order: int = 0,
    scope: str | None = None,
) -> ContextContribution:
    """The declaration every bridge makes: session tier, hydrated per read, on ``layer``.

    One constructor for the three bridges, so none of them can drift to another tier.
    """
    return ContextContribution(
        contribution_id=contribution_id,
        source=source,
        layer=layer,
        tier=ContextTier.SESSION,
        scope=resolve_scope(scope),
        order=order,
        requires_hydration=True,
    )


def layer_index(layer: ContextLayer) -> int:
    """The layer's position on the ladder; lower renders earlier."""
    return LAYER_LADDER.index(layer)


def ordering_key(contribution: ContextContribution) -> tuple[int, int, str]:
    """A total order over contributions: layer, declared order, then id.

    Ties on layer and order are broken by id so the compiler receives the same sequence on
    every run, whatever order an upstream dict produced them in.
    """
    return (layer_index(contribution.layer), contribution.order, contribution.contribution_id)


def resolve_scope(scope: str | None) -> ContextScope:
    """Map a caller's scope string to a member, refusing unknown ones in this hierarchy.

    ``ContextScope('tenant-a')`` would raise a bare ``ValueError``, the one refusal a caller
    catching :class:`BridgeContractError` around declaration building would miss.
    """
    if scope is None:
        return ContextScope.DEPLOYMENT
    try:
        return ContextScope(scope)
    except ValueError as exc:
        raise BridgeContractError(
            f"scope {scope!r} is not a context scope; permitted values are "
            f"{[member.value for member in ContextScope]}. A scope decides how widely content "
            "is shared, so an unrecognised one is refused rather than guessed at."
        ) from exc
