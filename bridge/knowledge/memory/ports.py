"""The memory seams, as protocols: what a store implements and what the coordinator reads.

See docs/spec-decisions.md, Memory (`bridge.knowledge.memory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bridge.knowledge.memory.model import Candidate, MemoryLayer, MemoryQuery, RetrievalResult


class MemoryRetrievalPort(Protocol):
    """A store's public retrieval: ranked and capped at the query's limit."""

    async def retrieve(self, query: MemoryQuery) -> RetrievalResult:
        """The best ``query.limit`` memories for ``query``."""
        ...


class CandidateScan(Protocol):
    """A store's uncapped scan, for a caller that gates before it caps.

    Bounded by the store's own budget, not by the query's limit: a cap applied before the
    gates turns every refused row into a lost slot.
    """

    async def scan_candidates(self, query: MemoryQuery) -> RetrievalResult:
        """Everything admissible for ``query``, ranked, within the store's budget."""
        ...


class CandidateSource(Protocol):
    """What the coordinator reads candidates from; it applies the layer gates itself."""

    async def search(
        self, query: MemoryQuery, layers: frozenset[MemoryLayer]
    ) -> Sequence[Candidate]:
        """Candidates for ``query``; rows outside ``layers`` are the coordinator's to refuse."""
        ...
