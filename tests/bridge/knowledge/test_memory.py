"""PortCandidateSource: a memory port, translated honestly into the coordinator's source seam."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from bridge.knowledge.errors import BridgeContractError, KnowledgeBridgeError
from bridge.knowledge.memory import (
    OVERSCAN_FACTOR,
    OVERSCAN_MINIMUM,
    Candidate,
    CandidateSource,
    MemoryContractError,
    MemoryLayer,
    MemoryQuery,
    MemoryRecord,
    MemoryUnavailable,
    PortCandidateSource,
    RelevanceSignals,
    RetrievalResult,
    ScoredMemory,
    overscan,
)

ALL_LAYERS = frozenset(MemoryLayer)
EPISODE = MemoryRecord(record_id="m1", layer=MemoryLayer.EPISODIC, content="met Ana")
FACT = MemoryRecord(record_id="m2", layer=MemoryLayer.SEMANTIC, content="Ana is a nurse")
HABIT = MemoryRecord(record_id="m3", layer=MemoryLayer.PROCEDURAL, content="greets in Spanish")


class ScanningPort:
    """A port with both the capped public retrieval and the uncapped scan."""

    def __init__(self, *results: RetrievalResult | Exception) -> None:
        self.results = list(results)
        self.scanned: list[MemoryQuery] = []
        self.retrieved = 0

    async def retrieve(self, query: MemoryQuery) -> RetrievalResult:
        self.retrieved += 1
        return RetrievalResult()

    async def scan_candidates(self, query: MemoryQuery) -> RetrievalResult:
        self.scanned.append(query)
        result = self.results.pop(0)
        if isinstance(result, Exception):
            raise result
        return result


class RetrieveOnlyPort:
    async def retrieve(self, query: MemoryQuery) -> RetrievalResult:
        return RetrievalResult()


class LegacyResult:
    """A result from a port written before route reporting: no sources, no unavailable."""

    def __init__(self) -> None:
        self.memories = (ScoredMemory(EPISODE, 0.4),)
        self.dropped = (("m9", "no provenance"),)


def _search(source: PortCandidateSource, query: MemoryQuery | None = None) -> list[Candidate]:
    return list(asyncio.run(source.search(query or MemoryQuery("Ana"), ALL_LAYERS)))


def test_a_port_without_scan_is_refused_at_wiring() -> None:
    # A widened retrieve() would still cap before the gates, so there is no fallback to it.
    with pytest.raises(MemoryContractError, match="RetrieveOnlyPort has no scan_candidates"):
        PortCandidateSource(RetrieveOnlyPort())


def test_a_non_callable_scan_is_refused() -> None:
    port = RetrieveOnlyPort()
    port.scan_candidates = "not a method"  # type: ignore[attr-defined]
    with pytest.raises(MemoryContractError):
        PortCandidateSource(port)


def test_errors_belong_to_the_one_hierarchy() -> None:
    assert issubclass(MemoryContractError, BridgeContractError)
    assert issubclass(MemoryUnavailable, KnowledgeBridgeError)
    assert not issubclass(MemoryUnavailable, BridgeContractError)


def test_order_is_kept_and_score_becomes_cue_only() -> None:
    port = ScanningPort(
        RetrievalResult(memories=(ScoredMemory(FACT, 0.2), ScoredMemory(EPISODE, 0.9)))
    )
    candidates = _search(PortCandidateSource(port))
    # The port ranked already; its order is an answer and is not re-sorted by score.
    assert [candidate.record for candidate in candidates] == [FACT, EPISODE]
    assert all(candidate.pre_ranked for candidate in candidates)
    # Other signals stay None: the port never measured them, and 0.0 would claim it had.
    assert [candidate.signals for candidate in candidates] == [
        RelevanceSignals(cue=0.2),
        RelevanceSignals(cue=0.9),
    ]
    assert candidates[0].signals.recency is None
    assert candidates[0].signals.salience is None
    assert candidates[0].signals.frequency is None


def test_always_the_scan_never_the_capped_retrieve() -> None:
    port = ScanningPort(RetrievalResult())
    query = MemoryQuery("Ana", limit=1)
    _search(PortCandidateSource(port), query)
    assert port.scanned == [query]
    assert port.retrieved == 0


def test_disabled_layers_are_passed_through_for_the_coordinator_to_refuse() -> None:
    # Filtering here would make a disabled layer's memories vanish with no reason recorded.
    port = ScanningPort(
        RetrievalResult(memories=(ScoredMemory(EPISODE, 0.5), ScoredMemory(HABIT, 0.4)))
    )
    source = PortCandidateSource(port)
    candidates = asyncio.run(source.search(MemoryQuery("Ana"), frozenset({MemoryLayer.SEMANTIC})))
    assert [candidate.record for candidate in candidates] == [EPISODE, HABIT]


def test_unavailable_propagates() -> None:
    # An empty answer would read as "nothing was remembered"; an unreachable store must not.
    source = PortCandidateSource(ScanningPort(MemoryUnavailable("store down")))
    with pytest.raises(MemoryUnavailable, match="store down"):
        _search(source)


def test_dropped_is_drained_not_accumulated() -> None:
    port = ScanningPort(
        RetrievalResult(dropped=(("m7", "unattributed"),)),
        RetrievalResult(dropped=(("m8", "unattributed"),)),
    )
    source = PortCandidateSource(port)
    assert source.drain_dropped() == ()
    _search(source)
    assert source.drain_dropped() == (("m7", "unattributed"),)
    assert source.drain_dropped() == ()
    _search(source)
    # One turn's refusals are never charged to the next.
    assert source.drain_dropped() == (("m8", "unattributed"),)


def test_sources_are_drained() -> None:
    port = ScanningPort(
        RetrievalResult(sources={"vector": 2, "graph": 1}, unavailable=("keyword",))
    )
    source = PortCandidateSource(port)
    _search(source)
    counts, lost = source.drain_sources()
    assert dict(counts) == {"vector": 2, "graph": 1}
    assert lost == ("keyword",)
    assert source.drain_sources() == ({}, ())


def test_sources_are_a_snapshot_of_the_port_answer() -> None:
    tally: dict[str, int] = {"vector": 1}
    source = PortCandidateSource(ScanningPort(RetrievalResult(sources=tally)))
    _search(source)
    tally["vector"] = 99
    counts, _ = source.drain_sources()
    assert counts == {"vector": 1}


def test_a_failed_search_leaves_no_stale_ledger() -> None:
    port = ScanningPort(
        RetrievalResult(dropped=(("m7", "unattributed"),), sources={"vector": 1}),
        MemoryUnavailable("down"),
    )
    source = PortCandidateSource(port)
    _search(source)
    with pytest.raises(MemoryUnavailable):
        _search(source)
    assert source.drain_dropped() == ()
    assert source.drain_sources() == ({}, ())


def test_a_result_without_route_reporting_is_accepted() -> None:
    class LegacyPort:
        async def scan_candidates(self, query: MemoryQuery) -> LegacyResult:
            return LegacyResult()

    source = PortCandidateSource(LegacyPort())  # type: ignore[arg-type]
    assert [candidate.record for candidate in _search(source)] == [EPISODE]
    assert source.drain_dropped() == (("m9", "no provenance"),)
    counts: Mapping[str, int]
    counts, lost = source.drain_sources()
    assert (dict(counts), lost) == ({}, ())


def test_satisfies_the_candidate_source_port() -> None:
    source: CandidateSource = PortCandidateSource(ScanningPort(RetrievalResult()))
    assert asyncio.run(source.search(MemoryQuery("Ana"), ALL_LAYERS)) == ()


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (-3, 0),
        (0, 0),
        (1, OVERSCAN_MINIMUM),
        (OVERSCAN_MINIMUM // OVERSCAN_FACTOR, OVERSCAN_MINIMUM),
        (10, 10 * OVERSCAN_FACTOR),
        (100, 100 * OVERSCAN_FACTOR),
    ],
)
def test_overscan(limit: int, expected: int) -> None:
    assert overscan(limit) == expected


def test_overscan_constants() -> None:
    assert (OVERSCAN_FACTOR, OVERSCAN_MINIMUM) == (4, 20)
