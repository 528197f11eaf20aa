"""Finds the jobs the broker lost and the ones no live worker holds, so that the caller sends
them on again.

kombu pops a message before it records it as unacknowledged, so a kill in between loses it
(celery/celery#7950); a job missed by two whole passes over the queues and the unacked hash is
declared lost. A message recorded as unacknowledged by a worker that is gone (killed with its
machine, or one that dropped it at a Redis restart) would wait for the visibility timeout,
minutes past its caller's deadline: workers say every second which messages they hold
(:func:`held_key`), and an entry nobody held on two looks :data:`ORPHAN_SECONDS` apart is put
back on its queue. A pass reads in bounded chunks, a few per look, so that no command it sends
holds Redis for long however deep the queue is. See docs/queue.md, Zero loss when a worker's
main process is killed, and A job held by no live worker.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from kombu.transport.redis import Channel
from redis import Redis

from bridge.queue.jobs import PAGE_ID_SEPARATOR

#: Every message and every unacked entry holds the task id once, as its AMQP correlation id. A
#: page task's id names its document's (ARGV[1] is the separator): a document spread over the
#: OCR workers is held while any of its pages is. ARGV[4..] are the ids looked for. An unacked
#: entry found is followed by its delivery tag (its field in the hash).
_FIND = """
local wanted = {}
for i = 4, #ARGV do wanted[ARGV[i]] = true end
local needle = '"correlation_id": "'
local function mark(raw, found, tag)
  local at = string.find(raw, needle, 1, true)
  if not at then return end
  local from = at + #needle
  local to = string.find(raw, '"', from, true)
  if not to then return end
  local id = string.sub(raw, from, to - 1)
  local held_by = id
  if not wanted[id] then
    held_by = nil
    local cut = string.find(id, ARGV[1], 1, true)
    if cut then
      local document = string.sub(id, 1, cut - 1)
      if wanted[document] then held_by = document end
    end
  end
  if not held_by then return end
  found[#found + 1] = held_by
  if tag then found[#found + 1] = tag end
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
#: cursor, then each id found in that step followed by its entry's delivery tag.
_IN_UNACKED = (
    _FIND
    + """
local reply = redis.call('HSCAN', KEYS[1], ARGV[2], 'COUNT', ARGV[3])
local found = {reply[1]}
local fields = reply[2]
for i = 2, #fields, 2 do mark(fields[i], found, fields[i - 1]) end
return found
"""
)

#: The hash where kombu keeps the messages workers hold (and the sweep restores from).
UNACKED_KEY: str = Channel.unacked_key
#: Messages read by one command: ~200 of kombu's 1-2 KB messages take a few milliseconds.
CHUNK = 200
#: Messages read by one look, every ``interval`` seconds.
BUDGET = 2000
#: How long a worker's word that it holds a message lasts. Workers renew it every second, from
#: a thread of their own, so a busy worker's word does not lapse (worker/heartbeat.py).
HELD_SECONDS = 3
#: How long an unacked entry must be held by nobody, on two looks at least this far apart,
#: before it is put back: longer than a lapsed word takes to be renewed after Redis restarts
#: (a second) and than a worker takes to say it holds a message it was just handed.
ORPHAN_SECONDS = 5.0
_HELD_PREFIX = "airlock:held:"


def held_key(delivery_tag: str) -> str:
    """The key by which a live worker says it holds the unacked entry ``delivery_tag``."""
    return f"{_HELD_PREFIX}{delivery_tag}"


@dataclass(frozen=True)
class Verdict:
    """What one finished pass found wrong with a call's unanswered jobs."""

    #: Ids that no queue and no unacked entry holds: publish them again.
    lost: tuple[str, ...] = ()
    #: Unacked entries, delivery tag to id, that no live worker has held for a while: put
    #: them back on their queues.
    orphaned: dict[str, str] = field(default_factory=dict)


@dataclass
class _Pass:
    """One walk over the unacked hash, each queue from its newest end, and the hash again.

    Read in that order, a job cannot slip past: a worker takes a message from a queue's
    oldest end (which the walk reaches last) into the unacked hash (which the walk reads again
    at the end), so a job taken before the walk reached it is found in the second read of the
    hash. New messages go in at the newest end and are no candidates of this pass. Only a job
    requeued at the newest end (its pool process died) after the walk passed it is missed, and
    the next pass finds it: a job is declared lost after two passes missed it.

    The unacked hash holds only what workers hold (a few messages a worker), so it is read
    whole for every id of the call: each of a document's pages found there is looked at.
    """

    #: Every id of the call when the pass began.
    ids: frozenset[str]
    #: The ids not found yet.
    candidates: set[str]
    #: The unacked entries of the call's jobs, delivery tag to id.
    unacked: dict[str, str] = field(default_factory=dict)
    #: Which of the steps ``unacked, queue 1, ..., queue n, unacked`` is being read, and where.
    step: int = 0
    cursor: int = 0
    done: bool = False


class Reconciler:
    """Tells one ``extract`` call which of its unanswered jobs the broker no longer holds, and
    which are held by no live worker."""

    def __init__(
        self,
        broker: Redis,
        queues: Sequence[str],
        interval: float,
        *,
        chunk: int = CHUNK,
        budget: int = BUDGET,
        unacked_key: str = UNACKED_KEY,
        orphan_seconds: float = ORPHAN_SECONDS,
    ) -> None:
        self._broker = broker
        self._unacked_key = unacked_key
        self._steps = [unacked_key, *queues, unacked_key]
        self._in_queue = broker.register_script(_IN_QUEUE)
        self._in_unacked = broker.register_script(_IN_UNACKED)
        self.interval = interval
        self._chunk = chunk
        self._budget = budget
        self._orphan_seconds = orphan_seconds
        self._pass: _Pass | None = None
        self._missed_once: set[str] = set()
        #: Unacked entries no worker held at the end of the last pass, and since when.
        self._unheld_since: dict[str, float] = {}
        #: Entries this call put back: a job is put back once at most, so a worker that says
        #: nothing (one of a release before this rule) cannot have its job taken from it
        #: again and again.
        self._put_back: set[str] = set()

    def look(self, unanswered: Collection[str]) -> Verdict:
        """Read on; at the end of a pass, the ids among ``unanswered`` that this pass and the
        previous one both missed, and the entries that nobody held on this pass and one at
        least ``orphan_seconds`` before. Empty while a pass is under way (a deep queue takes a
        few looks to walk)."""
        if not unanswered:
            self._pass = None
            self._missed_once.clear()
            self._unheld_since.clear()
            return Verdict()
        walk = self._pass or _Pass(frozenset(unanswered), set(unanswered))
        self._pass = walk
        self._read(walk, self._budget)
        if not walk.done:
            return Verdict()
        self._pass = None
        waiting = set(unanswered)
        missing = walk.candidates & waiting
        lost = sorted(missing & self._missed_once)
        self._missed_once = missing - set(lost)
        still = {tag: job for tag, job in walk.unacked.items() if job in waiting}
        return Verdict(tuple(lost), self._orphans(still))

    def put_back(self, delivery_tags: Collection[str]) -> None:
        """Note that these entries were put back on their queues."""
        self._put_back.update(delivery_tags)

    def _orphans(self, unacked: dict[str, str]) -> dict[str, str]:
        tags = sorted(set(unacked) - self._put_back)
        if tags:
            with self._broker.pipeline(transaction=False) as pipe:
                for tag in tags:
                    pipe.exists(held_key(tag))
                untrusted_held = pipe.execute()
        else:
            untrusted_held = []
        now = time.monotonic()
        unheld = [tag for tag, held in zip(tags, untrusted_held, strict=True) if not held]
        before = self._unheld_since
        self._unheld_since = {tag: before.get(tag, now) for tag in unheld}
        return {
            tag: unacked[tag]
            for tag in unheld
            if tag in before and now - before[tag] >= self._orphan_seconds
        }

    def _read(self, walk: _Pass, budget: int) -> None:
        # The first read of the unacked hash goes to its end whatever was found: every entry of
        # the call's jobs is to be looked at.
        while budget > 0 and walk.step < len(self._steps) and (walk.candidates or walk.step == 0):
            key = self._steps[walk.step]
            if key == self._unacked_key:
                wanted = [PAGE_ID_SEPARATOR, *sorted(walk.ids)]
                untrusted_reply = self._in_unacked(
                    keys=[key], args=[wanted[0], walk.cursor, self._chunk, *wanted[1:]]
                )
                next_cursor = int(untrusted_reply[0])
                finished = next_cursor == 0
                found = [_text(raw) for raw in untrusted_reply[1:]]
                walk.unacked.update(zip(found[1::2], found[::2], strict=True))
                walk.candidates -= set(found[::2])
            else:
                wanted = [PAGE_ID_SEPARATOR, *sorted(walk.candidates)]
                last = walk.cursor + self._chunk - 1
                untrusted_reply = self._in_queue(
                    keys=[key], args=[wanted[0], walk.cursor, last, *wanted[1:]]
                )
                next_cursor = last + 1
                finished = next_cursor >= int(untrusted_reply[0])
                walk.candidates -= {_text(raw) for raw in untrusted_reply[1:]}
            budget -= self._chunk
            walk.step, walk.cursor = (walk.step + 1, 0) if finished else (walk.step, next_cursor)
        walk.done = walk.step >= len(self._steps) or (not walk.candidates and walk.step > 0)


def _text(raw: object) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
