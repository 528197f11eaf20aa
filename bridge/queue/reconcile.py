"""Finds the jobs a killed worker took with it, so that the caller publishes them again.

kombu pops a message before it records it as unacknowledged, so a kill in between loses it
(celery/celery#7950); a job missed by two whole passes over the queues and the unacked hash is
declared lost. A pass reads in bounded chunks, a few per look, so that no command it sends
holds Redis for long however deep the queue is. See docs/queue.md, Zero loss when a worker's
main process is killed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kombu.transport.redis import Channel
from redis import Redis

from bridge.queue.jobs import PAGE_ID_SEPARATOR

#: Every message and every unacked entry holds the task id once, as its AMQP correlation id. A
#: page task's id names its document's (ARGV[1] is the separator): a document spread over the
#: OCR workers is held while any of its pages is. ARGV[4..] are the ids looked for.
_FIND = """
local wanted = {}
for i = 4, #ARGV do wanted[ARGV[i]] = true end
local needle = '"correlation_id": "'
local function mark(raw, found)
  local at = string.find(raw, needle, 1, true)
  if not at then return end
  local from = at + #needle
  local to = string.find(raw, '"', from, true)
  if not to then return end
  local id = string.sub(raw, from, to - 1)
  if wanted[id] then found[#found + 1] = id end
  local cut = string.find(id, ARGV[1], 1, true)
  if cut then
    local document = string.sub(id, 1, cut - 1)
    if wanted[document] then found[#found + 1] = document end
  end
end
"""
#: A range of a queue (KEYS[1]; ARGV[2], ARGV[3]: first and last index): its length, then the
#: ids found there.
_IN_QUEUE = (
    _FIND
    + """
local found = {redis.call('LLEN', KEYS[1])}
for _, raw in ipairs(redis.call('LRANGE', KEYS[1], ARGV[2], ARGV[3])) do mark(raw, found) end
return found
"""
)
#: A step of an HSCAN of the unacked hash (KEYS[1]; ARGV[2]: cursor, ARGV[3]: count): the next
#: cursor, then the ids found in that step.
_IN_UNACKED = (
    _FIND
    + """
local reply = redis.call('HSCAN', KEYS[1], ARGV[2], 'COUNT', ARGV[3])
local found = {reply[1]}
local fields = reply[2]
for i = 2, #fields, 2 do mark(fields[i], found) end
return found
"""
)

#: The hash where kombu keeps the messages workers hold (and the sweep restores from).
UNACKED_KEY: str = Channel.unacked_key
#: Messages read by one command: ~200 of kombu's 1-2 KB messages take a few milliseconds.
CHUNK = 200
#: Messages read by one look, every ``interval`` seconds.
BUDGET = 2000


@dataclass
class _Pass:
    """One walk over the unacked hash, each queue from its newest end, and the hash again.

    Read in that order, a job cannot slip past: a worker takes a message from a queue's
    oldest end (which the walk reaches last) into the unacked hash (which the walk reads again
    at the end), so a job taken before the walk reached it is found in the second read of the
    hash. New messages go in at the newest end and are no candidates of this pass. Only a job
    requeued at the newest end (its pool process died) after the walk passed it is missed, and
    the next pass finds it: a job is declared lost after two passes missed it.
    """

    #: The ids not found yet.
    candidates: set[str]
    #: Which of the steps ``unacked, queue 1, ..., queue n, unacked`` is being read, and where.
    step: int = 0
    cursor: int = 0
    done: bool = False


class Reconciler:
    """Tells one ``extract`` call which of its unanswered jobs the broker no longer holds."""

    def __init__(
        self,
        broker: Redis,
        queues: Sequence[str],
        interval: float,
        *,
        chunk: int = CHUNK,
        budget: int = BUDGET,
        unacked_key: str = UNACKED_KEY,
    ) -> None:
        self._unacked_key = unacked_key
        self._steps = [unacked_key, *queues, unacked_key]
        self._in_queue = broker.register_script(_IN_QUEUE)
        self._in_unacked = broker.register_script(_IN_UNACKED)
        self.interval = interval
        self._chunk = chunk
        self._budget = budget
        self._pass: _Pass | None = None
        self._missed_once: set[str] = set()

    def lost(self, unanswered: Collection[str]) -> list[str]:
        """The ids among ``unanswered`` that this pass and the previous one both missed; empty
        while a pass is under way (a deep queue takes a few looks to walk)."""
        if not unanswered:
            self._pass = None
            self._missed_once.clear()
            return []
        walk = self._pass or _Pass(set(unanswered))
        self._pass = walk
        self._read(walk, self._budget)
        if not walk.done:
            return []
        self._pass = None
        missing = walk.candidates & set(unanswered)
        lost = sorted(missing & self._missed_once)
        self._missed_once = missing - set(lost)
        return lost

    def _read(self, walk: _Pass, budget: int) -> None:
        while budget > 0 and walk.candidates and walk.step < len(self._steps):
            key = self._steps[walk.step]
            wanted = [PAGE_ID_SEPARATOR, *sorted(walk.candidates)]
            if key == self._unacked_key:
                untrusted_reply = self._in_unacked(
                    keys=[key], args=[wanted[0], walk.cursor, self._chunk, *wanted[1:]]
                )
                next_cursor = int(untrusted_reply[0])
                finished = next_cursor == 0
            else:
                last = walk.cursor + self._chunk - 1
                untrusted_reply = self._in_queue(
                    keys=[key], args=[wanted[0], walk.cursor, last, *wanted[1:]]
                )
                next_cursor = last + 1
                finished = next_cursor >= int(untrusted_reply[0])
            walk.candidates -= {_text(raw) for raw in untrusted_reply[1:]}
            budget -= self._chunk
            walk.step, walk.cursor = (walk.step + 1, 0) if finished else (walk.step, next_cursor)
        walk.done = not walk.candidates or walk.step >= len(self._steps)


def _text(raw: object) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
