-- The policy of the offloaded SQLite store's checkpoints (ron.ledger.store.sqlite_checkpoint,
-- issue 25), driven by hand: when a pass beside the writes starts, how a cycle ends in the
-- writer's turn, the bound (I-7), failures, and the close. The real SQLite side is
-- spec/ron/ledger/sqlite_checkpoint_host_spec.lua.
local ckpt = require("ron.ledger.store.sqlite_checkpoint")

-- A checkpointer over a fake store: passes beside the writes are queued (q), turns of the
-- writer spawned (turns), the clock is t.
local function make(o)
    local f = { q = {}, turns = {}, t = 0, closed = 0, turn_answer = { 0, 0, 0 } }
    f.store = { stats = {} }
    function f.store.call(_, method)
        assert.equal(ckpt.METHOD, method)
        return unpack(f.turn_answer)
    end
    f.c = ckpt.new { store = f.store, dbnum = 7,
                     queue = function(dbnum, method, cb)
                         assert.equal(7, dbnum)
                         assert.equal(ckpt.METHOD, method)
                         f.q[#f.q + 1] = cb
                     end,
                     now = function() return f.t end,
                     spawn = function(fn) f.turns[#f.turns + 1] = fn end,
                     close = function() f.closed = f.closed + 1 end,
                     interval_ms = 100, max_frames = (o or {}).max_frames }
    -- the oldest queued pass ends with rc, log, copied
    function f.pass(rc, log, copied)
        local cb = table.remove(f.q, 1)
        assert.is_function(cb)
        cb(rc, log, copied)
    end
    function f.turn(log)
        f.turn_answer = { 0, log, log }
        table.remove(f.turns, 1)()
    end
    return f
end

describe("ron.ledger.store.sqlite_checkpoint: the policy", function()
    it("starts a pass at the first call, then at most one per interval, one at a time",
       function()
        local f = make()
        f.c:poke()
        assert.equal(1, #f.q)
        f.c:poke() -- one in flight
        assert.equal(1, #f.q)
        f.pass(0, 0, 0) -- an empty WAL: nothing to finish
        assert.equal(0, #f.turns)
        f.t = 50
        f.c:poke()
        assert.equal(0, #f.q)
        f.t = 100
        f.c:poke()
        assert.equal(1, #f.q)
    end)

    it("follows a pass with another while the writer appended many frames, and ends the "
       .. "cycle in the writer's turn once a pass finds few", function()
        local f = make()
        f.c:poke()
        f.pass(0, 5000, 5000)           -- 5000 new: another pass at once, no interval
        assert.equal(1, #f.q)
        assert.equal(0, #f.turns)
        f.pass(0, 6000, 6000)           -- 1000 new: again
        assert.equal(1, #f.q)
        f.pass(0, 6000 + ckpt.FINISH_FRAMES, 6000 + ckpt.FINISH_FRAMES) -- few: the turn
        assert.equal(0, #f.q)
        assert.equal(1, #f.turns)
        f.turn(6300)
        local st = f.store.stats
        assert.same({ 4, 1, 0, 0 }, { st.checkpoints, st.checkpoints_finish,
                                      st.checkpoints_inline, st.checkpoint_failures })
        assert.equal(6300, st.wal_frames)
        f.c:poke() -- the cycle is over: the interval again (it began at t = 0)
        assert.equal(0, #f.q)
        f.t = 100
        f.c:poke()
        assert.equal(1, #f.q)
        f.pass(0, 3000, 3000)
        -- the WAL started again between two passes (fewer frames than the last one saw):
        -- the cycle is over, no turn
        f.pass(0, 40, 40)
        assert.equal(0, #f.turns)
        assert.equal(0, #f.q)
    end)

    it("sends checkpoints to the writer's turn past the bound until the WAL is small (I-7)",
       function()
        local f = make { max_frames = 1000 }
        f.c:poke()
        f.pass(0, 1200, 800)            -- a reader held frames back: past the bound
        assert.equal(0, #f.q)
        assert.equal(1, #f.turns)
        f.turn(1500)                    -- still held: the next one in turn again
        f.c:poke()
        assert.equal(1, #f.turns)
        f.turn(20)                      -- let go: the WAL started again
        f.c:poke()                      -- the interval again
        assert.equal(0, #f.turns)
        assert.equal(0, #f.q)
        f.t = 100
        f.c:poke()
        assert.equal(1, #f.q)
        assert.equal(2, f.store.stats.checkpoints_inline)
    end)

    it("counts a failure and tries again at the next interval; BUSY is no failure", function()
        local f = make()
        f.c:poke()
        f.pass(nil, "IoError: uv work queue failed")
        assert.equal(1, f.store.stats.checkpoint_failures)
        assert.equal(0, #f.turns)
        f.t = 100
        f.c:poke()
        f.pass(5, 10, 0)                -- another connection's checkpoint ran
        assert.equal(1, f.store.stats.checkpoint_failures)
        assert.equal(0, f.store.stats.checkpoints)
        -- a cycle's last copy failing in the writer's turn: not tried again at every call
        f.t = 200
        f.c:poke()
        f.pass(0, 100, 100)             -- few frames: finish in turn
        f.turn_answer = { nil, "IoError: disk", "io" }
        table.remove(f.turns, 1)()
        assert.equal(2, f.store.stats.checkpoint_failures)
        f.c:poke()
        f.t = 299
        f.c:poke()
        assert.equal(0, #f.turns)
        assert.equal(0, #f.q)
        f.t = 300                       -- the interval since the cycle began
        f.c:poke()
        assert.equal(1, #f.q)
    end)

    it("closes its connection once, after a pass in flight, and starts nothing after",
       function()
        local f = make()
        f.c:poke()
        f.c:close()
        assert.equal(0, f.closed)       -- never under a running checkpoint
        f.pass(0, 5000, 5000)
        assert.equal(1, f.closed)
        assert.equal(0, #f.q)           -- no next pass
        f.c:close()
        f.t = 1000
        f.c:poke()
        assert.equal(0, #f.q)
        assert.equal(1, f.closed)
        local g = make()
        g.c:close()                     -- idle: at once
        assert.equal(1, g.closed)
    end)
end)
