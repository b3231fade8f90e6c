"""The Lua scripts: every write is a compare-and-set on the row's version.

One call of ``BATCH`` writes many rows (up to ``batch.CHUNK_ROWS``), so the version
check costs one script call per batch, not one per event. Keys of a row: its value (a
JSON string or a hash, as users read it) and its version (``_cdc_version:<key>``); each
table's truncate marker (a hash: ``version``, ``done``) is read once per call. Within a
row, checks come first and writes last (a script's writes before an error are not
undone), the version last of all. Every key a call touches is declared in ``KEYS``; a
call touches many keys, so it is meant for one Redis node (in Redis Cluster the keys of
a call would have to share a hash slot).

The version lives in its own key, not in the value: a delete must leave a tombstone
version without leaving a value key behind (a reader's ``GET``/``EXISTS`` must see the
row gone), the version must outlive a value's TTL, and readers see only the row. The
cost is one small key per row.

Versions travel as 20-digit decimal text. Lua numbers are doubles, exact only up to 2^53,
and versions go up to 2^63: two versions are compared as doubles first (rounding keeps
their order, so unequal doubles decide), and as two exact 10-digit halves when the
doubles tie.

``KEYS``: the call's truncate markers (``ARGV[4]`` of them), then per row its value key
and version key. ``ARGV[1]`` value TTL in ms (``0``: none), ``ARGV[2]`` a value's
version-key TTL in ms, ``ARGV[3]`` a tombstone's (``0``: none), ``ARGV[4]`` the number
of markers; then per row: its kind, its marker's number, its version, and the kind's own
arguments:

- ``j`` (JSON): the value;
- ``J`` (JSON merged with the stored value): the version read before merging (``none``:
  there was no version key), then the value;
- ``h`` (hash): ``n``, the names of the ``n`` fields to keep from the stored hash
  (unchanged TOAST), ``m``, then ``m`` strings: field, value, field, value...;
- ``d`` (delete): nothing.

A row is written unless it is stale (a newer version is stored, or its table was
truncated at a newer version). An equal version is written again, like OpenSearch's
``external_gte``: replaying the same event writes the same value, and two events of one
key past the 1023rd of a transaction share a version (``connectors.contract.version_of``)
yet the later one must still land when it comes in a later batch.

The reply lists only the rows not written for a reason the caller must know, as pairs:
the row's number in the call (from 1) and either ``MOVED`` (the stored version moved
since the caller read it) or the error Redis gave for that row (``WRONGTYPE``...; the
other rows are written). An error that may pass (out of memory, read-only replica...)
ends the call with that error instead: every write being versioned, the caller retries.
"""

from __future__ import annotations

from .errors import TRANSIENT_REPLIES

VERSION_DIGITS = 20
MOVED = b"MOVED"

_OLDER = """
local function older(a, b)
  local x, y = tonumber(a), tonumber(b)
  if x ~= y then return x < y end  -- rounding keeps order: only a tie needs more digits
  local a_high, b_high = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  if a_high ~= b_high then return a_high < b_high end
  return tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11))
end
"""

BATCH = _OLDER + """
local ttl, value_version_ttl, tombstone_ttl = tonumber(ARGV[1]), tonumber(ARGV[2]),
  tonumber(ARGV[3])
local markers = tonumber(ARGV[4])
local truncated = {}
for m = 1, markers do truncated[m] = redis.call('HGET', KEYS[m], 'version') end

local function set_version(version_key, version, version_ttl)
  if version_ttl > 0 then
    redis.call('SET', version_key, version, 'PX', version_ttl)
  else
    redis.call('SET', version_key, version)
  end
end

local function set_json(key, value, version_key, version)
  if ttl > 0 then
    redis.call('SET', key, value, 'PX', ttl)
    set_version(version_key, version, value_version_ttl)
  elseif value_version_ttl > 0 then
    redis.call('SET', key, value)
    set_version(version_key, version, value_version_ttl)
  else
    redis.call('MSET', key, value, version_key, version)  -- no TTL: one call for both
  end
end

local function set_hash(key, at)
  local keep = tonumber(ARGV[at])
  local first = at + keep + 2
  local fields = {}
  for i = first, first + tonumber(ARGV[at + keep + 1]) - 1 do fields[#fields + 1] = ARGV[i] end
  if keep > 0 then
    local names = {}
    for i = 1, keep do names[i] = ARGV[at + i] end
    local kept = redis.call('HMGET', key, unpack(names))
    for i = 1, keep do
      if kept[i] then
        fields[#fields + 1] = names[i]
        fields[#fields + 1] = kept[i]
      end
    end
  end
  redis.call('DEL', key)
  if #fields > 0 then
    redis.call('HSET', key, unpack(fields))
    if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  end
end

local function write(kind, key, version_key, version, truncated_at, at)
  if truncated_at and older(version, truncated_at) then return 0 end
  local stored = redis.call('GET', version_key)
  if stored and older(version, stored) then return 0 end
  if kind == 'j' then
    set_json(key, ARGV[at], version_key, version)
  elseif kind == 'J' then
    if (stored or 'none') ~= ARGV[at] then return 2 end
    set_json(key, ARGV[at + 1], version_key, version)
  elseif kind == 'h' then
    set_hash(key, at)
    set_version(version_key, version, value_version_ttl)
  else
    redis.call('DEL', key)
    set_version(version_key, version, tombstone_ttl)
  end
  return 1
end

local transient = {TRANSIENT_REPLIES}
local function passes(message)
  for _, prefix in ipairs(transient) do
    if string.sub(message, 1, #prefix) == prefix then return true end
  end
  return false
end

local out, at, k, row, last = {}, 5, markers + 1, 0, #ARGV
while at <= last do
  row = row + 1
  local kind, marker, version, first = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2], at + 3
  if kind == 'j' then
    at = first + 1
  elseif kind == 'J' then
    at = first + 2
  elseif kind == 'h' then
    local keep = tonumber(ARGV[first])
    at = first + keep + 2 + tonumber(ARGV[first + keep + 1])
  else
    at = first
  end
  local ok, result = pcall(write, kind, KEYS[k], KEYS[k + 1], version, truncated[marker], first)
  k = k + 2
  if not ok then
    local message = type(result) == 'table' and result.err or tostring(result)
    if passes(message) then return redis.error_reply(message) end
    out[#out + 1] = row
    out[#out + 1] = message
  elseif result == 2 then
    out[#out + 1] = row
    out[#out + 1] = 'MOVED'
  end
end
return out
""".replace("TRANSIENT_REPLIES", ", ".join(f"'{reply}'" for reply in TRANSIENT_REPLIES))

UNLINK_NOT_NEWER = _OLDER + """
-- truncate: unlink each of KEYS (value or version keys) unless its row's version
-- (ARGV[2] .. key for a value key) is newer than the truncate's version ARGV[1]
local deleted = 0
for _, key in ipairs(KEYS) do
  local version_key = key
  if string.sub(key, 1, #ARGV[2]) ~= ARGV[2] then version_key = ARGV[2] .. key end
  local stored = redis.call('GET', version_key)
  if not stored or not older(ARGV[1], stored) then
    deleted = deleted + redis.call('UNLINK', key)
  end
end
return deleted
"""


def version_text(version: int) -> str:
    """``version`` as the fixed-width text the scripts compare."""
    return f"{version:0{VERSION_DIGITS}d}"
