-- The offloaded SQLite store's WAL checkpoints beside its writes
-- (ron.ledger.store.sqlite_checkpoint, issue 25), inside the host (ctest
-- lua-ledger-sqlite-checkpoint-host): the writer's own automatic checkpoint is off, a second
-- connection copies the WAL on a pool thread, a WAL it cannot start again goes to the
-- writer's turn (I-7), and checkpoint_ms = 0 keeps SQLite's automatic checkpoint.
local S = require("support")

if not S.needs_host("the offloaded SQLite store's checkpoints",
                    "lua-ledger-sqlite-checkpoint-host") then return end

local sqlite = require("ron.ledger.store.sqlite")
local task = require("ron.base.task")

local function in_task(body)
    S.in_task(body)
    assert.equal(0, sqlite.in_flight())
end

-- A pragma's value on the writer connection, read on the loop between two calls.
local function pragma(s, name)
    local rows = assert(s.conn:read("PRAGMA " .. name, { n = 0 }))
    return tonumber(rows[1][1])
end
local function autocheckpoint(s) return pragma(s, "wal_autocheckpoint") end

local BLOB = string.rep("x", 3000) -- about a page per row

-- (put_meta inserts a key once: each row a new key)
local function write_rows(s, from, to)
    for i = from, to do assert.equal(1, s:put_meta("k" .. i, BLOB .. i)) end
end

-- Polls cond() every 5 ms for at most ms; a call of the store each time (a poke).
local function eventually(s, ms, cond)
    for _ = 1, ms / 5 do
        if cond() then return true end
        task.sleep(5)
        s:get_meta("k1")
    end
    return cond()
end

-- The last checkpoint copied everything the WAL held.
local function all_copied(s)
    return s.stats.wal_frames > 0 and s.stats.wal_copied == s.stats.wal_frames
end

describe("ron.ledger.store.sqlite offloaded: checkpoints beside the writes", function()
    it("turns the writer's automatic checkpoint off and copies the WAL from a pool thread",
       function()
        in_task(function()
            local path = S.tmpname(".sqlite")
            local s = assert(sqlite.open { path = path, offload = true, checkpoint_ms = 10 })
            assert.equal(0, autocheckpoint(s))
            -- passes beside the writes, each cycle finished in the writer's turn, after
            -- which the writer starts the WAL again: 400 pages written, the WAL far smaller
            local n = 0
            assert.is_true(eventually(s, 5000, function()
                write_rows(s, n + 1, n + 10)
                n = n + 10
                local st = s.stats
                return n >= 400 and st.checkpoints - st.checkpoints_finish > 0
                       and st.checkpoints_finish > 0 and all_copied(s) and st.wal_frames < 100
            end), "frames in the WAL, copied: " .. s.stats.wal_frames .. ", "
                  .. s.stats.wal_copied)
            assert.equal(0, s.stats.checkpoint_failures)
            assert.equal(0, s.stats.checkpoints_inline)
            s:close()
            -- what was written is there, from the database file and what is left of the WAL
            local r = assert(sqlite.open { path = path })
            assert.equal(BLOB .. n, r:get_meta("k" .. n))
            r:close()
        end)
    end)

    it("checkpoint_ms = 0 keeps SQLite's automatic checkpoint inside the commits", function()
        in_task(function()
            local s = assert(sqlite.open { path = S.tmpname(".sqlite"), offload = true,
                                           checkpoint_ms = 0 })
            assert.equal(1000, autocheckpoint(s))
            assert.is_nil(s.stats.checkpoints)
            s:close()
        end)
    end)

    it("keeps temporary files in memory (a statement journal never spills to /var/tmp)",
       function()
        in_task(function()
            local s = assert(sqlite.open { path = S.tmpname(".sqlite"), offload = true })
            assert.equal(2, pragma(s, "temp_store")) -- MEMORY
            s:close()
        end)
        local s = assert(sqlite.open { path = S.tmpname(".sqlite") })
        assert.equal(2, tonumber(assert(s.drv:read("PRAGMA temp_store", { n = 0 }))[1][1]))
        s:close()
    end)

    it("a WAL a reader keeps from starting again goes to the writer's turn, and starts again "
       .. "once the reader lets go (I-7)", function()
        in_task(function()
            local path = S.tmpname(".sqlite")
            local s = assert(sqlite.open { path = path, offload = true, checkpoint_ms = 5 })
            s.ckpt.max = 64 -- (the bound, small: 65536 frames by default)
            write_rows(s, 1, 10)
            -- a reader on its own connection holds a snapshot: no checkpoint may copy
            -- past it, and the WAL cannot start again while it reads
            local r = assert(sqlite.open { path = path, readonly = true })
            assert(r.drv:exec("BEGIN"))
            assert(r:get_meta("k1"))
            write_rows(s, 11, 200)
            assert.is_true(eventually(s, 5000, function()
                return s.stats.checkpoints_inline >= 1
            end), "inline checkpoints: " .. s.stats.checkpoints_inline)
            assert.is_true(s.stats.wal_frames >= 64)
            r.drv:exec("ROLLBACK")
            r:close()
            -- the reader gone: a checkpoint copies everything, the writer starts the WAL
            -- again, and the checkpoints leave the writer's turn
            local n = 200
            assert.is_true(eventually(s, 5000, function()
                n = n + 1
                write_rows(s, n, n)
                return s.stats.wal_frames < 64 and s.ckpt.next ~= "inline"
            end), "WAL frames: " .. s.stats.wal_frames)
            assert.equal(0, s.stats.checkpoint_failures)
            s:close()
        end)
    end)

    it("closes its connection after a checkpoint in flight, and refuses a bad interval",
       function()
        in_task(function()
            local path = S.tmpname(".sqlite")
            local s = assert(sqlite.open { path = path, offload = true, checkpoint_ms = 1 })
            write_rows(s, 1, 50)
            assert.is_true(s.ckpt.running or s.stats.checkpoints >= 1)
            s:close()
            assert.is_true(eventually({ get_meta = function() end }, 5000, function()
                return not s.ckpt.running
            end))
            local r = assert(sqlite.open { path = path })
            assert.equal(BLOB .. 50, r:get_meta("k50"))
            r:close()
        end)
        for _, bad in ipairs({ -1, 1.5, 60001, "10" }) do
            assert.error_matches(function()
                sqlite.open { path = S.tmpname(".sqlite"), offload = true, checkpoint_ms = bad }
            end, "checkpoint_ms must be an integer in 0..60000")
        end
    end)
end)
