"""The Lua scripts: every write is a compare-and-set on the row's version.

Keys of one row: ``KEYS[1]`` the value (a JSON string or a hash, as users read it),
``KEYS[2]`` its version (``_cdc_version:<key>``), ``KEYS[3]`` the table's truncate marker
(a hash: ``version``, ``done``). Checks come first and writes last (a script's writes
before an error are not undone), the version last of all.

The version lives in its own key, not in the value: a delete must leave a tombstone
version without leaving a value key behind (a reader's ``GET``/``EXISTS`` must see the
row gone), the version must outlive a value's TTL, and readers see only the row. The
cost is one small key per row.

Versions travel as 20-digit decimal text and are compared as two 10-digit halves: Lua
numbers are doubles, exact only up to 2^53, and versions go up to 2^63.

Arguments: ``ARGV[1]`` version, ``ARGV[2]`` value TTL in ms (``0``: none), ``ARGV[3]``
version-key TTL in ms (``0``: none), ``ARGV[4]`` the version the caller read before
merging (``''``: no check, ``none``: no version key), then the script's own.
Results: ``1`` written, ``0`` stale (a newer version is stored, or the table was
truncated at a newer version), ``2`` the stored version moved since the caller read it.
An equal version is written again, like OpenSearch's ``external_gte``: replaying the
same event writes the same value, and two events of one key past the 1023rd of a
transaction share a version (``connectors.contract.version_of``) yet the later one must
still land when it comes in a later batch.
"""

from __future__ import annotations

VERSION_DIGITS = 20

_PRELUDE = """
local function older(a, b)
  local a_high, b_high = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  if a_high ~= b_high then return a_high < b_high end
  return tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11))
end
local version, ttl, version_ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local truncated = redis.call('HGET', KEYS[3], 'version')
if truncated and older(version, truncated) then return 0 end
local stored = redis.call('GET', KEYS[2])
if stored and older(version, stored) then return 0 end
if ARGV[4] ~= '' and (stored or 'none') ~= ARGV[4] then return 2 end
local function set_version()
  if version_ttl > 0 then
    redis.call('SET', KEYS[2], version, 'PX', version_ttl)
  else
    redis.call('SET', KEYS[2], version)
  end
end
"""

SET_JSON = _PRELUDE + """
-- ARGV[5]: the row as a JSON string
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[5], 'PX', ttl)
else
  redis.call('SET', KEYS[1], ARGV[5])
end
set_version()
return 1
"""

SET_HASH = _PRELUDE + """
-- ARGV[5]: n, the number of fields to keep from the stored hash (unchanged TOAST);
-- ARGV[6 .. 5+n]: their names; then field, value pairs of the new row
local keep = tonumber(ARGV[5])
local fields = {}
for i = 6 + keep, #ARGV do fields[#fields + 1] = ARGV[i] end
if keep > 0 then
  local names = {}
  for i = 1, keep do names[i] = ARGV[5 + i] end
  local values = redis.call('HMGET', KEYS[1], unpack(names))
  for i = 1, keep do
    if values[i] then
      fields[#fields + 1] = names[i]
      fields[#fields + 1] = values[i]
    end
  end
end
redis.call('DEL', KEYS[1])
if #fields > 0 then
  redis.call('HSET', KEYS[1], unpack(fields))
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
end
set_version()
return 1
"""

DELETE = _PRELUDE + """
redis.call('DEL', KEYS[1])
set_version()
return 1
"""

UNLINK_NOT_NEWER = """
-- truncate: unlink each of KEYS (value or version keys) unless its row's version
-- (ARGV[2] .. key for a value key) is newer than the truncate's version ARGV[1]
local function older(a, b)
  local a_high, b_high = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  if a_high ~= b_high then return a_high < b_high end
  return tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11))
end
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

WRITTEN, STALE, MOVED = 1, 0, 2


def version_text(version: int) -> str:
    """``version`` as the fixed-width text the scripts compare."""
    return f"{version:0{VERSION_DIGITS}d}"
