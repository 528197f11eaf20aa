"""A memory retrieval port, seen as the candidate source the coordinator reads.

The port has ranked already, so its order is kept (``pre_ranked``); its score becomes the
``cue`` signal and every other signal stays ``None``, because silence is not ``0.0``.
See docs/spec-decisions.md, Memory (`bridge.knowledge.memory`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from bridge.knowledge.memory.errors import MemoryContractError
from bridge.knowledge.memory.model import Candidate, MemoryLayer, MemoryQuery, RelevanceSignals
from bridge.knowledge.memory.ports import CandidateScan, MemoryRetrievalPort

#: How many candidates to ask for per result wanted. The gates run after retrieval; at 4x,
#: the limit can still be filled when three rows in four are refused.
OVERSCAN_FACTOR = 4

#: The smallest request worth making. A limit of one or two would otherwise leave the gates a
#: pool of four or eight, where a single refused row is a large share of the choice.
OVERSCAN_MINIMUM = 20


def overscan(limit: int) -> int:
    """How many candidates to request for ``limit`` results, so the gates have a choice."""
    if limit <= 0:
        return 0
    return max(OVERSCAN_MINIMUM, limit * OVERSCAN_FACTOR)


class PortCandidateSource:
    """Adapts one memory port, through its uncapped scan, to the coordinator's source seam."""

    def __init__(self, port: MemoryRetrievalPort | CandidateScan) -> None:
        if not callable(getattr(port, "scan_candidates", None)):
            # No fallback to a widened retrieve(): that is still a cap applied before the
            # gates, and because it returns plausible rows nothing would ever fail to show it.
            raise MemoryContractError(
                f"{type(port).__name__} has no scan_candidates(), so it can only be asked for "
                "a capped result. The gates run after retrieval, so a cap there makes each "
                "refused row a lost slot. Implement scan_candidates: everything admissible, "
                "not capped by the query's limit, bounded by the store's own budget."
            )
        # Checked just above; the union type cannot express "has scan_candidates".
        self._port = cast(CandidateScan, port)
        self._dropped: tuple[tuple[str, str], ...] = ()
        self._sources: Mapping[str, int] = {}
        self._unavailable: tuple[str, ...] = ()

    def drain_dropped(self) -> tuple[tuple[str, str], ...]:
        """The ``(record id, reason)`` refusals of the last search, cleared as they are read.

        ``search`` returns only candidates, so the refusals are kept here; otherwise a scope
        whose rows were all refused would look like a scope with no history. Drained, not
        accumulated, because one source serves every turn: a growing ledger would charge one
        turn's refusals to the next.
        """
        drained, self._dropped = self._dropped, ()
        return drained

    def drain_sources(self) -> tuple[Mapping[str, int], tuple[str, ...]]:
        """Rows per route in the last search, and the routes that failed; cleared as read.

        Drained for the same reason as the refusals: a tally carried over would credit one
        turn's recall to the next.
        """
        counts, self._sources = self._sources, {}
        lost, self._unavailable = self._unavailable, ()
        return counts, lost

    async def search(
        self, query: MemoryQuery, layers: frozenset[MemoryLayer]
    ) -> Sequence[Candidate]:
        """Scan the port and hand every row over, in the port's order, unfiltered by layer.

        Rows outside ``layers`` are not filtered here: a row removed here leaves no refusal in
        any ledger, and a disabled layer would make memories vanish without a reason. The
        coordinator gates by layer and records what it refuses.

        :class:`~bridge.knowledge.memory.errors.MemoryUnavailable` propagates. What a degraded store
        means for the turn is the coordinator's decision, and an empty answer here would tell
        it "nothing was remembered" instead.
        """
        # Cleared first, so a failed scan does not leave the previous turn's ledgers to be
        # drained as if they were this turn's.
        self._dropped, self._sources, self._unavailable = (), {}, ()
        result = await self._port.scan_candidates(query)
        self._dropped = tuple(result.dropped)
        # A port written before route reporting answers without these fields.
        self._sources = dict(getattr(result, "sources", None) or {})
        self._unavailable = tuple(getattr(result, "unavailable", None) or ())
        return tuple(
            Candidate(
                record=memory.record,
                signals=RelevanceSignals(cue=memory.score),
                pre_ranked=True,
            )
            for memory in result.memories
        )
