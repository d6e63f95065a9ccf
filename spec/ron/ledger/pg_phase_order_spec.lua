-- ron.ledger.store.pg_phase's statement order (issue 25): the balance rows' lock goes just
-- before the first posting write, the writes of tables no posting write touches move ahead
-- of it, and nothing else moves (a statement that may read what the posting writes change
-- keeps its place, and so does everything after it).
local pg_phase = require("ron.ledger.store.pg_phase")

-- ops by name, one statement per op -> the names of (rest, posts, tail)
local function order(names)
    local ops, stmts = {}, {}
    for i, n in ipairs(names) do
        ops[i] = { n }
        stmts[i] = { i = i }
    end
    local rest, posts, tail = pg_phase.order(ops, stmts)
    local function of(list)
        local out = {}
        for k, s in ipairs(list) do out[k] = names[s.i] end
        return out
    end
    return of(rest), of(posts), of(tail)
end

describe("ron.ledger.store.pg_phase: the order of a phase's statements", function()
    it("a batch's one transaction: the lock's window is the posting writes and the events",
       function()
        local rest, posts, tail = order {
            "put_intents", "put_intents", "reserve_postings", "ensure_head", "acquire_head",
            "count_accounts_at", "count_balances_at_least", "count_balances_at_most",
            "deactivate_many", "insert_postings", "store_transfers", "put_intents",
            "release_head", "append_events", "check_lease" }
        assert.same({ "put_intents", "put_intents", "reserve_postings", "ensure_head",
                      "acquire_head", "count_accounts_at", "count_balances_at_least",
                      "count_balances_at_most", "store_transfers", "put_intents",
                      "release_head" }, rest)
        assert.same({ "deactivate_many", "insert_postings" }, posts)
        assert.same({ "append_events", "check_lease" }, tail)
    end)

    it("the single path's finalize: its reads after the event stay after it", function()
        local rest, posts, tail = order {
            "deactivate_postings", "insert_postings", "store_transfer", "put_intent",
            "release_head", "delete_saga", "append_event", "get_event" }
        assert.same({ "store_transfer", "put_intent", "release_head", "delete_saga" }, rest)
        assert.same({ "deactivate_postings", "insert_postings" }, posts)
        assert.same({ "append_event", "get_event" }, tail)
    end)

    it("keeps the order from a statement that may read what the posting writes change",
       function()
        local rest, posts, tail = order {
            "create_book", "insert_postings", "put_intents", "reserve_postings",
            "get_balances", "store_transfers", "get_postings" }
        assert.same({ "create_book", "put_intents" }, rest)
        assert.same({ "insert_postings", "reserve_postings", "get_balances",
                      "store_transfers", "get_postings" }, posts)
        assert.same({}, tail)
    end)

    it("a posting write after an event: the phase as it is, the lock first", function()
        local rest, posts, tail = order { "put_intent", "append_event", "insert_postings" }
        assert.same({}, rest)
        assert.same({ "put_intent", "append_event", "insert_postings" }, posts)
        assert.same({}, tail)
    end)

    it("a phase without posting writes is sent as it is", function()
        local rest, posts, tail = order { "save_saga", "put_intents", "get_accounts" }
        assert.same({ "save_saga", "put_intents", "get_accounts" }, rest)
        assert.same({}, posts)
        assert.same({}, tail)
    end)
end)
