-- tests/host/rating_run.lua: what the in-process halves of the rating end-to-end tests
-- (ledger-rate.lua, wallet-e2e.lua, usage-windows.lua; `ron-accounting run` puts this
-- directory on package.path) share: the ledger store their DB argument names, a real meter
-- with its WAL in the work directory on a clock moved by hand, and the ledger exporter
-- rating into that store with the work directory's card.
--
--   local R = require "rating_run"
--   R.store_spec(work, db)          -- PostgreSQL (db a conninfo "postgres...") or an
--                                   -- offloaded SQLite file work/l.db
--   R.meter(work, host, clock)      -- acct.open, one-minute windows; clock = { now = s }
--   R.exporter(work, store, node)   -- ron.ledger.exporter, card work/card.lua, book main
local acct = require "ron.accounting"
local lexp = require "ron.ledger.exporter"

local _M = {}

function _M.store_spec(work, db)
    if db and db:match("^postgres") then
        return { backend = "postgres", conninfo = db, connections = 4 }
    end
    return { backend = "sqlite", path = work .. "/l.db", offload = true }
end

function _M.meter(work, host, clock)
    return assert(acct.open { capacity_rows = 1024, shards = 4, window_len_s = 60, host = host,
                              clock = function() return clock.now end,
                              wal = { dir = work .. "/wal" } })
end

function _M.exporter(work, store, node)
    return assert(lexp.new { store = store, card = work .. "/card.lua", book = "main",
                             node = node })
end

return _M
