-- ron.base.net.postgres_c lifetimes: a script that ends with a connection in some state must
-- neither hang nor crash. `ron-accounting run tests/pg/lifetime.lua CONNINFO CASE`; each
-- case prints what it saw on stdout and ends with a line "END <case>" from the last
-- callback (or just before os.exit). The spec (postgres_spec.lua) checks the exit status
-- and the lines.
--   idle       connected, one query answered, the connection left open and idle: the
--              script ends at once (an idle connection is unreferenced)
--   inflight   the main chunk returns while a query runs: the loop waits for its answer
--   exit       os.exit(0) from a timer while a query runs
--   dropped    the last reference dropped mid-query (and collected): the answer still comes
--   closed     conn:close() mid-query: the callback gets "closed"; pq.live() drops to 0
--   connecting a server that accepts and never answers: the connect times out (timeout_ms)
--   refused    nothing listens: the connect fails with class "network"
local pq = require("ron.base.net.postgres_c")
local uv = require("luv")
local conninfo, case = ...

local function out(...)
    local t = {}
    for i = 1, select("#", ...) do t[i] = tostring((select(i, ...))) end
    print(table.concat(t, " "))
    io.stdout:flush()
end

-- On connection c: a query that answers v after delay seconds; the answer printed, then after().
local function late(c, delay, v, after)
    c:query(("select pg_sleep(%s), '%s' as v"):format(delay, v), nil, function(rows, qerr)
        out("answer", rows and rows[1].v, qerr)
        after()
    end)
end

if case == "idle" then
    _G.keep = pq.connect(conninfo, function(c, err)
        assert(c, err)
        c:query("select 40 + $1::int as v", { 2 }, function(rows, qerr)
            assert(rows, qerr)
            out("answer", rows[1].v, c:status())
            out("END idle")
        end)
    end)
elseif case == "inflight" then
    pq.connect(conninfo, function(c, err)
        assert(c, err)
        late(c, "0.2", "late", function() out("END inflight") end)
    end)
elseif case == "exit" then
    pq.connect(conninfo, function(c, err)
        assert(c, err)
        c:query("select pg_sleep(10)", nil, function() out("never") end)
        local t = uv.new_timer()
        t:start(20, 0, function()
            out("END exit")
            os.exit(0)
        end)
    end)
elseif case == "dropped" then
    pq.connect(conninfo, function(c, err)
        assert(c, err)
        late(c, "0.05", "still here", function()
            -- the anchor goes once this callback returns: collect on a later turn, then
            -- the struct is freed when its timer's close callback has run
            local t, turns = uv.new_timer(), 0
            t:start(5, 5, function()
                turns = turns + 1
                collectgarbage()
                collectgarbage()
                if turns < 3 then return end
                t:close()
                out("live", pq.live())
                out("END dropped")
            end)
        end)
        c = nil -- luacheck: ignore
        collectgarbage()
        collectgarbage()
    end)
elseif case == "closed" then
    pq.connect(conninfo, function(c, err)
        assert(c, err)
        c:query("select pg_sleep(5)", nil, function(rows, qerr, st, cls)
            out("answer", rows, qerr, st, cls, c:status())
            local t = uv.new_timer()
            t:start(10, 0, function()
                t:close()
                out("live", pq.live())
                out("END closed")
            end)
        end)
        c:close()
        out("status", c:status(), pcall(c.query, c, "select 1", nil, function() end))
    end)
elseif case == "connecting" then
    local srv = uv.new_tcp()
    assert(srv:bind("127.0.0.1", 0))
    local held = {}
    assert(srv:listen(8, function()
        local cli = uv.new_tcp()
        srv:accept(cli)
        held[#held + 1] = cli -- accepted, never answered
    end))
    local port = srv:getsockname().port
    pq.connect(("host=127.0.0.1 port=%d dbname=x user=y sslmode=disable"):format(port),
        function(c, err, st, cls)
            out("answer", c, err, st, cls)
            for _, h in ipairs(held) do h:close() end
            srv:close()
            out("END connecting")
        end, { timeout_ms = 100 })
elseif case == "refused" then
    local srv = uv.new_tcp() -- a port that was free a moment ago
    assert(srv:bind("127.0.0.1", 0))
    local port = srv:getsockname().port
    srv:close()
    pq.connect(("host=127.0.0.1 port=%d dbname=x user=y"):format(port), function(c, err, st, cls)
        out("answer", c, err, st, cls)
        out("END refused")
    end)
else
    error("unknown case " .. tostring(case))
end
