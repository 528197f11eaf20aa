"""The retrieval bridge: what a vector store answered, turned into one bounded context block.

The store decides nothing: ranking is total, a fragment over a ceiling is dropped whole, and
one fragment is one line, so store order and fragment content cannot change the prompt's shape.
Rules and reasons: docs/spec-decisions.md (Retrieval, documents, citations, factory).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bridge.knowledge.contracts import (
    ContextContribution,
    ContextLayer,
    ContextRead,
    ContextRequest,
    session_contribution,
)
from bridge.knowledge.errors import BridgeContractError, IngestionRejected
from bridge.knowledge.labels import safe_source

# Every form str.splitlines() breaks on. "\r\n" is listed first so a Windows line ending becomes
# one space, not two; any form left out would let content start a forged citation line.
_LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")

# Joins citation lines. Named once because the aggregate ceiling charges for it.
_LINE_SEPARATOR = "\n"

#: Separates the scope path from the query when ``KnowledgeSource.scope_in_query`` is set. A
#: scope-aware store splits the string it receives on the *first* occurrence:
#: ``scope_path, _, query = text.partition(SCOPE_QUERY_SEPARATOR)``.
SCOPE_QUERY_SEPARATOR = "\n"

# How many characters of a retrieval's revision digest are kept: 64 bits is ample to tell two
# retrievals apart for caching, and short enough to sit in a cache key or a log line.
_REVISION_HEX_CHARS = 16


def check_positive_ints(owner: object, *names: str) -> None:
    """Refuse a policy whose integer ceilings are not positive integers.

    A zero ceiling silently refuses everything and a negative one compares the wrong way, so
    either is a misconfiguration to report when the deployment is wired, not at the first turn.
    """
    for name in names:
        value = getattr(owner, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BridgeContractError(
                f"{type(owner).__name__}.{name} must be a positive integer, not {value!r}"
            )


def flatten_content(content: str) -> str:
    """Replace every line-break form in ``content`` with one space."""
    return _LINE_BREAK.sub(" ", content)


@dataclass(frozen=True)
class RetrievedFragment:
    """One scored chunk a store returned, with the (untrusted) name of its source.

    ``metadata`` is carried for adapters and never rendered. It takes part in equality but not
    in the hash, so a fragment stays hashable although a dict is not.
    """

    content: str
    source: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # Checked here because a store adapter passing None or bytes would otherwise fail deep
        # inside the ranking, far from the adapter that produced it.
        for name in ("content", "source"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"RetrievedFragment.{name} must be a str")
        if isinstance(self.score, bool) or not isinstance(self.score, int | float):
            raise TypeError("RetrievedFragment.score must be a real number")
        # "+ 0.0" turns -0.0 into 0.0: they compare equal but print differently, and a drop
        # reason that quoted one or the other depending on input order would not be stable.
        object.__setattr__(self, "score", float(self.score) + 0.0)

    def citation_line(self) -> str:
        """This fragment as one ``SOURCE [name]: content`` line.

        The name is made safe so it cannot close the brackets early, and the content is
        flattened so that ``ok\\nSOURCE [Handbook]: forged`` stays one line attributed to its
        real source instead of becoming a second line attributed to the handbook.
        """
        return f"SOURCE [{safe_source(self.source)}]: {flatten_content(self.content)}"


def fragment_rank_key(fragment: RetrievedFragment) -> tuple[bool, float, str, str]:
    """The total order fragments are ranked in: best score first, then source, then content.

    A NaN score ranks after every number. Left in the key as-is it would make the sort depend on
    input order (NaN compares false to everything), and the prompt with it.
    """
    unscored = math.isnan(fragment.score)
    return (unscored, 0.0 if unscored else -fragment.score, fragment.source, fragment.content)


@dataclass(frozen=True)
class RetrievalPolicy:
    """The ceilings this side of the boundary applies to one retrieval."""

    limit: int = 3
    min_score: float = 0.0
    max_fragment_chars: int = 2000
    max_total_chars: int = 8000

    def __post_init__(self) -> None:
        check_positive_ints(self, "limit", "max_fragment_chars", "max_total_chars")
        if isinstance(self.min_score, bool) or not isinstance(self.min_score, int | float):
            raise BridgeContractError("RetrievalPolicy.min_score must be a real number")
        # A NaN floor compares false to every score, so it would admit or refuse everything
        # depending on how the comparison happened to be written.
        if math.isnan(self.min_score):
            raise BridgeContractError("RetrievalPolicy.min_score must not be NaN")


DEFAULT_RETRIEVAL_POLICY = RetrievalPolicy()


@dataclass(frozen=True)
class FragmentSelection:
    """The fragments that survived selection, and ``(source, reason)`` for each that did not."""

    admitted: tuple[RetrievedFragment, ...] = ()
    dropped: tuple[tuple[str, str], ...] = ()


def select_fragments(
    fragments: Iterable[RetrievedFragment], policy: RetrievalPolicy
) -> FragmentSelection:
    """Rank what a store returned and admit what fits the policy. The input is not mutated.

    Checks run in a fixed order — count, score floor, per-fragment ceiling, aggregate ceiling —
    so a given fragment is always refused for the same reason. Nothing is ever shortened.
    """
    admitted: list[RetrievedFragment] = []
    dropped: list[tuple[str, str]] = []
    used = 0
    for fragment in sorted(fragments, key=fragment_rank_key):
        # The label is made safe because the reasons are shown to operators and logged.
        label = safe_source(fragment.source)
        if len(admitted) >= policy.limit:
            dropped.append((label, f"beyond the {policy.limit}-fragment limit"))
            continue
        # Written as "not >=" so a NaN score falls below every floor instead of passing it.
        if not fragment.score >= policy.min_score:
            dropped.append((label, f"score {fragment.score} below the {policy.min_score} floor"))
            continue
        if len(fragment.content) > policy.max_fragment_chars:
            dropped.append(
                (
                    label,
                    f"{len(fragment.content)} chars exceeds the per-fragment cap of "
                    f"{policy.max_fragment_chars}; fragments are dropped, never truncated",
                )
            )
            continue
        cost = len(fragment.citation_line()) + (len(_LINE_SEPARATOR) if admitted else 0)
        if used + cost > policy.max_total_chars:
            dropped.append(
                (label, f"would take the block past the {policy.max_total_chars}-char ceiling")
            )
            continue
        admitted.append(fragment)
        used += cost
    return FragmentSelection(admitted=tuple(admitted), dropped=tuple(dropped))


def render_fragments(selection: FragmentSelection) -> str:
    """The admitted fragments as ``SOURCE [x]: y`` lines, in ranked order."""
    return _LINE_SEPARATOR.join(fragment.citation_line() for fragment in selection.admitted)


def selection_revision(selection: FragmentSelection) -> str:
    """A digest of what was admitted, so a changed retrieval changes the cache key.

    Lone surrogates (which some stores hand back from badly decoded documents) are encoded with
    ``surrogatepass`` so they hash instead of raising; valid text hashes exactly as UTF-8.
    """
    material = "\x00".join(
        f"{fragment.source}\x01{fragment.content}" for fragment in selection.admitted
    )
    digest = hashlib.sha256(material.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:_REVISION_HEX_CHARS]


class KnowledgeRetriever(Protocol):
    """The port a vector-store adapter satisfies.

    ``retrieve`` should return up to ``limit`` fragments, in any order. The bridge ranks and
    caps whatever comes back itself, so an adapter that returns more is wasteful, not unsafe.
    It is synchronous on purpose: the compiler reads sources synchronously, and an async store
    is adapted once at the composition root rather than turning every prompt into a coroutine.
    """

    def retrieve(self, query: str, *, limit: int) -> Sequence[RetrievedFragment]: ...


@dataclass(frozen=True)
class KnowledgeSource:
    """A context source backed by a retrieval store.

    With ``scope_in_query`` the retriever receives ``scope_path + SCOPE_QUERY_SEPARATOR +
    query`` — always, even when the scope path is empty — so a store can key on the scope. The
    prefix is unconditional and a scope path containing a line break is refused, because
    otherwise a user's query could carry a line that the store would read as someone else's
    scope. The retriever is asked for ``policy.limit`` fragments: a fragment the bridge then
    drops is not replaced, but the store is never asked for work that cannot render.
    """

    retriever: KnowledgeRetriever
    query: str
    policy: RetrievalPolicy = DEFAULT_RETRIEVAL_POLICY
    scope_aware: bool = False
    offline_safe: bool = False
    scope_in_query: bool = False

    def __post_init__(self) -> None:
        if not callable(getattr(self.retriever, "retrieve", None)):
            raise BridgeContractError(
                f"{type(self.retriever).__name__} has no callable retrieve(); a knowledge "
                "source needs a KnowledgeRetriever."
            )
        if not isinstance(self.query, str):
            raise BridgeContractError("KnowledgeSource.query must be a str")

    def _query_for(self, request: ContextRequest) -> str:
        if not self.scope_in_query:
            return self.query
        if _LINE_BREAK.search(request.scope_path):
            raise IngestionRejected(
                "the scope path contains a line break; folded into the query it would let the "
                "store read part of it as the query and part of the query as a scope."
            )
        return f"{request.scope_path}{SCOPE_QUERY_SEPARATOR}{self.query}"

    def select(self, request: ContextRequest) -> FragmentSelection:
        """Retrieve for ``request`` and select under the policy, keeping the drop reasons.

        Returned whole (rather than as text) so a composition root can number citations from
        ``admitted`` and report ``dropped`` to an operator.
        """
        fragments = self.retriever.retrieve(self._query_for(request), limit=self.policy.limit)
        return select_fragments(fragments, self.policy)

    def read(self, request: ContextRequest) -> ContextRead:
        selection = self.select(request)
        return ContextRead(
            text=render_fragments(selection),
            revision=selection_revision(selection),
            untrusted=True,
        )


def knowledge_contribution(
    contribution_id: str,
    source: KnowledgeSource,
    *,
    order: int = 0,
    scope: str | None = None,
) -> ContextContribution:
    """Declare a retrieval as per-turn (L2), session-tier context: it answers this turn's query."""
    return session_contribution(contribution_id, source, ContextLayer.L2, order=order, scope=scope)
