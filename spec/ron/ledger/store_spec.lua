-- The Store conformance suite (spec/ron/ledger/store_conformance.lua) under plain busted: on
-- SQLite (the synchronous driver, a fresh database file per case) and on the in-memory store
-- when lua/ron/ledger/store/memory.lua exists. PostgreSQL and the offloaded SQLite driver run
-- the same suite inside the host: spec/ron/ledger/store_host_spec.lua.
local S = require("support")
local conformance = require("ron.ledger.store_conformance")
local store = require("ron.ledger.store")
local sqlite = require("ron.ledger.store.sqlite")
local schema = require("ron.ledger.store.schema")

local function fresh_path() return S.tmpname(".sqlite") end -- nothing there yet

conformance.run("sqlite", function()
    -- synchronous = "normal": no fsync per statement keeps the suite fast (FULL, the
    -- default, is checked below)
    return assert(store.open { backend = "sqlite", path = fresh_path(), synchronous = "normal" })
end, {
    reopen = function(s)
        return store.open { backend = "sqlite", path = s.path }
    end,
})

if pcall(require, "ron.ledger.store.memory") then
    conformance.run("memory", function() return assert(store.open { backend = "memory" }) end)
else
    describe("store conformance: memory", function()
        pending("lua/ron/ledger/store/memory.lua is not on this branch")
    end)
end

describe("ron.ledger.store.sqlite", function()
    it("validates its options", function()
        S.refuses(sqlite.open, {
            { { path = "x", bogus = 1 }, 'sqlite.open: unknown option "bogus"' },
            { {}, "sqlite.open: path must be a non-empty string" },
            { { path = "x", synchronous = "off" } },
        })
        assert.has_error(function() store.open { backend = "nope" } end)
        for _, v in ipairs { 0, 1.5, "8", 65537 } do
            assert.has_error(function() sqlite.open { path = "x", cache_mb = v } end,
                             "sqlite.open: cache_mb must be an integer in 1..65536")
        end
    end)

    it("a bounded page cache of cache_mb (default 64 MB, not SQLite's 2 MB), read-only "
       .. "connections too", function()
        local p = fresh_path()
        for _, c in ipairs { { nil, -65536 }, { 8, -8192 } } do
            local s = assert(sqlite.open { path = p, cache_mb = c[1] })
            local rows = assert(s.drv:read("PRAGMA cache_size", { n = 0 }))
            assert.equal(c[2], rows[1][1])
            s:close()
        end
        local r = assert(sqlite.open { path = p, readonly = true, cache_mb = 16 })
        assert.equal(-16384, assert(r.drv:read("PRAGMA cache_size", { n = 0 }))[1][1])
        r:close()
    end)

    it("opens in WAL mode; durability ack (default): NORMAL and flush() under FULL; "
       .. "statement: FULL (LED-23, LED-50)", function()
        local p = fresh_path()
        local s = assert(sqlite.open { path = p })
        local rows = assert(s.drv:read("PRAGMA journal_mode", { n = 0 }))
        assert.equal("wal", rows[1][1])
        assert.equal("ack", s.durability)
        rows = assert(s.drv:read("PRAGMA synchronous", { n = 0 }))
        assert.equal(1, rows[1][1]) -- NORMAL
        -- flush writes a changed row (an unchanged page would commit no frame, sync nothing)
        assert.equal(1, s:flush())
        local v1 = s:get_meta("flush")
        assert.equal(1, s:flush())
        assert.are_not.equal(v1, s:get_meta("flush"))
        rows = assert(s.drv:read("PRAGMA synchronous", { n = 0 }))
        assert.equal(1, rows[1][1]) -- back to NORMAL after the flush
        s:close()
        for _, o in ipairs { { durability = "statement" }, { synchronous = "full" },
                             { durability = "statement", synchronous = "full" } } do
            o.path = p
            s = assert(sqlite.open(o))
            assert.equal("statement", s.durability)
            rows = assert(s.drv:read("PRAGMA synchronous", { n = 0 }))
            assert.equal(2, rows[1][1]) -- FULL
            assert.equal(0, s:flush())
            s:close()
        end
        s = assert(sqlite.open { path = p, synchronous = "normal" })
        assert.equal("ack", s.durability)
        s:close()
        assert.has_error(function() sqlite.open { path = p, durability = "never" } end)
        assert.has_error(function()
            sqlite.open { path = p, durability = "ack", synchronous = "full" }
        end)
    end)

    it("refuses a database with a newer schema version (LED-24)", function()
        local p = fresh_path()
        local s = assert(sqlite.open { path = p })
        assert.equal(1, s.drv:write("UPDATE ledger_meta SET value = ? WHERE key = ?",
                                    { n = 2, tostring(schema.VERSION + 1), "schema_version" }))
        s:close()
        local s2, err, class = sqlite.open { path = p }
        assert.is_nil(s2)
        assert.equal("bug", class)
        assert.matches(("SchemaError: the store holds schema version %d, newer than this "
                        .. "code's %d"):format(schema.VERSION + 1, schema.VERSION), err, 1, true)
    end)

    it("classifies errors: busy is retry, a bad statement is bug, a bad path is io", function()
        assert.equal("retry", sqlite.classify(5))
        assert.equal("retry", sqlite.classify(6))
        assert.equal("retry", sqlite.classify(5 + 256)) -- SQLITE_BUSY_RECOVERY
        assert.equal("io", sqlite.classify(10 + 3 * 256)) -- SQLITE_IOERR_WRITE
        assert.equal("io", sqlite.classify(13))
        assert.equal("bug", sqlite.classify(19))
        local s = assert(sqlite.open { path = fresh_path() })
        local n, err, class = s.drv:write("INSERT INTO nope VALUES (1)", { n = 0 })
        assert.is_nil(n)
        assert.equal("bug", class)
        assert.matches("^StoreError: SQLite prepare: no such table", err)
        s:close()
        local s2, err2, class2 = sqlite.open { path = "/nonexistent-dir/x.sqlite" }
        assert.is_nil(s2)
        assert.equal("io", class2)
        assert.matches("^IoError: SQLite open", err2)
    end)

    it("answers retry while another connection holds the write lock", function()
        local p = fresh_path()
        local s1 = assert(sqlite.open { path = p })
        local s2 = assert(sqlite.open { path = p, busy_timeout_ms = 0 })
        assert(s1.drv:exec("BEGIN IMMEDIATE"))
        local n, err, class = s2:create_book("b", nil)
        assert.is_nil(n)
        assert.equal("retry", class)
        assert.matches("^Busy: ", err)
        assert(s1.drv:exec("ROLLBACK"))
        assert.equal(1, s2:create_book("b", nil))
        s1:close()
        s2:close()
    end)

    it("a phase with opts.flush (ack) is ONE transaction whose commit is the sync "
       .. "(issue 25)", function()
        local s = assert(sqlite.open { path = fresh_path() })
        local Conn, trace = getmetatable(s.drv), {}
        s.drv.exec = function(self, text)
            trace[#trace + 1] = text
            return Conn.exec(self, text)
        end
        s.drv.write = function(self, text, binds)
            if text:find("'flush'", 1, true) then trace[#trace + 1] = "flush row" end
            return Conn.write(self, text, binds)
        end
        local res = assert(s:apply({ { "create_book", "b1", nil, expect = 1 } }, { flush = true }))
        assert.is_true(res.ok)
        assert.is_true(res.flushed)
        assert.same({ "PRAGMA synchronous = FULL", "BEGIN IMMEDIATE", "flush row", "COMMIT",
                      "PRAGMA synchronous = NORMAL" }, trace)
        local v1 = s:get_meta("flush")
        assert.is_string(v1)
        -- a missed guard: nothing applied, no flush row, NORMAL again
        trace = {}
        res = assert(s:apply({ { "create_book", "b2", nil, expect = 1 },
                               { "create_book", "b1", nil, expect = 1 } }, { flush = true }))
        assert.is_false(res.ok)
        assert.equal(2, res.at)
        assert.is_nil(res.flushed)
        assert.same({ "PRAGMA synchronous = FULL", "BEGIN IMMEDIATE", "ROLLBACK",
                      "PRAGMA synchronous = NORMAL" }, trace)
        assert.is_nil(s:get_book("b2"))
        assert.equal(v1, s:get_meta("flush"))
        assert.equal(1, assert(s.drv:read("PRAGMA synchronous", { n = 0 }))[1][1])
        s:close()
    end)

    it("serializes the values that cross to the pool, int64 included", function()
        local ffi = require("ffi")
        local big = ffi.new("int64_t", -2) ^ 61
        local a, b, c, d = sqlite.unpack_(sqlite.pack(
            "a\0\n\r\"\\\255", { 1, nil, 3, n = 3, k = { x = true } }, big, nil))
        assert.equal("a\0\n\r\"\\\255", a)
        assert.equal(3, b.n)
        assert.equal(3, b[3])
        assert.is_true(b.k.x)
        assert.is_true(c == big)
        assert.is_nil(d)
    end)

    it("passes the values to the pool as string.buffer bytes, not Lua source (issue 25)",
       function()
        local ffi = require("ffi")
        local packed = sqlite.pack("k", { 1, nil, 3, n = 3 })
        assert.is_nil(packed:match("^return "))
        local a, b = sqlite.unpack_(packed)
        assert.equal("k", a)
        assert.same({ 1, nil, 3, n = 3 }, b)
        -- a cdata string.buffer cannot take goes as the text, cast to int64_t as before
        local text = sqlite.pack(ffi.new("uint8_t", 7))
        assert.truthy(text:match("^return "))
        assert.is_true(sqlite.unpack_(text) == ffi.new("int64_t", 7))
    end)
end)
