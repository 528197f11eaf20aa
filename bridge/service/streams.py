"""The bridge's Redis Streams protocol: requests at least once, one result per request id.

Every change of state that must not be half done (publish, dead letter, renew, a bounded read)
is one Lua script, which Redis runs atomically. See docs/bridge-service.md, Delivery.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis import Redis, ResponseError

from bridge.service.config import ServiceConfig
from bridge.service.schema import RESULT_FIELD

SELECTION_KEY_PREFIX = "airlock:selection:"
#: The id before every entry: where a scan of the pending list starts, and the cursor
#: XAUTOCLAIM returns once it scanned the whole list.
SCAN_START = "0-0"
#: How often a bridge with nothing to read looks again: the latency an idle bridge adds.
_POLL_SECONDS = 0.05
#: Field names and the envelope of an entry, beyond the request cap itself.
_ENTRY_OVERHEAD_BYTES = 1024

_READ = """
local reply, cursor = {}, ''
if ARGV[2] == 'claim' then
  local claimed = redis.call('XAUTOCLAIM', KEYS[1], ARGV[3], ARGV[4], ARGV[5], ARGV[6],
                             'COUNT', ARGV[7])
  cursor, reply = claimed[1], claimed[2]
else
  local read = redis.call('XREADGROUP', 'GROUP', ARGV[3], ARGV[4], 'COUNT', ARGV[7],
                          'STREAMS', KEYS[1], ARGV[6])
  if read then reply = read[1][2] end
end
local cap, out = tonumber(ARGV[1]), {}
for i, entry in ipairs(reply) do
  local fields, size = entry[2], 0
  if fields then
    for _, part in ipairs(fields) do size = size + #part end
  else
    fields = {}
  end
  if size > cap then fields = {} end
  out[i] = {entry[1], fields, size}
end
return {cursor, out}
"""

_PUBLISH = """
local acked = redis.call('XACK', KEYS[3], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[3], ARGV[2])
if acked == 1 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', ARGV[6], ARGV[3])
  redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
  return 1
end
return 0
"""

_DEAD_LETTER = """
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
if acked == 1 then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'entry_id', ARGV[2], 'reason', ARGV[3])
end
return acked
"""

_RENEW = """
local renewed = 0
for i = 3, #ARGV do
  if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2]) == 1 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    renewed = renewed + 1
  end
end
return renewed
"""


def selection_key(request_id: str) -> str:
    return SELECTION_KEY_PREFIX + request_id


@dataclass(frozen=True)
class Entry:
    """One request stream entry as read: its id, and fields nobody has validated yet."""

    entry_id: str
    untrusted_fields: Mapping[bytes, bytes] = field(repr=False)
    #: Deleted from the stream while it was pending: there is nothing left to answer.
    deleted: bool = False
    #: The entry's size when it is over the cap: its fields were left in Redis, unread.
    oversized_bytes: int | None = None
    #: A field name occurs twice (``XADD s * request A request B``): which value is the request
    #: is a guess, and the mapping above kept only the last.
    repeats_field: bool = False


def _entries(untrusted_entries: Sequence[Any], cap: int) -> list[Entry]:
    """Entries from the read script's ``[id, [field, value, ...], size]`` triples."""
    entries = []
    for raw_id, untrusted_flat, size in untrusted_entries:
        entry_id = raw_id.decode()
        if size > cap:
            entries.append(Entry(entry_id, {}, oversized_bytes=int(size)))
            continue
        untrusted_fields = dict(zip(untrusted_flat[::2], untrusted_flat[1::2], strict=True))
        repeats_field = len(untrusted_flat) != 2 * len(untrusted_fields)
        # An entry deleted while pending comes back with no fields; XADD cannot make an entry
        # without any, so an empty one is always a deleted one.
        deleted = not untrusted_fields
        entries.append(Entry(entry_id, untrusted_fields, deleted, repeats_field=repeats_field))
    return entries


class RequestStreams:
    """The request, result and dead-letter streams of one consumer of the bridge's group."""

    def __init__(self, redis: Redis, config: ServiceConfig) -> None:
        self._redis = redis
        self._config = config
        self._publish = redis.register_script(_PUBLISH)
        self._dead_letter = redis.register_script(_DEAD_LETTER)
        self._renew = redis.register_script(_RENEW)
        self._read_script = redis.register_script(_READ)
        self.entry_cap = config.max_request_bytes + _ENTRY_OVERHEAD_BYTES

    def ensure_group(self) -> None:
        """Create the group at the start of the stream, so requests sent before any bridge
        ever ran are served too."""
        try:
            self._redis.xgroup_create(
                self._config.request_stream, self._config.group, id="0", mkstream=True
            )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _bounded(self, mode: str, position: str, count: int) -> tuple[str, list[Entry]]:
        args: list[str | int] = [
            self.entry_cap,
            mode,
            self._config.group,
            self._config.consumer,
            int(self._config.claim_idle_seconds * 1000),
            position,
            count,
        ]
        reply: Any = self._read_script(keys=[self._config.request_stream], args=args)
        cursor, untrusted_entries = reply
        return cursor.decode(), _entries(untrusted_entries, self.entry_cap)

    def read_own_pending(self, after: str, count: int) -> list[Entry]:
        """Entries this consumer was given and never settled (a restart under the same name)."""
        return self._bounded("group", after, count)[1]

    def read_new(self, count: int, block_seconds: float) -> list[Entry]:
        deadline = time.monotonic() + block_seconds
        while True:
            entries = self._bounded("group", ">", count)[1]
            if entries or time.monotonic() >= deadline:
                return entries
            time.sleep(_POLL_SECONDS)

    def claim_idle(self, cursor: str, count: int) -> tuple[str, list[Entry]]:
        """Take over entries whose lease lapsed; returns the cursor to continue from,
        :data:`SCAN_START` once the whole pending list was scanned."""
        return self._bounded("claim", cursor, count)

    def renew(self, entry_ids: Sequence[str]) -> int:
        if not entry_ids:
            return 0
        args = [self._config.group, self._config.consumer, *entry_ids]
        return int(self._renew(keys=[self._config.request_stream], args=args))

    def is_answered(self, request_id: str) -> bool:
        return bool(self._redis.exists(selection_key(request_id)))

    def publish(self, entry_id: str, request_id: str, result: str) -> bool:
        """Publish ``result`` and settle the entry atomically; False when it was already
        answered (nothing is published then, and the entry is settled all the same)."""
        keys = [selection_key(request_id), self._config.result_stream, self._config.request_stream]
        args: list[str | int] = [
            self._config.group,
            entry_id,
            result,
            self._config.result_ttl,
            self._config.stream_maxlen,
            RESULT_FIELD,
        ]
        return bool(self._publish(keys=keys, args=args))

    def acknowledge(self, entry_id: str) -> None:
        """Settle an entry without answering it: its request id was answered before (a
        duplicate), or the entry was deleted from the stream while pending."""
        with self._redis.pipeline(transaction=True) as settle:
            settle.xack(self._config.request_stream, self._config.group, entry_id)
            settle.xdel(self._config.request_stream, entry_id)
            settle.execute()

    def dead_letter(self, entry_id: str, reason: str) -> None:
        keys = [self._config.request_stream, self._config.dead_letter_stream]
        args: list[str | int] = [self._config.group, entry_id, reason, self._config.stream_maxlen]
        self._dead_letter(keys=keys, args=args)
