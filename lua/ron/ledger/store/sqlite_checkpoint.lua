-- ron.ledger.store.sqlite_checkpoint: the offloaded SQLite store's WAL checkpoints, run
-- beside its writes instead of inside them (issue 25).
--
-- Why. SQLite checkpoints a WAL database inside the COMMIT that takes the WAL past
-- wal_autocheckpoint (1000 pages): that commit copies every page the WAL holds into the
-- database file and syncs it before it returns, on the one store thread every commit waits
-- for. The wallet's group of 64 transfers writes ~350 WAL frames (random ids put each
-- transfer in its own leaf of four indexes), so every third group or so made that copy,
-- and each copy took about half of the pages the WAL held: a leaf rewritten by three
-- groups was copied three times. Measured on the wallet bench (hot case, this process's
-- /proc/self/io per transfer, docs/WALLET.md §8): 60-62 KB written in 28 calls and 16-17
-- KB read before; 30 KB in 15.5 calls and 6 KB read with a cycle a second, ~36 KB with one
-- every 250-300 ms. The default is 250 ms: over 2-minute runs a cycle a second made the
-- seconds of its copy's sync slow (p99 82-137 ms against 76-80 before), every 250 ms not.
--
-- What. The writer's connection runs with wal_autocheckpoint = 0; a second connection of
-- the same file, used for nothing else, runs sqlite3_wal_checkpoint_v2(PASSIVE) on a pool
-- thread. A PASSIVE checkpoint takes no lock a writer or a reader waits for, so it copies
-- beside the writes. But it copies the WAL as it was when it began, and a WAL is started
-- again (written from its beginning, not appended to) only once wholly copied: under
-- steady writes a checkpoint beside them never gets there. So a cycle is passes beside the
-- writes, each copying what the writer appended during the last, until one finds few new
-- frames (FINISH_FRAMES): those are copied in the writer's turn, between two of its calls
-- (a short wait for it), and its next transaction starts the WAL again. Crash safety is
-- SQLite's: the WAL stays the log until the copy is synced, whichever connection copies.
--
-- How often. A cycle begins at most every interval_ms. Rarer cycles copy less: a leaf page
-- that many commits rewrote is copied once per cycle, not once per commit that wrote it.
-- Counted on the wallet bench's WAL (287,510 frames of the hot case, 15,456 distinct
-- pages): windows of 1,000 frames (SQLite's automatic checkpoint) hold 0.48 distinct pages
-- per frame, windows of 4,000 0.24, of 16,000 0.10.
--
-- Bounds (I-7): one checkpoint in flight per store; a cycle begins only after a call of the
-- writer (an idle store starts none); when a checkpoint finds the WAL at max_frames or more
-- (it could not start the WAL again: a reader held an old snapshot, or the writes outran
-- the passes) the next ones run in the writer's turn, as the automatic one did, until the
-- WAL is small again. A checkpoint that fails is counted and tried again at the next
-- interval (its cycle ends); the WAL keeps the commits meanwhile.
local ffi = require("ffi")

local _M = {}

_M.INTERVAL_MS = 250     -- default: a cycle begins at most every 250 ms
_M.MAX_FRAMES = 65536    -- a WAL of 65536 frames (256 MB of 4 KB pages): in the writer's turn
_M.FINISH_FRAMES = 256   -- a pass beside the writes that found this few new: finish in turn
_M.METHOD = "\0checkpoint" -- the pool call's method name: no store primitive is named so

local PASSIVE = 0
local FINISH = _M.FINISH_FRAMES

pcall(ffi.cdef, [[
int sqlite3_wal_checkpoint_v2(sqlite3 *db, const char *zDb, int eMode, int *pnLog,
                              int *pnCkpt);
int sqlite3_wal_autocheckpoint(sqlite3 *db, int N);
]])

local frames = ffi.new("int[2]")

-- In the pool (or any) VM: one PASSIVE checkpoint of the connection db (a sqlite3 * as a
-- number). -> rc, frames in the WAL, frames copied (SQLITE_BUSY, 5: another checkpoint ran).
function _M.run(lib, dbnum)
    frames[0], frames[1] = -1, -1
    local rc = lib.sqlite3_wal_checkpoint_v2(ffi.cast("sqlite3 *", dbnum), nil, PASSIVE,
                                             frames, frames + 1)
    return rc, frames[0], frames[1]
end

-- The writer's connection, at open: no checkpoint inside its commits.
function _M.writer_off(lib, db) return lib.sqlite3_wal_autocheckpoint(db, 0) end

local Ckpt = {}
Ckpt.__index = Ckpt

-- o: { store = the offloaded store (its call, its stats), dbnum = the checkpoint
-- connection, queue = function(dbnum, method, cb) that runs the checkpoint on the pool and
-- calls cb(rc, log, ckpt) or cb(nil, err) on the loop, now = a ms clock, spawn = function(fn)
-- that runs fn in a task, close = function() that closes the checkpoint connection,
-- interval_ms, max_frames }
function _M.new(o)
    local st = o.store.stats
    st.checkpoints, st.checkpoints_finish, st.checkpoints_inline = 0, 0, 0
    st.checkpoint_failures = 0
    st.wal_frames, st.wal_copied = 0, 0 -- the last checkpoint's: frames in the WAL, copied
    return setmetatable({ store = o.store, dbnum = o.dbnum, queue = o.queue, now = o.now,
                          spawn = o.spawn, close_conn = o.close,
                          interval = o.interval_ms or _M.INTERVAL_MS,
                          max = o.max_frames or _M.MAX_FRAMES, running = false,
                          last = -math.huge, prev = 0, next = nil, closed = false }, Ckpt)
end

-- The store closes: the checkpoint connection with it, or, while a checkpoint runs on it,
-- when that one ends (never under a running checkpoint).
function Ckpt:close()
    if self.closed then return end
    self.closed = true
    if not self.running then self.close_conn() end
end

-- self.next, what the next checkpoint is once none runs: nil, a pass beside the writes once
-- the interval has passed; "pass", one at once (the cycle's next); "finish", the cycle's
-- last frames in the writer's turn; "inline", in the writer's turn past the bound.
function Ckpt:_done(rc, log, copied, beside)
    local st = self.store.stats
    self.running, self.next = false, nil
    if self.closed then return self.close_conn() end
    if rc ~= 0 then
        -- a failure, or BUSY (5: another connection's checkpoint ran): the cycle ends and
        -- the next begins after the interval, so a failing one is not tried at every call
        if rc ~= 5 then st.checkpoint_failures = st.checkpoint_failures + 1 end
        self.prev = 0
        return
    end
    st.checkpoints = st.checkpoints + 1
    st.wal_frames, st.wal_copied = log or 0, copied or 0
    -- A pass beside the writes copies the WAL as it was when it began; the writer appends
    -- meanwhile, and a WAL starts again only once wholly copied. So passes follow one
    -- another, each copying what the writer appended during the last, until one finds
    -- few new frames: those are copied in the writer's turn (a short wait for it), and
    -- its next transaction starts the WAL again. A checkpoint in the writer's turn, or a
    -- WAL started again meanwhile (fewer frames than the last pass saw), ends the cycle.
    local new = st.wal_frames - self.prev
    if st.wal_frames >= self.max then
        self.next = "inline"
    elseif not beside or new < 0 or st.wal_frames == 0 then
        self.prev = 0
        return
    else
        self.next = new <= FINISH and "finish" or "pass"
    end
    self.prev = st.wal_frames
    -- (after a turn past the bound, the next waits for a call of the writer: a reader
    -- holding the WAL back does not make the turns follow one another at once)
    if beside then return self:poke() end
end

local TURN_STAT = { finish = "checkpoints_finish", inline = "checkpoints_inline" }

-- In the writer's turn: no write of the store runs beside it.
function Ckpt:_in_turn(kind)
    local st, k = self.store.stats, TURN_STAT[kind]
    st[k] = st[k] + 1
    self.spawn(function()
        local rc, log, copied = self.store:call(_M.METHOD)
        self:_done(rc or -1, log, copied, false)
    end)
end

-- After each call of the writer (on the loop), and after a pass beside it: start the next
-- checkpoint (above) when none runs.
function Ckpt:poke()
    if self.running or self.closed then return end
    local nxt = self.next
    if nxt == "finish" or nxt == "inline" then
        self.running = true
        return self:_in_turn(nxt)
    end
    if nxt ~= "pass" then
        local t = self.now()
        if t - self.last < self.interval then return end
        self.last = t
    end
    self.running = true
    self.queue(self.dbnum, _M.METHOD, function(rc, log, copied)
        self:_done(rc or -1, log, copied, true)
    end)
end

return _M
