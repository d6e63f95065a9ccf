-- Validation of acct.open()'s configuration table. Strict, like the C side (STYLE.md rule
-- 12): an unknown key is an error (a typo must not silently fall back to a default), and
-- every value is checked for its type here; ranges are checked by ra_meter_open, whose
-- message is passed through, so limits live in one place (the C core).
--
-- The defaults, in one place (they equal ra_config_init's; a spec checks that):
--
--   window_len_s        300      seconds per window, 60..3600 (I-3); fixed for the life of
--                                the meter and of a shm plane (G-21)
--   shards              64       power of two, 1..4096
--   capacity_rows       200000   live (key, window) rows across shards (I-7)
--   pending_slices_cap  8192     sealed, un-ACKed slices held (I-7)
--   dimensions          {}       extra dimension names after the built-ins bytes, requests,
--                                cpu_units: [a-z][a-z0-9_]*, at most 32 bytes, 32 in all
--   amnesia             true     slices live in RAM only and say so; no file is written
--                       (false   (I-9). With `wal`, the default is false: sealed slices are
--                       with wal) durable until ACKed (I-10). false without `wal` only
--                                for a process that records into a `shm` plane another
--                                process seals
--   wal                 nil      { dir = path, max_bytes = 512 MiB, max_entries =
--                                200000 (beyond pending_slices_cap: the backlog on
--                                disk), max_age_s = 86400 (0: no limit) }: this process
--                                seals and keeps sealed slices in a write-ahead log
--   shm                 nil      path of a process-shared counter plane (created if absent)
--   clock               nil      function returning UTC seconds (may be fractional); nil:
--                                the C core reads the system clock
--   host                nil      host name carried in slice meta; nil: gethostname()
--   subject_key         nil      64 hex characters: the 32-byte key of subject hashing;
--                                nil: the built-in key (anyone can recompute the mapping)
local _M = {}

local floor = math.floor
local format = string.format
local pairs = pairs
local tostring = tostring
local type = type

_M.DEFAULTS = {
    window_len_s = 300,
    shards = 64,
    capacity_rows = 200000,
    pending_slices_cap = 8192,
    dimensions = {},
    amnesia = true,
}

local WAL_KEYS = { dir = "string", max_bytes = "count", max_entries = "count",
                   max_age_s = "count" }

local U32_MAX = 4294967295

local function invalid(fmt, ...)
    return nil, "InvalidArgument: " .. format(fmt, ...)
end

-- A uint32_t field: an integral Lua number that converts to uint32_t without wrapping
-- (the FFI would silently truncate 2^32 + 300 to 300).
local function u32(name, v)
    if type(v) ~= "number" or v ~= floor(v) or v < 0 or v > U32_MAX then
        return invalid("%s must be an integer in 0..%d, got %s", name, U32_MAX, tostring(v))
    end
    return v
end

-- A string handed to C as a NUL-terminated char *: an embedded NUL would cut it short
-- after Lua validated the whole of it.
local function cstring(name, v)
    if type(v) ~= "string" then
        return invalid("%s must be a string, got %s", name, type(v))
    end
    if v:find("\0", 1, true) then return invalid("%s contains a NUL byte", name) end
    return v
end

-- The check of a key whose value is of one Lua type (what: how the message names it).
local function of_type(t, what)
    return function(name, v)
        if type(v) ~= t then return invalid("%s must be %s, got %s", name, what, type(v)) end
        return v
    end
end

local function sorted_keys(t)
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    return keys
end

local function check_wal(wal)
    if type(wal) ~= "table" then return invalid("wal must be a table, got %s", type(wal)) end
    for _, k in ipairs(sorted_keys(wal)) do
        if not WAL_KEYS[k] then return invalid("unknown key wal.%s", k) end
    end
    if wal.dir == nil then return invalid("wal.dir is required") end
    for k, kind in pairs(WAL_KEYS) do
        local v = wal[k]
        if v ~= nil then
            if kind == "string" then
                local ok, err = cstring("wal." .. k, v)
                if not ok then return nil, err end
                if v == "" then return invalid("wal.%s is empty", k) end
            elseif type(v) ~= "number" or v ~= floor(v) or v >= 2 ^ 53
                or v < (k == "max_age_s" and 0 or 1) then
                -- max_age_s = 0 is the core's "no age limit" (include/ron/accounting.h)
                return invalid("wal.%s must be a %s integer, got %s", k,
                               k == "max_age_s" and "non-negative" or "positive", tostring(v))
            end
        end
    end
    return true
end

local CHECKS = {
    window_len_s = u32,
    shards = u32,
    capacity_rows = u32,
    pending_slices_cap = u32,
    dimensions = function(name, v)
        if type(v) ~= "table" then
            return invalid("%s must be a list of names, got %s", name, type(v))
        end
        local n = #v
        for k in pairs(v) do
            if type(k) ~= "number" or k ~= floor(k) or k < 1 or k > n then
                return invalid("%s must be a list (sequence) of names, has key %s", name,
                               tostring(k))
            end
        end
        for i = 1, n do
            local ok, err = cstring(format("%s[%d]", name, i), v[i])
            if not ok then return nil, err end
        end
        return v
    end,
    amnesia = of_type("boolean", "a boolean"),
    wal = function(_, v)
        local ok, err = check_wal(v)
        if not ok then return nil, err end
        return v
    end,
    shm = function(name, v)
        local ok, err = cstring(name, v)
        if not ok then return nil, err end
        if v == "" then return invalid("%s is empty", name) end
        return v
    end,
    clock = of_type("function", "a function returning UTC seconds"),
    host = cstring,
    subject_key = function(name, v)
        if type(v) ~= "string" or #v ~= 64 or v:find("[^0-9a-fA-F]") then
            return invalid("%s must be 64 hex characters (32 bytes)", name)
        end
        return v
    end,
}

-- Returns a new table with every key set (defaults filled in) or nil, "InvalidArgument: …".
function _M.validate(cfg)
    local out = {}
    for k, v in pairs(_M.DEFAULTS) do out[k] = v end
    if cfg == nil then return out end
    -- Sorted, so the error names the same key on every run.
    for _, k in ipairs(sorted_keys(cfg)) do
        if not CHECKS[k] then return invalid("unknown configuration key '%s'", k) end
    end
    for _, k in ipairs(sorted_keys(cfg)) do
        local v, err = CHECKS[k](k, cfg[k])
        if v == nil then return nil, err end
        out[k] = v
    end
    -- Asking for a WAL is asking for durability (I-10); amnesia = true with a WAL is a
    -- contradiction the core refuses.
    if cfg.wal ~= nil and cfg.amnesia == nil then out.amnesia = false end
    return out
end

return _M
