-- ron.ledger.store.sqlite_profile: where a SQLite phase's time goes, from inside the thread
-- that runs it (issue 25; tests/bench/bench-wallet.lua --pool-profile). Off unless the
-- environment names a file prefix before the store opens:
--
--   RON_SQLITE_PROFILE=/tmp/prof   each VM that runs a phase of at least MIN_OPS ops (the
--                                  loop's with the synchronous driver, each pool thread's
--                                  with the offloaded one) keeps, per key, the count, the
--                                  wall and the thread's CPU in microseconds, and every
--                                  WRITE_EVERY such phases writes them to <prefix>.<vm>
--   RON_SQLITE_PROFILE_EVERY=N     WRITE_EVERY (16 unless set)
--   local p = require("ron.ledger.store.sqlite_profile")
--   p.collect(prefix) -> { [key] = { n, wall_us, cpu_us } }: every VM's file summed
--
-- Keys: "phase" (the whole call, the offloaded driver's decode and encode of its arguments
-- and results apart: "phase decode", "phase encode"), "op <primitive>", "sql <verb> <table>
-- bind|step|prepare" (each statement's binding and its steps, and its preparing when the
-- connection had not kept it: a list's length new to it), "exec <statement>" (BEGIN, COMMIT,
-- the pragmas, savepoints). Only phases of MIN_OPS ops or more are counted: a batch's or a
-- group's, not the single path's; but "pool write calls" and "pool read calls" hold every
-- call of the offloaded driver (its wall and CPU, decode and encode included), by the
-- connection it runs on, and "call <write|read> <method>" each (an apply that was a counted
-- phase: "apply phase"; written with the next counted phase's figures, or at once with
-- WRITE_EVERY 1). A VM's figures are cumulative; a caller takes the difference of two
-- collects. Off, the cost is one field test per statement.
local ffi = require("ffi")

local _M = {}

local PREFIX = os.getenv("RON_SQLITE_PROFILE")
_M.on = PREFIX ~= nil and PREFIX ~= ""
_M.MIN_OPS = 8
-- (a run of few phases, as the rating bench's 16, sets 1)
_M.WRITE_EVERY = tonumber(os.getenv("RON_SQLITE_PROFILE_EVERY")) or 16
_M.scope = false -- inside a counted phase (set by begin, cleared by finish)

if _M.on and not pcall(ffi.typeof, "struct ron_prof_ts") then
    ffi.cdef [[
struct ron_prof_ts { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct ron_prof_ts *ts);
]]
end

local ts = _M.on and ffi.new("struct ron_prof_ts")
local MONOTONIC, THREAD_CPU = 1, 3

local function us(clk)
    ffi.C.clock_gettime(clk, ts)
    return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
end

-- -> the wall and CPU clocks now, in microseconds
function _M.now() return us(MONOTONIC), us(THREAD_CPU) end

local acc, phases_seen = {}, 0
local file = _M.on and (PREFIX .. "." .. tostring(acc):match("0x(%x+)"))

-- key's count and the wall and CPU spans dw, dc
function _M.add_span(key, dw, dc)
    local a = acc[key]
    if not a then
        a = { 0, 0, 0 }
        acc[key] = a
    end
    a[1], a[2], a[3] = a[1] + 1, a[2] + dw, a[3] + dc
end

-- key's span from w0, c0 (now()'s) to now: -> now
function _M.add(key, w0, c0)
    local w1, c1 = _M.now()
    _M.add_span(key, w1 - w0, c1 - c0)
    return w1, c1
end

local function write()
    local f = io.open(file, "w")
    if not f then return end
    for k, a in pairs(acc) do
        f:write(string.format("%s\t%d\t%.0f\t%.0f\n", k, a[1], a[2], a[3]))
    end
    f:close()
end

-- A phase of n ops starts: -> whether it is counted (then finish follows)
function _M.begin(n)
    _M.scope = n >= _M.MIN_OPS
    return _M.scope
end

function _M.finish()
    _M.scope = false
    _M.counted = true -- (the offloaded driver's call adds its decode and encode: pool_call)
    phases_seen = phases_seen + 1
    if phases_seen % _M.WRITE_EVERY == 0 then write() end
end

-- "op <name>": a primitive's key
local op_keys = {}
function _M.op_key(name)
    local k = op_keys[name]
    if not k then
        k = "op " .. name
        op_keys[name] = k
    end
    return k
end

-- "sql <verb> <table>": a statement's key (by the statement's text: as many as the
-- connection's prepared statements)
local keys = {}
function _M.sql_key(text)
    local k = keys[text]
    if k then return k end
    local verb = text:match("^%s*(%u+)") or "?"
    local tbl = text:match("INTO%s+([%w_]+)") or text:match("^UPDATE%s+([%w_]+)")
                or text:match("FROM%s+([%w_]+)") or "?"
    local base = "sql " .. verb .. " " .. tbl
    k = { bind = base .. " bind", step = base .. " step", prepare = base .. " prepare" }
    keys[text] = k
    return k
end

-- "exec <statement's first words>"
local exec_keys = {}
function _M.exec_key(text)
    local k = exec_keys[text]
    if not k then
        k = "exec " .. text:sub(1, 24)
        exec_keys[text] = k
    end
    return k
end

-- The offloaded driver's call of method on s with its packed arguments (decode, encode: the
-- driver's; pack: ron.ledger.store.phase's, which requires this module): a counted phase's
-- decode and encode timed beside it. -> the packed results
-- "call <kind> <method>" (an apply: "apply" or "apply phase", a counted one)
local call_keys = {}
local function call_key(kind, method, counted)
    local name = method == "apply" and counted and "apply phase" or method
    local k = call_keys[name]
    if not k then
        k = "call " .. kind .. " " .. name
        call_keys[name] = k
    end
    return k
end

-- Every call, counted or not, also adds to "pool <kind> calls" (kind: "write" or "read", the
-- connection it ran on): the store's busy time per connection, the bound on what any work
-- on the loop's side can reach (a bench's ceiling line).
function _M.call(s, method, packed, decode, encode, pack, kind)
    local w0, c0 = _M.now()
    local args = pack(decode(packed))
    local w1, c1 = _M.now()
    _M.counted = false
    local r = pack(s[method](s, unpack(args, 1, args.n)))
    local counted = _M.counted
    local w2, c2 = _M.now()
    local out = encode(unpack(r, 1, r.n))
    if counted then
        _M.add_span("phase decode", w1 - w0, c1 - c0)
        _M.add("phase encode", w2, c2)
    end
    local w3, c3 = _M.now()
    _M.add_span(kind == "read" and "pool read calls" or "pool write calls", w3 - w0, c3 - c0)
    _M.add_span(call_key(kind, method, counted), w3 - w0, c3 - c0)
    -- (every 1: each call's figures written, so that a snapshot taken between two phases
    -- holds the calls made before it; a bench of few phases sets it)
    if _M.WRITE_EVERY <= 1 then write() end
    return out
end

-- every VM's file under prefix: -> their paths
function _M.files(prefix)
    local dir, base = prefix:match("^(.*)/([^/]*)$")
    dir, base = dir or ".", (base or prefix) .. "."
    local uv, out = require("luv"), {}
    local h = uv.fs_scandir(dir)
    while h do
        local name = uv.fs_scandir_next(h)
        if not name then break end
        if name:sub(1, #base) == base then out[#out + 1] = dir .. "/" .. name end
    end
    return out
end

-- every VM's file under prefix, summed
function _M.collect(prefix)
    local out = {}
    for _, path in ipairs(_M.files(prefix)) do
        for line in io.lines(path) do
            local k, n, w, c = line:match("^(.-)\t(%d+)\t([%d.]+)\t([%d.]+)$")
            if k then
                local a = out[k] or { 0, 0, 0 }
                a[1], a[2], a[3] = a[1] + tonumber(n), a[2] + tonumber(w), a[3] + tonumber(c)
                out[k] = a
            end
        end
    end
    return out
end

return _M
