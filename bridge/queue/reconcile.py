"""Finds the jobs a killed worker took with it, so that the caller publishes them again.

kombu pops a message before it records it as unacknowledged, so a kill in between loses it
(celery/celery#7950); two atomic Lua looks ``interval`` s apart that miss a job declare it
lost. See docs/queue.md, Zero loss when a worker's main process is killed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kombu.transport.redis import Channel
from redis import Redis

from bridge.queue.jobs import PAGE_ID_SEPARATOR

#: Every message and every unacked entry holds the task id once, as its AMQP correlation id. A
#: page task's id names its document's (ARGV[1] is the separator): a document spread over the
#: OCR workers is held while any of its pages is.
_SCRIPT = """
local seen = {}
local needle = '"correlation_id": "'
local function mark(raw)
  local at = string.find(raw, needle, 1, true)
  if at then
    local from = at + #needle
    local to = string.find(raw, '"', from, true)
    if to then
      local id = string.sub(raw, from, to - 1)
      seen[id] = true
      local cut = string.find(id, ARGV[1], 1, true)
      if cut then seen[string.sub(id, 1, cut - 1)] = true end
    end
  end
end
for i = 1, #KEYS - 1 do
  for _, raw in ipairs(redis.call('LRANGE', KEYS[i], 0, -1)) do mark(raw) end
end
for _, raw in ipairs(redis.call('HVALS', KEYS[#KEYS])) do mark(raw) end
local missing = {}
for i = 2, #ARGV do
  if not seen[ARGV[i]] then missing[#missing + 1] = ARGV[i] end
end
return missing
"""

#: The hash where kombu keeps the messages workers hold (and the sweep restores from).
UNACKED_KEY: str = Channel.unacked_key


class Reconciler:
    """Tells one ``extract`` call which of its unanswered jobs the broker no longer holds."""

    def __init__(self, broker: Redis, queues: Sequence[str], interval: float) -> None:
        self._broker = broker
        self._keys = [*queues, UNACKED_KEY]
        self._script = broker.register_script(_SCRIPT)
        self.interval = interval
        self._missed_once: set[str] = set()

    def lost(self, unanswered: Collection[str]) -> list[str]:
        """The ids among ``unanswered`` that this look and the previous one both missed."""
        if not unanswered:
            self._missed_once.clear()
            return []
        missing = {
            raw.decode() if isinstance(raw, bytes) else str(raw)
            for raw in self._script(keys=self._keys, args=[PAGE_ID_SEPARATOR, *unanswered])
        }
        lost = sorted(missing & self._missed_once)
        self._missed_once = missing - set(lost)
        return lost
