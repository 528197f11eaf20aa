"""The values the memory seams exchange: queries, records, results and candidates.

See docs/spec-decisions.md, Memory (`bridge.knowledge.memory`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class MemoryLayer(StrEnum):
    """Which kind of memory a record belongs to; a deployment can disable any of them."""

    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


@dataclass(frozen=True)
class MemoryQuery:
    """What is being recalled (``text``), for whom (``scope_path``), and how many results."""

    text: str
    limit: int = 5
    scope_path: str = ""


@dataclass(frozen=True)
class MemoryRecord:
    """One remembered item, as the store holds it."""

    record_id: str
    layer: MemoryLayer
    content: str


@dataclass(frozen=True)
class ScoredMemory:
    """A record with the store's similarity of it to the query."""

    record: MemoryRecord
    score: float


@dataclass(frozen=True)
class RetrievalResult:
    """A port's answer: ranked memories, plus an account of what did not make it.

    ``dropped`` is ``(record id, reason)`` for each row refused (for example on provenance);
    ``sources`` counts rows per retrieval route and ``unavailable`` names routes that failed,
    so "this route was down" is never mistaken for "this route had nothing".
    """

    memories: tuple[ScoredMemory, ...] = ()
    dropped: tuple[tuple[str, str], ...] = ()
    sources: Mapping[str, int] = field(default_factory=dict, hash=False)
    unavailable: tuple[str, ...] = ()


@dataclass(frozen=True)
class RelevanceSignals:
    """How relevant a candidate is, signal by signal; ``None`` means the store cannot say.

    ``None`` is not ``0.0``. A store that never measured recency has not observed that a
    memory is old, and a ranker that read silence as a zero would penalise it for that.
    """

    cue: float | None = None
    recency: float | None = None
    salience: float | None = None
    frequency: float | None = None


@dataclass(frozen=True)
class Candidate:
    """One row offered to the coordinator, which gates, ranks and blends it.

    ``pre_ranked`` says the source's order is already a ranking the coordinator should keep
    rather than re-derive from the signals.
    """

    record: MemoryRecord
    signals: RelevanceSignals
    pre_ranked: bool = False
