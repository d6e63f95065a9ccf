-- The victim of the kill -9 loop (spec/ron/ledger/ledger_pg_host_spec.lua): commits forever
-- against PostgreSQL from a few concurrent tasks, one ledger node, until SIGKILL ends it
-- mid-commit. Prints "ready" once its first commit is answered. The last task commits
-- batches (commit_many of 2-5 requests, the batch path, LED-53), so a kill also lands in a
-- batch's record, reserving or finalizing.
--
--   ron-accounting run tests/ledger/ledger-kill-child.lua --conninfo C --schema S
--       --node N --seed K [--tasks 3]
local task = require("ron.base.task")

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "../../lua/?.lua;" .. here .. "../../lua/?/init.lua;" .. package.path
local store = require("ron.ledger.store")
local L = require("ron.ledger.ledger")

local o = { tasks = 3 }
for i = 1, #arg, 2 do o[arg[i]:gsub("^%-%-", "")] = arg[i + 1] end
local seed = assert(tonumber(o.seed), "--seed")

local USD = { code = "USD", scale = 2 }
local EXT = ("E"):rep(16)
local PAYERS = { ("A"):rep(16), ("B"):rep(16), ("C"):rep(16), ("K"):rep(16) }

task.spawn("victim", function()
    -- node: the connections carry it, so the heir's recover() fences them (LED-65)
    local s = assert(store.open { backend = "postgres", conninfo = o.conninfo, schema = o.schema,
                                  connections = 3, connect_timeout_ms = 20000,
                                  query_timeout_ms = 20000, node = o.node })
    local led = L.new { store = s, node = o.node, nonce = "s" .. seed,
                        pause = function(i) task.sleep(math.min(1 + i, 10)) end }
    local x = seed % 2147483646 + 1
    local function rnd(n)
        x = (x * 16807) % 2147483647
        return x % n + 1
    end
    local said = false
    local hs = {}
    for t = 1, tonumber(o.tasks) do
        hs[t] = task.spawn("saga-" .. t, function()
            for i = 1, 1e9 do
                local function req(j)
                    local from = rnd(3) == 1 and EXT or PAYERS[rnd(#PAYERS)]
                    local to = PAYERS[rnd(#PAYERS)]
                    if to == from then to = EXT end
                    return { intent = string.format("c%d-%d-%d-%d", seed, t, i, j),
                             movements = { { from = from, to = to, asset = USD,
                                             amount = rnd(60) } } }
                end
                local r, err, code
                if t == tonumber(o.tasks) and t > 1 then
                    local list = {}
                    for j = 1, rnd(4) + 1 do list[j] = req(j) end
                    for _, res in ipairs(led:commit_many(list)) do
                        r, err, code = res[1], res[2], res[3]
                        if not r and code == L.ERR.Bug then break end
                    end
                else
                    r, err, code = led:commit(req(0))
                end
                if not said and (r or code) then
                    said = true
                    io.stdout:write("ready\n")
                    io.stdout:flush()
                end
                if not r and code == L.ERR.Bug then
                    io.stderr:write("ledger-kill-child: " .. tostring(err) .. "\n")
                    os.exit(3)
                end
            end
        end)
    end
    for _, h in ipairs(hs) do h:join() end
end)
