"""The Lua scripts: every write is a compare-and-set on the row's version.

One call of ``BATCH`` writes many rows (up to ``batch.CHUNK_ROWS``), so the version
check costs one script call per batch, not one per event. Within a call, every row's
stored version is read by one ``MGET``, and the writes without a TTL are gathered into
one ``DEL`` and one ``MSET`` sent at the end (the script's cost is mostly per Redis
command it calls, so per row it would be several times a plain ``SET``'s); the callers
never put a key in a call twice (``batch``), and a row of a key the call already wrote
sends the gathered writes first and reads its version again, so rows land in order all
the same. ``MGET`` answers nothing for a key of another type where ``GET`` fails
(``WRONGTYPE``): when a version key it found nothing in exists, the rows without a
version read theirs with ``GET``, and a foreign one rejects its row as before.
Keys of a row: its value (a JSON string or a hash, as users read it) and its version
(``_cdc_version:<key>``); each table's truncate marker (a hash: ``version``, ``done``) is
read once per call. Within a row, checks come first and writes last (a script's writes
before an error are not undone), the version with or after the value. Every key a call
touches is declared in ``KEYS``; a call touches many keys, so it is meant for one Redis
node.

On a Redis Cluster, ``BATCH_CLUSTER`` (Redis 7's ``allow-cross-slot-keys``) writes the
rows of every slot one master holds in one call: declared keys must share a slot, so a
call declares none and passes its keys at the head of ``ARGV`` (their count, then them),
and each command inside touches one key (``GET``, ``SET``, ``DEL`` per key where one node
gathers them into ``MGET``/``MSET``/``DEL``). A call whose keys do share a slot may still
declare them (redis-py then follows ``MOVED`` and ``ASK``). Every slot of a call is read
(its truncate marker) before anything is written, and a node runs a script alone, so a
call on a node that no longer holds one of its slots fails before writing; a key moved
away mid-resharding can still fail one mid-call, after the rows before it were written.

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

_BODY = """
local ttl, value_version_ttl, tombstone_ttl = tonumber(ARGV[1]), tonumber(ARGV[2]),
  tonumber(ARGV[3])
local markers = tonumber(ARGV[4])
local truncated = {}
for m = 1, markers do truncated[m] = redis.call('HGET', KEYS[m], 'version') end

-- every row's stored version (false for a key of another type too, where GET fails:
-- WRONGTYPE): when any key it found nothing in exists, the rows without a version take
-- the general path, which reads theirs with GET
local rows = (#KEYS - markers) / 2
local version_keys = {}
for i = 1, rows do version_keys[i] = KEYS[markers + 2 * i] end
local stored_versions = read_all(version_keys)
local missing = {}
for i = 1, rows do
  if not stored_versions[i] then missing[#missing + 1] = version_keys[i] end
end
local foreign = any_exists(missing)

-- writes without a TTL wait here and go out at the end as one DEL and one MSET, then the
-- tombstones with a TTL (a value goes with or before its version); the version keys
-- written are in `written`, so a row of a key written already by this call (callers cut
-- their calls before one: this is for other callers; a value key that is another row's
-- version key they must avoid) sends them first and reads its version again
local deletes, sets, tombstones, ttls = {}, {}, {}, {}
local deleted, set, tombs = 0, 0, 0  -- how many each holds
local written = {}
local function flush()
  delete_all(deletes)
  set_all(sets)
  for i = 1, tombs, 2 do
    redis.call('SET', tombstones[i], tombstones[i + 1], 'PX', ttls[(i + 1) / 2])
  end
  deletes, sets, tombstones, ttls, deleted, set, tombs = {}, {}, {}, {}, 0, 0, 0
end
local function set_version(version_key, version, version_ttl)
  if version_ttl > 0 then
    redis.call('SET', version_key, version, 'PX', version_ttl)
  else
    sets[set + 1], sets[set + 2], set = version_key, version, set + 2
  end
end

local function set_json(key, value, version_key, version)
  if ttl > 0 then
    redis.call('SET', key, value, 'PX', ttl)
    set_version(version_key, version, value_version_ttl)
  elseif value_version_ttl > 0 then
    sets[set + 1], sets[set + 2], set = key, value, set + 2
    tombstones[tombs + 1], tombstones[tombs + 2], tombs = version_key, version, tombs + 2
    ttls[tombs / 2] = value_version_ttl
  else
    sets[set + 1], sets[set + 2], sets[set + 3], sets[set + 4] = key, value, version_key, version
    set = set + 4
  end
end

local function delete(key, version_key, version)
  deletes[deleted + 1], deleted = key, deleted + 1
  if tombstone_ttl > 0 then
    tombstones[tombs + 1], tombstones[tombs + 2], tombs = version_key, version, tombs + 2
    ttls[tombs / 2] = tombstone_ttl
  else
    sets[set + 1], sets[set + 2], set = version_key, version, set + 2
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

-- the general path: 0 stale, 1 written, 2 the version moved since it was read
local function write(kind, key, version_key, version, truncated_at, at, stored, reread)
  if truncated_at and older(version, truncated_at) then return 0 end
  if reread or (not stored and foreign) then stored = redis.call('GET', version_key) end
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
    delete(key, version_key, version)
  end
  return 1
end

local transient = {TRANSIENT_REPLIES}
local function passes(message)
  if string.sub(message, 1, 4) == 'ERR ' then message = string.sub(message, 5) end
  for _, prefix in ipairs(transient) do
    if string.sub(message, 1, #prefix) == prefix then return true end
  end
  return false
end
local function message_of(result)
  return type(result) == 'table' and result.err or tostring(result)
end

local out, at, k, row, last = {}, 5, markers + 1, 0, #ARGV
while at <= last do
  row = row + 1
  local kind, marker, version, first = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2], at + 3
  local stored = stored_versions[row]
  local truncated_at = truncated[marker]
  local key, version_key = KEYS[k], KEYS[k + 1]
  local reread = written[version_key]
  if reread then
    local ok, result = pcall(flush)
    if not ok then return redis.error_reply(message_of(result)) end
  end
  if not reread and (kind == 'j' or kind == 'd') and (stored or not foreign) then
    -- the common rows: written unless its table was truncated at a newer version or a
    -- newer one is stored
    if (not truncated_at or not older(version, truncated_at))
        and (not stored or not older(version, stored)) then
      if kind == 'd' then
        delete(key, version_key, version)
      elseif ttl == 0 and value_version_ttl == 0 then
        sets[set + 1], sets[set + 2], sets[set + 3], sets[set + 4] =
          key, ARGV[first], version_key, version
        set = set + 4
      else
        set_json(key, ARGV[first], version_key, version)
      end
      written[version_key] = true
    end
    at = kind == 'd' and first or first + 1
  else
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
    local ok, result = pcall(write, kind, key, version_key, version, truncated_at, first,
                             stored, reread)
    if result == 1 then written[version_key] = true end
    if not ok then
      local message = message_of(result)
      if passes(message) then return redis.error_reply(message) end
      out[#out + 1] = row
      out[#out + 1] = message
    elseif result == 2 then
      out[#out + 1] = row
      out[#out + 1] = 'MOVED'
    end
  end
  k = k + 2
end
local ok, result = pcall(flush)
if not ok then return redis.error_reply(message_of(result)) end
return out
""".replace("TRANSIENT_REPLIES", ", ".join(f"'{reply}'" for reply in TRANSIENT_REPLIES))

# the multi-key commands of one Redis node, each over up to UNPACK keys
_ONE_NODE = """
local UNPACK = 2000  -- arguments per unpack (Lua's C stack holds 8000)
local function call_all(command, args)
  for from = 1, #args, UNPACK do
    redis.call(command, unpack(args, from, math.min(from + UNPACK - 1, #args)))
  end
end
local function read_all(keys)  -- MGET: false for a missing key or one of another type
  local found = {}
  for from = 1, #keys, UNPACK do
    local got = redis.call('MGET', unpack(keys, from, math.min(from + UNPACK - 1, #keys)))
    for i = 1, #got do found[from + i - 1] = got[i] end
  end
  return found
end
local function any_exists(keys)
  for from = 1, #keys, UNPACK do
    if redis.call('EXISTS', unpack(keys, from, math.min(from + UNPACK - 1, #keys))) > 0 then
      return true
    end
  end
  return false
end
local function delete_all(keys) call_all('DEL', keys) end
local function set_all(pairs) call_all('MSET', pairs) end
"""

# a cluster node's call holds keys of many slots: the keys are declared (one slot: redis-py
# follows MOVED and ASK by them) or, when none are, ARGV starts with their count and them
# (any slots of this node: Redis checks each key a command touches); a command inside
# touches one key, never several slots
_CLUSTER_NODE = """
local KEYS, ARGV = KEYS, ARGV
if #KEYS == 0 then
  local packed, count = ARGV, tonumber(ARGV[1])
  KEYS, ARGV = {}, {}
  for i = 1, count do KEYS[i] = packed[i + 1] end
  for i = count + 2, #packed do ARGV[i - count - 1] = packed[i] end
end
local function read_all(keys)
  local found = {}
  for i = 1, #keys do
    local got = redis.pcall('GET', keys[i])
    if type(got) == 'table' and got.err then
      if string.sub(got.err, 1, 9) ~= 'WRONGTYPE' then error(got) end
      got = false
    end
    found[i] = got
  end
  return found
end
local function any_exists(keys)
  for i = 1, #keys do
    if redis.call('EXISTS', keys[i]) > 0 then return true end
  end
  return false
end
local function delete_all(keys)
  for i = 1, #keys do redis.call('DEL', keys[i]) end
end
local function set_all(pairs)
  for i = 1, #pairs, 2 do redis.call('SET', pairs[i], pairs[i + 1]) end
end
"""

BATCH = _OLDER + _ONE_NODE + _BODY
# the shebang must open the script
BATCH_CLUSTER = "#!lua flags=allow-cross-slot-keys\n" + _OLDER + _CLUSTER_NODE + _BODY

UNLINK_NOT_NEWER = _OLDER + """
-- truncate: unlink each of the first ARGV[3] KEYS (value or version keys; all of them
-- without ARGV[3]) unless its row's version (ARGV[2] .. key for a value key) is newer
-- than the truncate's version ARGV[1]. The KEYS after them are the value keys' version
-- keys, only declared: on a cluster whose slot is being migrated, a call whose keys are
-- split between the two masters is refused (TRYAGAIN) instead of reading a version key
-- the master it runs on does not hold yet
local deleted = 0
local count = tonumber(ARGV[3]) or #KEYS
for i = 1, count do
  local key = KEYS[i]
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
