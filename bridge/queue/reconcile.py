"""Finding the jobs a killed worker took with it, so that the caller publishes them again.

kombu's Redis transport pops a message (``BRPOP``) before it records it as unacknowledged
(``HSET unacked``); a worker main process killed between the two, or with the popped reply
still unread in its socket, takes the message with it, and no visibility timeout ever brings it
back (celery/celery#7950, celery/kombu#305). Everywhere else a job is recoverable: waiting in
its queue, or in the ``unacked`` hash from the moment a worker holds it until it has stored
its answer (``acks_late``), from where the restore sweep puts it back after the visibility
timeout. So a job that has no final answer and is in no queue and no unacked entry is lost,
and only its caller, who still holds the job, can send it again.

One Lua script looks at the queues and the hash in one atomic step, so a message moving
between them (a restore, a retry, an OCR hand-off) is never seen in neither. A job is declared
lost only when two looks ``interval`` seconds apart both miss it, so a message inside a live
worker's BRPOP window (microseconds) is not published twice.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kombu.transport.redis import Channel
from redis import Redis

#: Every message and every unacked entry holds the task id once, as its AMQP correlation id.
_SCRIPT = """
local seen = {}
local needle = '"correlation_id": "'
local function mark(raw)
  local at = string.find(raw, needle, 1, true)
  if at then
    local from = at + #needle
    local to = string.find(raw, '"', from, true)
    if to then seen[string.sub(raw, from, to - 1)] = true end
  end
end
for i = 1, #KEYS - 1 do
  for _, raw in ipairs(redis.call('LRANGE', KEYS[i], 0, -1)) do mark(raw) end
end
for _, raw in ipairs(redis.call('HVALS', KEYS[#KEYS])) do mark(raw) end
local missing = {}
for _, id in ipairs(ARGV) do
  if not seen[id] then missing[#missing + 1] = id end
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
            for raw in self._script(keys=self._keys, args=list(unanswered))
        }
        lost = sorted(missing & self._missed_once)
        self._missed_once = missing - set(lost)
        return lost
