-- ron.accounting.runtime.offers: the one owner of what is offered (issue 26, STYLE.md 9b).
-- Unit cases over a fake pending channel, then the structural rule: no other file of the
-- runtime writes the offer state.
local S = require("support")
local offers_mod = require("ron.accounting.runtime.offers")

local T = "123e4567-e89b-12d3-a456-426614174000"

local function slice(seq, dim)
    return { tenant = T, dimension = dim or "bytes", id = { seq = seq }, b3 = ("%064x"):format(seq) }
end

-- A channel of cap slots that only counts what it took.
local function channel(cap)
    local ch = { n = 0, got = {} }
    function ch:try_send(s)
        if self.n >= cap then return false end
        self.n = self.n + 1
        self.got[#self.got + 1] = s.id.seq
        return true
    end
    return ch
end

local function new(cap, pending, audit)
    return offers_mod.new { pending = channel(cap), ack_lru = 4,
                            list_pending = function() return pending or {} end, audit = audit }
end

describe("ron.accounting.runtime.offers", function()
    it("offers once; a full channel sheds busy (counted, audited) and asks for a re-offer",
       function()
        local audited = {}
        local o = new(1, nil, function(kind, a) audited[#audited + 1] = { kind, a.reason } end)
        o.need = false
        local s1, s2 = slice(1), slice(2)
        assert.is_true(o:offer(s1))
        assert.is_true(o:offer(s1)) -- in the pipeline already: not sent again
        assert.same({ 1 }, o.pending.got)
        assert.is_false(o:offer(s2))
        assert.equal(1, o.rejected.busy)
        assert.is_true(o.need)
        assert.same({ { "shed", "busy" } }, audited)
        assert.is_nil(o.offered[T .. "/bytes/2"])
    end)

    it("a fresh listing of a slice its stream delivered is not offered again (the race of "
       .. "d3240b3: a late list re-offered a slice exported and ACKed meanwhile)", function()
        local o = new(8)
        o.need = false
        local s1, s2 = slice(1), slice(2)
        assert.is_true(o:offer(s1))
        o:delivered(T .. "/bytes", s1)
        assert.is_number(o:acked(s1))
        o:feed({ s1, s2 }) -- the other pool call's list, which still holds seq 1
        assert.same({ 1, 2 }, o.pending.got)
        assert.equal(1, o.stale_listed)
        assert.is_true(o:was_delivered(s1))
        assert.is_false(o:was_delivered(s2))
    end)

    it("a blocked stream waits for its slice (I-5): later ones stay pending, need is set",
       function()
        local k = T .. "/bytes"
        local o = new(8)
        o.need = false
        o:block(k, 3)
        assert.is_true(o:waits(k, 4))
        assert.is_false(o:waits(k, 3))
        o:reoffer_list({ slice(4) })
        assert.same({}, o.pending.got)
        assert.is_true(o.need)
        assert.equal("blocked", o:route_check(k, 5))
        assert.is_nil(o:route_check(k, 3)) -- the one it waits for: unblocks
        assert.is_nil(o:route_check(k, 5))
        o:block(k, 7)
        o:block(k, 6) -- the earlier one wins
        assert.equal("blocked", o:route_check(k, 7))
    end)

    it("an undelivered slice blocks its stream at it; a conflict kills the stream", function()
        local k = T .. "/bytes"
        local o = new(8, { slice(5), slice(6) })
        local s5 = slice(5)
        o:offer(s5)
        o:undelivered(k, s5, false)
        assert.is_nil(o.offered[k .. "/5"])
        assert.is_true(o.need)
        o:reoffer() -- the walk: seq 5 again, 6 waits behind it
        assert.same({ 5, 5 }, o.pending.got)
        assert.is_true(o.need) -- 6 still waits behind 5
        o:undelivered(k, s5, true)
        assert.equal("conflict", o:route_check(k, 5))
        o:reoffer_list({ slice(5) })
        assert.same({ 5, 5 }, o.pending.got) -- a dead stream is not offered
    end)

    it("keeps the ACK LRU within ack_lru and drops a slice from the pipeline at its ACK",
       function()
        local o = new(64)
        for seq = 1, 10 do
            local s = slice(seq)
            o:offer(s)
            o:delivered(T .. "/bytes", s)
            o:acked(s)
        end
        local n = 0
        for _ in pairs(o.lru) do n = n + 1 end
        assert.equal(4, n)
        assert.equal(4, o.lru_tail - o.lru_head + 1)
        assert.is_nil(next(o.offered))
        assert.is_nil(next(o.offered_at))
    end)

    it("is the only writer of the offer state: no other runtime file assigns it", function()
        local dir = S.root .. "lua/ron/accounting/runtime/"
        local offenders = {}
        for _, f in ipairs { "init", "feed", "router", "worker", "puts", "acks", "stuck",
                             "readiness", "bus", "metrics", "rt" } do
            local fh = assert(io.open(dir .. f .. ".lua"))
            local src = fh:read("*a")
            fh:close()
            for _, pat in ipairs { "offered%s*%[[^%]]+%]%s*=[^=]", "offered_at%s*%[[^%]]+%]%s*=[^=]",
                                   "%.need%s*=[^=]", "need_reoffer", "blocked_seq", "acked_seq",
                                   "%.lru%s*%[", "%.dead%s*=[^=]" } do
                if src:find(pat) then offenders[#offenders + 1] = f .. ".lua: " .. pat end
            end
        end
        assert.same({}, offenders)
    end)
end)
