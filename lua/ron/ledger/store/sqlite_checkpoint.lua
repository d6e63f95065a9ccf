-- ron.ledger.store.sqlite_checkpoint: the offloaded SQLite store's WAL checkpoints, run
-- beside its writes instead of inside them (issue 25).
--
-- Why. SQLite checkpoints a WAL database inside the COMMIT that takes the WAL past
-- wal_autocheckpoint (1000 pages): that commit copies every page the WAL holds into the
-- database file and syncs it before it returns. The wallet's group of 64 transfers writes
-- ~350 WAL frames in its finalize (random ids put each transfer in its own leaf of four
-- indexes), so every third group or so also did the copy: that group's commit took about
-- twice the others' (the group commit's p99 ~2 x its p50), and the copy sat on the one
-- store thread the commits wait for, while the loop thread waited too
-- (docs/WALLET.md §8, "WAL checkpoints beside the writes").
--
-- What. The writer's connection runs with wal_autocheckpoint = 0; a second connection of
-- the same file, used for nothing else, runs PRAGMA wal_checkpoint(PASSIVE) on a pool
-- thread. A PASSIVE checkpoint takes no lock a writer or a reader waits for: the writer
-- goes on appending meanwhile, and once a checkpoint has copied the whole WAL the writer's
-- next transaction starts it again from its beginning (SQLite's own rule, as after an
-- automatic checkpoint). Crash safety is SQLite's: the WAL stays the log until the copy is
-- synced, whichever connection copies it.
--
-- Bounds (I-7): one checkpoint in flight per store; one started at most every interval_ms,
-- after a call of the writer (an idle store starts none); when a checkpoint finds the WAL
-- at max_frames or more (it could not start the WAL again: a reader held an old snapshot,
-- or the writer never left it a moment), the next one runs in the writer's own turn, as
-- the automatic one did, between two of its calls. A checkpoint that fails is counted and
-- tried again at the next interval; the WAL keeps the commits meanwhile.
local ffi = require("ffi")

local _M = {}

_M.INTERVAL_MS = 100     -- default: at most one checkpoint started per 100 ms
_M.MAX_FRAMES = 16384    -- a WAL of 16384 frames (64 MB of 4 KB pages): checkpoint inline
_M.METHOD = "\0checkpoint" -- the pool call's method name: no store primitive is named so

local PASSIVE = 0

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
    st.checkpoints, st.checkpoints_inline, st.checkpoint_failures = 0, 0, 0
    st.wal_frames, st.wal_copied = 0, 0 -- the last checkpoint's: frames in the WAL, copied
    return setmetatable({ store = o.store, dbnum = o.dbnum, queue = o.queue, now = o.now,
                          spawn = o.spawn, close_conn = o.close,
                          interval = o.interval_ms or _M.INTERVAL_MS,
                          max = o.max_frames or _M.MAX_FRAMES, running = false,
                          last = -math.huge, inline = false, closed = false }, Ckpt)
end

-- The store closes: the checkpoint connection with it, or, while a checkpoint runs on it,
-- when that one ends (never under a running checkpoint).
function Ckpt:close()
    if self.closed then return end
    self.closed = true
    if not self.running then self.close_conn() end
end

function Ckpt:_done(rc, log, copied)
    local st = self.store.stats
    self.running = false
    if self.closed then self.close_conn() end
    if rc ~= 0 and rc ~= 5 then -- (5, BUSY: another connection's checkpoint ran)
        st.checkpoint_failures = st.checkpoint_failures + 1
        return
    end
    st.checkpoints = st.checkpoints + 1
    st.wal_frames, st.wal_copied = log or 0, copied or 0
    self.inline = st.wal_frames >= self.max
end

-- After each call of the writer (on the loop): start a checkpoint when none runs and the
-- interval has passed since the last one started.
function Ckpt:poke()
    if self.running or self.closed then return end
    local t = self.now()
    if t - self.last < self.interval then return end
    self.running, self.last = true, t
    if self.inline then
        -- in the writer's turn: no write of its own runs beside it
        self.store.stats.checkpoints_inline = self.store.stats.checkpoints_inline + 1
        self.spawn(function()
            local rc, log, copied = self.store:call(_M.METHOD)
            self:_done(rc or -1, log, copied)
        end)
        return
    end
    self.queue(self.dbnum, _M.METHOD, function(rc, log, copied)
        self:_done(rc or -1, log, copied)
    end)
end

return _M
