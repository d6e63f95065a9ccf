-- pool_profile.lua: bench-wallet's --pool-profile (issue 25): where the SQLite store's
-- group phases spend their time, timed from inside the thread that runs them
-- (ron.ledger.store.sqlite_profile): the whole phase, its decode and encode across the pool,
-- each primitive, each statement's binding and steps, BEGIN and COMMIT.
--
--   local PP = require("pool_profile")
--   PP.enable(dir[, every])        -- before the first store call: RON_SQLITE_PROFILE set
--   local snap = PP.snap()         -- at a case's start
--   local b = PP.print(name, snap, n) -- after it: per phase and per transfer (n transfers);
--                                  -- b: the connections' busy us per transfer (writer:
--                                  -- b.write = { wall, CPU }, reader: b.read), or nil
--   PP.ceiling(b)                  -- the writer's rate per second from b, or nil
--   PP.remove()                    -- the files, at the end
local ffi = require("ffi")
local uv = require("luv")
local prof = require("ron.ledger.store.sqlite_profile")

local format = string.format

local M = {}
local prefix

pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")

-- every: the phases between two writes of a VM's figures (sqlite_profile's WRITE_EVERY)
function M.enable(dir, every)
    prefix = format("%s/bench-pool-profile-%d", dir, uv.os_getpid())
    assert(ffi.C.setenv("RON_SQLITE_PROFILE", prefix, 1) == 0, "setenv")
    if every then
        assert(ffi.C.setenv("RON_SQLITE_PROFILE_EVERY", tostring(every), 1) == 0, "setenv")
    end
end

function M.snap() return prefix and prof.collect(prefix) or nil end

-- the figures since snap: every key's count, wall and CPU, sorted by wall
local function since(snap)
    local now, list = prof.collect(prefix), {}
    for k, a in pairs(now) do
        local b = snap[k] or { 0, 0, 0 }
        local n = a[1] - b[1]
        if n > 0 then list[#list + 1] = { k = k, n = n, w = a[2] - b[2], c = a[3] - b[3] } end
    end
    table.sort(list, function(x, y) return x.w > y.w end)
    return list
end

-- -> the store's busy time per transfer on each connection since snap: { write = { wall,
-- CPU } in us, read = ... } (every call of the offloaded driver, the phases and the rest)
local function busy(list, transfers)
    local b = { write = { 0, 0 }, read = { 0, 0 } }
    for _, x in ipairs(list) do
        local kind = x.k:match("^pool (%a+) calls$")
        if kind then b[kind] = { x.w / transfers, x.c / transfers } end
    end
    return b
end

function M.print(name, snap, transfers)
    if not snap then return end
    local list = since(snap)
    local phases
    for _, x in ipairs(list) do if x.k == "phase" then phases = x.n end end
    if not phases then return end
    local b = busy(list, math.max(transfers, 1))
    print(format("%-8s %-15s the store's connections busy per transfer (every call, wall us / "
                 .. "CPU us): writer %.1f / %.1f, reader %.1f / %.1f", name, "", b.write[1],
                 b.write[2], b.read[1], b.read[2]))
    print(format("%-8s %-15s pool profile, %d phases of >= %d ops (each: wall ms, CPU ms; "
                 .. "per transfer: wall us):", name, "", phases, prof.MIN_OPS))
    for _, x in ipairs(list) do
        if x.w / phases >= 20 then -- (>= 20 us per phase)
            print(format("%-8s %-15s   %-40s %6.0f x %5.2f ms %5.2f ms cpu  %6.1f us/transfer",
                         name, "", x.k, x.n / phases, x.w / phases / 1e3, x.c / phases / 1e3,
                         x.w / math.max(transfers, 1)))
        end
    end
    return b
end

-- b (M.print's): the rate its writer allows with the loop's work free, per second, or nil
function M.ceiling(b)
    if not b or b.write[1] <= 0 then return nil end
    return 1e6 / b.write[1]
end

function M.remove()
    if not prefix then return end
    for _, path in ipairs(prof.files(prefix)) do os.remove(path) end
end

return M
