-- ron.audit.config: the daemon's `audit = { ... }` block (docs/reference/config.md, "audit
-- keys"): its defaults and its check, one line per refusal. ron.audit.host re-exports them
-- (host.CONFIG_DEFAULTS, host.check_config, host.check_tokens, host.check_paths).
local ffi = require("ffi")
local audit = require("ron.audit")
local check = require("ron.base.check")
local uv = require("luv")

local format, pairs, type, tostring, pcall =
      string.format, pairs, type, tostring, pcall

local _M = {}

pcall(ffi.cdef, [[
int access(const char *path, int mode);
char *strerror(int errnum);
const char *strerrorname_np(int errnum);
]])
local W_OK = 2

-- "Read-only file system (EROFS)" for the errno of the last failed call.
local function errno_text()
    local e = ffi.errno()
    local ok, name = pcall(function() return ffi.string(ffi.C.strerrorname_np(e)) end)
    return format("%s (%s)", ffi.string(ffi.C.strerror(e)), ok and name or tostring(e))
end

-- The defaults of the keys; check() -> true | nil, "audit...: why".
_M.DEFAULTS = { dir = false, amnesia = false, key_path = false,
                checkpoint_every = 1000, queue_cap = 65536, writer_id = "ron-accounting",
                stream = "daemon", batch = 4096, interval_ms = 50,
                io_deadline_ms = 1000, rotate_bytes = 64 * 1024 * 1024,
                -- a checkpoint for what none covers at least this often (AUD-I-39)
                checkpoint_interval_ms = 60000,
                -- a failed trail retries from recover_min_ms, doubling up to
                -- recover_max_ms (0: never; AUD-I-42)
                recover_min_ms = 100, recover_max_ms = 10000,
                -- true: /readyz fails while the trail fails or sheds; false: it says
                -- so and the daemon serves (and meters) without it (AUD-I-42)
                required = false,
                -- the proof routes' bearer tokens (docs/AUDIT.md, AUD-I-41):
                -- { ["<b3 hex of a token>"] = "operator" | "<tenant>" }; false: no routes
                tokens = false,
                -- the daemon's audit_attest task (ron.node.attest); 0: off
                attest_interval_ms = 1000,
                -- the daemon's ledger feed tasks (ron.node.feed); 0: off
                feed_interval_ms = 1000,
                -- chains side by side (AUD-I-38: dir/<stream>.<i>, key_path.<i>)
                shards = 1 }
local CONFIG_RANGES = { checkpoint_every = { 0, 2 ^ 31 }, queue_cap = { 1, 2 ^ 24 },
                        batch = { 1, 8192 }, interval_ms = { 1, 60000 },
                        io_deadline_ms = { 1, 600000 }, rotate_bytes = { 4096, 2 ^ 40 },
                        checkpoint_interval_ms = { 0, 86400000 },
                        recover_min_ms = { 1, 600000 }, recover_max_ms = { 0, 3600000 },
                        attest_interval_ms = { 0, 3600000 },
                        feed_interval_ms = { 0, 3600000 }, shards = { 1, 64 } }

function _M.check(v, key)
    key = key or "audit"
    local ok, err = check.section(v, key, "{ dir = ..., key_path = ..., ... }", _M.DEFAULTS)
    if not ok or v == false then return ok, err end
    ok, err = check.ranges(v, CONFIG_RANGES, key)
    if not ok then return nil, err end
    for k, x in pairs(v) do
        if k == "amnesia" or k == "required" then
            if type(x) ~= "boolean" then return nil, format("%s.%s must be a boolean", key, k) end
        elseif k == "tokens" then
            ok, err = _M.check_tokens(x, key .. ".tokens")
            if not ok then return nil, err end
        elseif k == "writer_id" or k == "stream" then
            if type(x) ~= "string" or not x:match("^[A-Za-z0-9._-]+$") or #x > 64 then
                return nil, format("%s.%s must be 1..64 of [A-Za-z0-9._-]", key, k)
            end
        elseif not CONFIG_RANGES[k] and x ~= false and (type(x) ~= "string" or x == "") then
            return nil, format("%s.%s must be a path or false", key, k) -- dir, key_path
        end
    end
    -- AUD-I-13: amnesia forbids a log directory (refused here, as at open)
    if v.amnesia and v.dir then
        return nil, format("%s: amnesia = true forbids dir (a RAM-only trail has no log)", key)
    end
    if v.amnesia and v.key_path then
        return nil, format("%s: amnesia = true has no checkpoints (key_path needs a log)", key)
    end
    return true
end

-- audit.tokens (the proof routes'): false, or { ["<b3 hex of a token>"] = "operator" |
-- "<tenant>" } (the shape of wallet.tokens and ingest.tokens).
function _M.check_tokens(t, key)
    if t == false then return true end
    if type(t) ~= "table" then
        return nil, format('%s must be false or { ["<b3 hex of a token>"] = "operator" | ' ..
                           '"<tenant>" }', key)
    end
    for h, who in pairs(t) do
        if type(h) ~= "string" or #h ~= 64 or not h:match("^[0-9a-f]+$") then
            return nil, format("%s: key %q is not a BLAKE3 digest (64 lowercase hex digits: " ..
                               "printf %%s TOKEN | b3sum)", key, tostring(h))
        end
        if type(who) ~= "string" or who == "" or #who > 128 or who:find("[^\33-\126]") then
            return nil, format('%s[%s...] must be "operator" or a tenant', key, h:sub(1, 8))
        end
    end
    return true
end

-- What an open of the trail in dir would refuse, found without opening it, so `--check`
-- refuses what the start refuses (AUD-I-42): dir (or, while it does not exist, the directory
-- it would be made in) must be a directory this process can write; every signer key file
-- (key_path, and key_path.<i> of a sharded trail) must load. -> true | nil, "why"
function _M.check_paths(dir, key_path, shards)
    local p = dir
    while true do
        local st = uv.fs_stat(p)
        if st then
            if st.type ~= "directory" then
                return nil, format("audit trail %s: %s is not a directory", dir, p)
            end
            if ffi.C.access(p, W_OK) ~= 0 then
                return nil, format("audit trail %s: %s is not writable: %s", dir, p, errno_text())
            end
            break
        end
        local parent = p:match("^(.*)/[^/]+/*$")
        if not parent then parent = p:sub(1, 1) == "/" and "/" or "." end
        if parent == "" then parent = "/" end
        if parent == p then break end
        p = parent
    end
    if key_path then
        for i = 0, (shards or 1) - 1 do
            local kp = i == 0 and key_path or (key_path .. "." .. i)
            local ok, err = audit.check_key(kp)
            if not ok then return nil, format("audit.key_path %s: %s", kp, err) end
        end
    end
    return true
end

return _M
