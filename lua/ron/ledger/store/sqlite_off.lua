-- ron.ledger.store.sqlite_off: the offloaded SQLite driver (sqlite.open { offload = true }).
-- Each call of a store primitive runs on a libuv pool thread (uv.new_work, like
-- ron.accounting.runtime.offload) while the calling task waits; ONE call in flight per
-- connection (the writer's; with the reader, the calls that only read have a second one),
-- the others queue FIFO up to max_queue, beyond that a call fails at once with class
-- "retry" (Busy). Arguments and results cross to the pool's Lua VM serialized (plain values:
-- strings, numbers, booleans, int64_t, tables). The pool VM attaches to the connection the
-- loop opened (the sqlite3 * as a number) and keeps its own prepared statements per
-- connection token. The WAL's checkpoints run beside the writes
-- (ron.ledger.store.sqlite_checkpoint).
--
--   local off = require("ron.ledger.store.sqlite_off")
--   local s = off.new(o, conn, reader_conn, durability)   -- (ron.ledger.store.sqlite.open)
--   off.pack(...), off.unpack_(s)   -- the serialized form of a call's values
--   off.in_flight()                 -- calls a caller waits for, this VM
local ffi = require("ffi")
local sql = require("ron.ledger.store.sql")
local phase = require("ron.ledger.store.phase")
local prof = require("ron.ledger.store.sqlite_profile")
local sc = require("ron.ledger.store.sqlite_conn")
-- (after sqlite_conn: it declares its functions over the sqlite3 type declared there)
local ckpt = require("ron.ledger.store.sqlite_checkpoint")
local block = require("ron.ledger.store.sql_block")
local share = require("ron.ledger.store.sqlite_share")
local msg = require("ron.ledger.store.sqlite_msg")

local type, error, tostring, tonumber, setmetatable, pcall, format =
      type, error, tostring, tonumber, setmetatable, pcall, string.format
local L, new_conn = sc.lib, sc.new

local _M = {}

-- A serializer for the plain values that cross between VMs (Lua source, loaded back).
local function ser(v, out)
    local t = type(v)
    if t == "string" then
        out[#out + 1] = format("%q", v)
    elseif t == "number" then
        if v % 1 == 0 and v >= -2 ^ 53 and v <= 2 ^ 53 then
            out[#out + 1] = format("%d", v)
        else
            out[#out + 1] = format("%.17g", v)
        end
    elseif t == "boolean" or t == "nil" then
        out[#out + 1] = tostring(v)
    elseif t == "cdata" then
        out[#out + 1] = tostring(ffi.cast("int64_t", v)) -- "123LL": an int64_t literal
    elseif t == "table" then
        out[#out + 1] = "{"
        local n = v.n or #v
        for i = 1, n do
            ser(v[i], out)
            out[#out + 1] = ","
        end
        for k, x in pairs(v) do
            if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then
                out[#out + 1] = "["
                ser(k, out)
                out[#out + 1] = "]="
                ser(x, out)
                out[#out + 1] = ","
            end
        end
        out[#out + 1] = "}"
    else
        error("ron.ledger.store.sqlite_off: cannot pass a " .. t .. " to the pool", 0)
    end
end

-- LuaJIT's string.buffer serializer (2.1 since 2021) when there is one: the same plain
-- values in C, against ser's Lua source that the other side compiled back with loadstring
-- (~600 us of CPU per commit, both ways: issue 25's profile). Its int64_t stays int64_t;
-- ser is the fallback of an older LuaJIT, and names the value neither can pass.
local has_buf = pcall(require, "string.buffer")
local BUF = has_buf and msg.VALUES or nil -- a prefix no "return ..." source starts with
-- One encode and one decode buffer per VM (the loop's, each pool thread's): the bytes are
-- written after the prefix and read past it in place, no copy of either side.
local enc, dec = has_buf and msg.buffer(), has_buf and msg.buffer()
-- (RON_SQLITE_MESSAGES=0: a call's arguments cross as a string, as before sqlite_msg)
_M.messages = has_buf and os.getenv("RON_SQLITE_MESSAGES") ~= "0"

function _M.pack(...)
    local t = phase.pack(...)
    if BUF then
        local ok = pcall(enc.encode, enc:reset():put(BUF), t)
        if ok then return enc:tostring() end
    end
    local out = { "return " }
    ser(t, out)
    return table.concat(out)
end

function _M.unpack_(s)
    local t
    if BUF and s:byte(1) == 0 then
        t = dec:set(s):skip(#BUF):decode()
    else
        t = assert(loadstring(s, "=store-args"))()
    end
    return unpack(t, 1, t.n)
end

-- In a pool VM: the attached connections by token, and the store objects over them. A
-- closed store's entry stays (the loop thread cannot reach this VM to drop it) and is never
-- met again, since no token is issued twice (open below); I-7: at ATTACHED_MAX entries the
-- map starts anew, a live store's next call here attaching again (its statements prepared
-- again, the earlier ones finalized by its close).
local ATTACHED_MAX = 64
local attached, n_attached = {}, 0

-- A call's arguments: packed, a string (_M.pack's), or { address, length, method } of its
-- message on the loop (sqlite_msg), read in place.
local function args_of(packed)
    if type(packed) == "table" then return msg.read(packed[1], packed[2], packed[3]) end
    return _M.unpack_(packed)
end

-- The pool's entry point (run by the work function, under pcall): one primitive. plen: the
-- length of the message at address packed (sqlite_msg), or nil (packed is a string).
function _M.pool_call(dbnum, token, method, packed, durability, plen)
    if method == ckpt.METHOD then return _M.pack(ckpt.run(L(), dbnum)) end
    local s = attached[token]
    if not s then
        if n_attached >= ATTACHED_MAX then attached, n_attached = {}, 0 end
        -- (the connection's statements shared with the other pool VMs: the token names
        -- their table, sqlite_share)
        local shared = tonumber(token:match(":(%x+):%a$"), 16)
        local conn = new_conn(ffi.cast("sqlite3 *", dbnum), shared ~= 0 and shared or nil)
        s = sql.new(conn, "sqlite", "")
        s.durability = durability
        attached[token], n_attached = s, n_attached + 1
    end
    if plen then packed = { packed, plen, method } end
    -- (RON_SQLITE_PROFILE: a counted phase's decode and encode timed too)
    if prof.on then
        local kind = token:byte(-1) == 114 and "read" or "write" -- ("r": next_token)
        return prof.call(s, method, packed, args_of, _M.pack, phase.pack, kind)
    end
    return _M.pack(s[method](s, args_of(packed)))
end

-- The pool's work function (no upvalues: luv ships it to each pool thread's VM as bytecode).
-- Its first call in a VM loads this module there with the store's modules interpreted
-- (ron.base.nojit): each pool VM compiled its own traces of them, most aborted (closures
-- made per call, returns to the C caller), and every compile cost two mprotect calls, each
-- a TLB shootdown across the process's threads: ~21 % of the pool threads' samples in a
-- 16-source wallet run, ~23 % less pool CPU per transfer without (docs/WALLET.md §8). The
-- loop's VM and the pool's other bodies keep their JIT, and so do the statement loop's
-- bind, Conn:run and column here (their FFI calls, above) and the modules of the per-row
-- code (the third list below: argument checks and bind lists, loops over a group's rows;
-- compiled, a wallet group's phase took 7.1-8.7 ms against 8.3-9.1 and the pool threads
-- 132-161 us of CPU a transfer against 153-170, three pairs, issue 25).
local function WORK(path, dbnum, token, method, packed, id, durability, plen)
    local m = _G.package.loaded["ron.ledger.store.sqlite_off"]
    if not m then
        _G.package.path = path
        local ok, r = _G.pcall(_G.require, "ron.base.nojit")
        if ok then
            ok, r = _G.pcall(r.require, "ron.ledger.store.sqlite_off", { "ron.ledger.store." },
                             { "ron.ledger.store.sql_base", "ron.ledger.store.sql_rows",
                               "ron.ledger.store.sql_batch", "ron.ledger.store.sql_claims",
                               "ron.ledger.store.sql_binds" })
        end
        if not ok then return id, nil, _G.tostring(r) end
        m = r
    end
    local ok2, r = _G.pcall(m.pool_call, dbnum, token, method, packed, durability, plen)
    if not ok2 then return id, nil, _G.tostring(r) end
    return id, r
end

local work_handle
-- (the checkpoints' apart: in_flight() counts the calls a caller waits for)
local inflight, ck_inflight, next_id = {}, {}, 0

local function after(id, packed, err)
    local req = inflight[id]
    if req then
        inflight[id] = nil
        if req.msg then msg.give(req.msg) end -- (the pool is done reading it)
        if not req.ch:is_closed() then req.ch:try_send({ packed, err }) end
        return
    end
    local cb = ck_inflight[id]
    ck_inflight[id] = nil
    if not cb then return end
    if packed then return cb(_M.unpack_(packed)) end
    return cb(nil, err)
end

-- One call on the pool: entry kept in `into` (inflight or ck_inflight) under a fresh id
-- until `after` takes it. -> ok, error of the queue. (luv required here, on the loop: see
-- Off:call)
local function submit(into, entry, dbnum, token, method, packed, durability, plen)
    if not work_handle then work_handle = require("luv").new_work(WORK, after) end
    next_id = next_id + 1
    into[next_id] = entry
    local ok, qerr = work_handle:queue(package.path, dbnum, token, method, packed, next_id,
                                       durability, plen)
    if not ok then into[next_id] = nil end
    return ok, qerr
end

function _M.in_flight()
    local n = 0
    for _ in pairs(inflight) do n = n + 1 end
    return n
end

-- Tokens, counted in this VM's registry: a module loaded anew (busted loads a spec file's
-- modules anew per file) must not count from 1 again, or a store opened at a closed one's
-- address in the same second met, in a pool VM, the closed one's finalized statements
-- (SIGSEGV in a pool thread, wrong rows). The registry's address tells this VM from another
-- live one.
local REG = debug.getregistry()
-- role: "w" (the writer's connection) or "r" (the reader's), the token's last byte (the pool
-- profile's: the connection a call ran on).
-- shared: the address of the connection's shared statements (sqlite_share; 0: none, each
-- pool VM prepares its own).
local function next_token(dbnum, role, shared)
    REG.ron_sqlite_tokens = (REG.ron_sqlite_tokens or 0) + 1
    return format("%s:%d:%x:%x:%s", tostring(REG):match("0x%x+") or "vm", REG.ron_sqlite_tokens,
                  dbnum, shared, role)
end

local Off = {}
-- (made apart from __index, which runs on every call of a primitive on the loop: a closure
-- made in it, even on a branch not taken, aborted every trace through it, issue 25)
local function proxy_of(k)
    return function(s, ...) return s:call(k, ...) end
end
Off.__index = function(_, k)
    local v = Off[k]
    if v ~= nil then return v end
    v = proxy_of(k)
    Off[k] = v
    return v
end

-- No snapshot: each call runs on a pool thread, so no read transaction spans two of them
-- (verify over an offloaded store reads call by call; the CLI opens it read-only instead).
Off.snapshot = false

-- The reader connection (issue 25): the calls that only read run on a second connection of
-- the file, beside the writer's. Under WAL a read transaction sees every commit made
-- before it began, so a read that follows a write the caller saw return sees that write,
-- as on the one connection; a read no longer waits behind writes queued before it (as on
-- PostgreSQL's pooled connections, where reads and writes already ran side by side). In a
-- 16-source wallet group the reads (its intents, the plan's postings and balances, the
-- feed's events) held the one connection ~80 of ~344 us per transfer.
local READ_CALLS = {}
for n in pairs(phase.READS) do READ_CALLS[n] = true end
for _, n in ipairs { "get_events_since", "get_transfers_for_account", "list_transfers",
                     "get_account_history", "list_accounts" } do
    READ_CALLS[n] = true
end

local function lane_of(self, method, ...)
    local r = self.reader
    if not r then return self end
    if READ_CALLS[method] then return r end
    if method == "apply" and phase.reads_only(...) then return r end
    return self
end

-- The lane's connection closes once no call runs on it (closing it under a running
-- statement crashed SQLite: SIGFPE at a daemon's stop).
local function close_lane(lane)
    if lane.busy or lane.conn_closed then return end
    lane.conn_closed = true
    lane.conn:close() -- (every statement of the connection finalized: the shared ones too)
    if lane.shared ~= 0 then share.free(lane.shared) end
end

-- The turn of lane for this call: at once, or FIFO behind the call in flight (bounded).
-- -> true, or nil, err, class
local function take_turn(self, lane)
    local task = require("ron.base.task")
    if lane.busy then
        if #lane.waiters >= self.max_queue then
            self.stats.rejected = self.stats.rejected + 1
            return nil, format("Busy: %d calls already wait for this SQLite store",
                               #lane.waiters), "retry"
        end
        local ch = task.channel(1, "sqlite_store_turn")
        lane.waiters[#lane.waiters + 1] = ch
        -- shut down: the turn still comes (the call ahead ends, then hands it on; a close
        -- hands it on too): a commit's next statement is not failed half-way by a stop
        -- (a saga left pending for recovery, issue 27)
        local ok, err = ch:recv_through_shutdown()
        if not ok then
            for i, w in ipairs(lane.waiters) do
                if w == ch then table.remove(lane.waiters, i) break end
            end
            return nil, "Canceled: " .. tostring(err), "io"
        end
    end
    lane.busy = true
    return true
end

-- The call ended (or never ran): the lane to its next waiter.
local function pass_turn(lane)
    lane.busy = false
    local nxt = table.remove(lane.waiters, 1)
    if nxt then
        lane.busy = true
        nxt:try_send(true)
    end
end

-- The call's arguments for the pool: the address and length of its message (sqlite_msg;
-- entry.msg, given back when the answer is in), or a string (_M.pack's: blocks off, or a
-- value the message cannot encode). (The phase's lists as binds blocks: bound in the pool
-- from their bytes, sql_block.)
function Off:_message(entry, method, ...)
    if not block.on then return _M.pack(...) end
    if _M.messages then
        local m = msg.take()
        local addr, len = msg.write(m, method, ...)
        if addr then
            entry.msg = m
            return addr, len
        end
        msg.give(m)
    end
    return _M.pack(block.args(method, ...))
end

function Off:call(method, ...)
    -- (here, not at the top: the threadpool's VMs load this module for its driver, and
    -- they must not load luv or the scheduler: a second scheduler's handles on the loop)
    local task = require("ron.base.task")
    if self.closed then return nil, "Closed: the store was closed", "bug" end
    -- one call in flight per connection; the rest wait FIFO, bounded
    local lane = lane_of(self, method, ...)
    local turn, terr, tcls = take_turn(self, lane)
    if not turn then return nil, terr, tcls end
    if self.closed then -- closed while this call waited for its turn: pass the turn on
        pass_turn(lane)
        return nil, "Closed: the store was closed", "bug"
    end
    local ch = task.channel(1, "sqlite_store")
    local entry = { ch = ch, keep = self }
    local packed, plen = self:_message(entry, method, ...)
    local ok, qerr = submit(inflight, entry, lane.dbnum, lane.token, method, packed,
                            self.durability, plen)
    if not ok and entry.msg then msg.give(entry.msg) end
    local res, err
    if not ok then
        err = "IoError: uv work queue failed: " .. tostring(qerr)
    else
        -- shut down: the answer in flight still comes (one statement)
        res, err = ch:recv_through_shutdown()
    end
    self.stats.calls = self.stats.calls + 1
    lane.busy = false
    -- closed while this call ran on the pool: the connection closes now that no worker
    -- thread uses it; the waiters are refused
    if self.closed then close_lane(lane) end
    pass_turn(lane)
    if self.ckpt and lane == self then self.ckpt:poke() end
    if not res then return nil, err, "io" end
    -- a body that raised: misuse (as the synchronous driver raises it) or a bug
    if res[1] == nil then error(tostring(res[2]), 2) end
    return _M.unpack_(res[1])
end

-- Closes the connections, or, while a call runs on the threadpool, marks the store closed
-- and leaves that connection's close to that call's end (call above).
function Off:close()
    self.closed = true
    if self.ckpt then self.ckpt:close() end
    close_lane(self)
    -- (rawget: an unknown key of an offloaded store is a proxy of a store method)
    local r = rawget(self, "reader")
    if r then close_lane(r) end
    return true
end

-- A checkpoint on the pool (ron.ledger.store.sqlite_checkpoint): cb(rc, log, copied) or
-- cb(nil, err) on the loop when it ends.
local function queue_checkpoint(dbnum, method, cb)
    local ok, qerr = submit(ck_inflight, cb, dbnum, "checkpoint", method, _M.pack(), "ack")
    if not ok then cb(nil, "IoError: uv work queue failed: " .. tostring(qerr)) end
end

-- The offloaded store's checkpoints beside its writes: a second connection of the file,
-- and the writer's own automatic checkpoint off. nil when checkpoint_ms = 0 (or the second
-- connection cannot be had: SQLite's automatic checkpoint stays, as before).
local function checkpointer(o, off)
    if o.checkpoint_ms == 0 then return nil end
    local db = sc.open_v2(o.path, sc.OPEN_RW)
    if not db then return nil end
    local conn = new_conn(db)
    conn:exec("PRAGMA synchronous = NORMAL")
    ckpt.writer_off(L(), off.conn.db)
    local uv, task = require("luv"), require("ron.base.task")
    return ckpt.new { store = off, dbnum = tonumber(ffi.cast("uintptr_t", db)),
                      queue = queue_checkpoint, now = uv.now, interval_ms = o.checkpoint_ms,
                      spawn = function(fn) task.spawn("sqlite_checkpoint", fn) end,
                      close = function() conn:close() end }
end

-- The reader's lane over its connection (opened by ron.ledger.store.sqlite with its own
-- page cache and query_only: a write sent to it by mistake fails instead of racing the
-- writer's).
local function reader_lane(conn)
    local dbnum = tonumber(ffi.cast("uintptr_t", conn.db))
    local shared = share.on and share.new(sc.STMT_BUDGET) or 0
    return { conn = conn, dbnum = dbnum, token = next_token(dbnum, "r", shared), busy = false,
             waiters = {}, conn_closed = false, shared = shared }
end

-- The offloaded store over conn (the writer's, opened and migrated) and reader_conn (or
-- nil: every call on the writer's), with o's max_queue and checkpoint_ms.
function _M.new(o, conn, reader_conn, durability)
    local dbnum = tonumber(ffi.cast("uintptr_t", conn.db))
    local shared = share.on and share.new(sc.STMT_BUDGET) or 0
    local off = setmetatable({ conn = conn, dbnum = dbnum, token = next_token(dbnum, "w", shared),
                               shared = shared,
                               busy = false, waiters = {}, max_queue = o.max_queue or 1024,
                               stats = { calls = 0, rejected = 0 }, closed = false,
                               backend = "sqlite", offloaded = true, path = o.path,
                               durability = durability, ckpt = false,
                               reader = reader_conn and reader_lane(reader_conn) or false,
                               conn_closed = false }, Off)
    off.ckpt = checkpointer(o, off) or false
    return off
end

return _M
