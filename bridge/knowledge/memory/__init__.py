"""The memory side of the knowledge capability: memory ports seen as candidate sources.

See docs/spec-decisions.md, Memory (`bridge.knowledge.memory`).
"""

from bridge.knowledge.memory.candidates import (
    OVERSCAN_FACTOR,
    OVERSCAN_MINIMUM,
    PortCandidateSource,
    overscan,
)
from bridge.knowledge.memory.errors import MemoryContractError, MemoryUnavailable
from bridge.knowledge.memory.model import (
    Candidate,
    MemoryLayer,
    MemoryQuery,
    MemoryRecord,
    RelevanceSignals,
    RetrievalResult,
    ScoredMemory,
)
from bridge.knowledge.memory.ports import CandidateScan, CandidateSource, MemoryRetrievalPort

__all__ = [
    "OVERSCAN_FACTOR",
    "OVERSCAN_MINIMUM",
    "Candidate",
    "CandidateScan",
    "CandidateSource",
    "MemoryContractError",
    "MemoryLayer",
    "MemoryQuery",
    "MemoryRecord",
    "MemoryRetrievalPort",
    "MemoryUnavailable",
    "PortCandidateSource",
    "RelevanceSignals",
    "RetrievalResult",
    "ScoredMemory",
    "overscan",
]
