"""The bridge's Redis Streams protocol: requests at least once, one result per request id.

Every change of state that must not be half done (intake, publish, dead letter, renew, a
bounded read) is one Lua script, which Redis runs atomically. The request stream is written
only by the bridge's intake (from the clients' inbox slots, bridge.service.tenants) and by
trusted `worker`-user callers, never by a client: an entry ID, a field count or a size a client
chose never reaches it. See docs/bridge-service.md, Delivery and Trust.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis import Redis, ResponseError
from redis.exceptions import NoPermissionError

from bridge.service import metrics as service_metrics
from bridge.service import tenants
from bridge.service.config import ServiceConfig
from bridge.service.schema import RESULT_FIELD

#: The field of an intake entry naming the tenant whose slot it came from.
TENANT_FIELD = b"tenant"

SELECTION_KEY_PREFIX = "airlock:selection:"
#: The id before every entry: where a scan of the pending list starts, and the cursor
#: XAUTOCLAIM returns once it scanned the whole list.
SCAN_START = "0-0"
#: How often a bridge with nothing to read looks again: the latency an idle bridge adds.
_POLL_SECONDS = 0.05
#: Field names and the envelope of an entry, beyond the request cap itself.
_ENTRY_OVERHEAD_BYTES = 1024
#: How often the tenant list is read again: a tenant added (a Redis restarted with a new user)
#: is served after at most this long.
_TENANTS_REFRESH_SECONDS = 5.0

_log = logging.getLogger(__name__)

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

# ARGV from 7: each tenant's name, held set and slot key prefix (bridge.service.tenants).
# One request per tenant per call, tenants in the order given (the caller rotates it), each
# only while it holds fewer than its quota of unsettled entries: a flooding client gets one
# turn in each round like every other, and at most its quota of the bridges' work. A slot's
# size is measured before its value is copied, and an oversized one is deleted unread. Held
# ids neither pending nor still to be read (an entry XAUTOCLAIM dropped, one deleted by hand)
# are pruned when the tenant is at its quota, so a lost settle cannot block a tenant for ever.
_INTAKE = """
local stream, dead = KEYS[1], KEYS[2]
local cap, slots, quota, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
                                  tonumber(ARGV[4])
local group, maxlen = ARGV[5], ARGV[6]
local delivered
local function newer(a, b)
  local ams, aseq = string.match(a, '^(%d+)-(%d+)$')
  local bms, bseq = string.match(b, '^(%d+)-(%d+)$')
  ams, aseq, bms, bseq = tonumber(ams), tonumber(aseq), tonumber(bms), tonumber(bseq)
  return ams > bms or (ams == bms and aseq > bseq)
end
local function live(id)
  if #redis.call('XPENDING', stream, group, id, id, 1) == 1 then return true end
  if delivered == nil then
    delivered = '0-0'
    for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
      local fields = {}
      for j = 1, #info, 2 do fields[info[j]] = info[j + 1] end
      if fields['name'] == group then delivered = fields['last-delivered-id'] end
    end
  end
  return newer(id, delivered)
end
local function held_count(held)
  local n = redis.call('SCARD', held)
  if n < quota then return n end
  for _, id in ipairs(redis.call('SMEMBERS', held)) do
    if not live(id) then redis.call('SREM', held, id); n = n - 1 end
  end
  return n
end
local taken, refused = 0, {}
for i = 7, #ARGV, 3 do
  if taken >= budget then break end
  local tenant, held, slot_prefix = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if held_count(held) < quota then
    for slot = 0, slots - 1 do
      local key = slot_prefix .. slot
      local kind = redis.call('TYPE', key)['ok']
      if kind ~= 'none' then
        local size = kind == 'string' and redis.call('STRLEN', key) or -1
        if size < 0 or size > cap then
          redis.call('DEL', key)
          local reason = 'the request is ' .. size .. ' bytes, over the request cap of ' .. cap
                         .. ' bytes (AIRLOCK_BRIDGE_MAX_REQUEST_MB); it was not read'
          if size < 0 then reason = 'the slot held a ' .. kind .. ', not a string' end
          redis.call('XADD', dead, 'MAXLEN', '~', maxlen, '*', 'tenant', tenant, 'slot', slot,
                     'reason', reason)
          refused[#refused + 1] = tenant .. ':' .. slot .. ': ' .. reason
        else
          local id = redis.call('XADD', stream, '*', 'request', redis.call('GET', key),
                                'tenant', tenant)
          redis.call('SADD', held, id)
          redis.call('DEL', key)
          taken = taken + 1
          break
        end
      end
    end
  end
end
return {taken, refused}
"""

_PUBLISH = """
if KEYS[4] then redis.call('SREM', KEYS[4], ARGV[2]) end
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
if KEYS[3] then redis.call('SREM', KEYS[3], ARGV[2]) end
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
    #: The client tenant whose inbox slot the intake took it from; None for an entry a
    #: `worker`-user caller added itself, answered under the shared keys.
    tenant: str | None = None


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
        # A tenant field that names no tenant stays among the fields, and the request's shape
        # check refuses the entry: its key names would be guesses.
        named = untrusted_fields.get(TENANT_FIELD, b"").decode("ascii", "replace")
        tenant = named if tenants.is_tenant(named) else None
        if tenant is not None:
            del untrusted_fields[TENANT_FIELD]
        entries.append(
            Entry(entry_id, untrusted_fields, deleted, repeats_field=repeats_field, tenant=tenant)
        )
    return entries


class RequestStreams:
    """The request, result and dead-letter streams of one consumer of the bridge's group,
    and the intake from the clients' inbox slots."""

    def __init__(self, redis: Redis, config: ServiceConfig) -> None:
        self._redis = redis
        self._config = config
        self._publish = redis.register_script(_PUBLISH)
        self._dead_letter = redis.register_script(_DEAD_LETTER)
        self._renew = redis.register_script(_RENEW)
        self._read_script = redis.register_script(_READ)
        self._intake = redis.register_script(_INTAKE)
        self.entry_cap = config.max_request_bytes + _ENTRY_OVERHEAD_BYTES
        self._tenants: list[str] = []
        self._tenants_due = 0.0
        self._tenants_refused = False
        self._turn = 0

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

    def forget_held(self) -> None:
        """Empty every tenant's held set: the stream they pointed into is gone (deleted by an
        operator), and its entries will never be settled."""
        if self._tenants:
            self._redis.delete(*(tenants.held_key(tenant) for tenant in self._tenants))

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

    def take_in(self, count: int) -> int:
        """Move up to ``count`` requests from the clients' slots into the request stream, one
        per tenant, starting one tenant further on each call; returns how many."""
        now = time.monotonic()
        if now >= self._tenants_due:
            self._tenants_due = now + _TENANTS_REFRESH_SECONDS
            self._tenants = self._read_tenants()
        if not self._tenants:
            return 0
        self._turn = (self._turn + 1) % len(self._tenants)
        order = self._tenants[self._turn :] + self._tenants[: self._turn]
        args: list[str | int] = [
            self.entry_cap,
            tenants.SLOTS,
            self._config.client_quota,
            count,
            self._config.group,
            self._config.stream_maxlen,
            *(
                part
                for tenant in order
                for part in (tenant, tenants.held_key(tenant), tenants.slot_prefix(tenant))
            ),
        ]
        keys = [self._config.request_stream, self._config.dead_letter_stream]
        taken, refused = self._intake(keys=keys, args=args)
        for reason in refused:
            service_metrics.record("dead_letter")
            _log.warning(
                "slot %s; dead-lettered", reason.decode(), extra={"outcome": "dead_letter"}
            )
        return int(taken)

    def _read_tenants(self) -> list[str]:
        """The tenants, or none (said once) when this bridge's Redis user may not list users:
        it then serves the request stream's own entries, rather than nothing at all."""
        try:
            found = tenants.tenants(self._redis)
        except NoPermissionError as exc:
            if not self._tenants_refused:
                _log.warning("no client tenant is served: %s (users.conf grants it)", exc)
            self._tenants_refused = True
            return []
        self._tenants_refused = False
        return found

    def read_new(self, count: int, block_seconds: float) -> list[Entry]:
        deadline = time.monotonic() + block_seconds
        while True:
            self.take_in(count)
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

    def _answer_keys(self, tenant: str | None, request_id: str) -> list[str]:
        """Where the answer to ``request_id`` goes: the tenant's own key and result stream, so
        no client reads another's answers nor takes another's request id first."""
        if tenant is None:
            return [selection_key(request_id), self._config.result_stream]
        return [tenants.selection_key(tenant, request_id), tenants.result_stream(tenant)]

    def _held(self, tenant: str | None) -> list[str]:
        return [] if tenant is None else [tenants.held_key(tenant)]

    def is_answered(self, tenant: str | None, request_id: str) -> bool:
        return bool(self._redis.exists(self._answer_keys(tenant, request_id)[0]))

    def publish(self, entry: Entry, request_id: str, result: str) -> bool:
        """Publish ``result`` and settle the entry atomically; False when it was already
        answered (nothing is published then, and the entry is settled all the same)."""
        keys = [
            *self._answer_keys(entry.tenant, request_id),
            self._config.request_stream,
            *self._held(entry.tenant),
        ]
        args: list[str | int] = [
            self._config.group,
            entry.entry_id,
            result,
            self._config.result_ttl,
            self._config.stream_maxlen,
            RESULT_FIELD,
        ]
        return bool(self._publish(keys=keys, args=args))

    def acknowledge(self, entry: Entry) -> None:
        """Settle an entry without answering it: its request id was answered before (a
        duplicate), or the entry was deleted from the stream while pending."""
        with self._redis.pipeline(transaction=True) as settle:
            settle.xack(self._config.request_stream, self._config.group, entry.entry_id)
            settle.xdel(self._config.request_stream, entry.entry_id)
            for held in self._held(entry.tenant):
                settle.srem(held, entry.entry_id)
            settle.execute()

    def dead_letter(self, entry: Entry, reason: str) -> None:
        keys = [
            self._config.request_stream,
            self._config.dead_letter_stream,
            *self._held(entry.tenant),
        ]
        args: list[str | int] = [
            self._config.group,
            entry.entry_id,
            reason,
            self._config.stream_maxlen,
        ]
        self._dead_letter(keys=keys, args=args)
