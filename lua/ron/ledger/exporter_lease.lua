-- ron.ledger.exporter_lease: the rater's node lease on the ledger (LED-71; issue 29 item 3;
-- docs/LEDGER.md "Recovery", docs/WALLET.md §6). A rater (ron.ledger.exporter) that dies
-- mid-commit keeps its sagas — a tenant wallet's postings reserved by a charge, a stream
-- head — and every wallet node answers that tenant 503 account_busy until they are
-- recovered. With a lease it is a node of the fleet like the wallet daemons: it acquires
-- its node's row (waiting while a survivor recovers it), every write of its engine carries
-- the lease's guard, a heartbeat renews it every ttl_ms / 5; when it dies, a wallet node's
-- scan (ron.wallet.fleet, ron.ledger.lease:scan: every expired row, the rater's too) takes
-- it over and recovers its sagas within ttl_ms + 2 x ttl_ms / 5 plus the recovery.
--
--   exporter.new { ..., lease = { ttl_ms = 5000 } }   -- off without it
--   xlease.check(v, key) -> true | nil, err
--   xlease.start(e)      -- from E:_start, its engine made: -> true | nil, err (stopped)
--   xlease.renew(e)      -- the heartbeat's step -> true | false (lost) | nil, err
--
-- A lost lease (this process stopped for longer than ttl_ms: a survivor took it over and
-- finished its sagas) fences its engine for good; the exporter drops it, so the next put
-- makes a new engine under a new epoch (E:ready(), once the row is free), and the slices
-- the fenced engine failed are retried by the runtime as any failed put.
local lease = require("ron.ledger.lease")
local task = require("ron.base.task")
local uv = require("luv")

local floor, format, pairs, tostring, type = math.floor, string.format, pairs, tostring, type

local _M = {}

local KEYS = { ttl_ms = true, sleep = true, clock = true, log = true, heartbeat = true }

function _M.check(v, key)
    if v == nil then return true end
    if type(v) ~= "table" then return nil, key .. " must be a table { ttl_ms = ... }" end
    for k in pairs(v) do
        if not KEYS[k] then return nil, format("unknown key '%s.%s'", key, tostring(k)) end
    end
    local t = v.ttl_ms
    if type(t) ~= "number" or t % 1 ~= 0 or t < 500 or t > 600000 then
        return nil, key .. ".ttl_ms must be an integer in 500..600000"
    end
    return true
end

local function log_line(line) io.stderr:write("ron.ledger.exporter: ", line, "\n") end

function _M.start(e)
    local o = e.lease_opts
    local l = lease.new { store = e.store, node = e.node, ttl_ms = o.ttl_ms,
                          renew_ms = floor(o.ttl_ms / 5), sleep = o.sleep or task.sleep,
                          clock = o.clock or uv.now, log = o.log or log_line }
    if not l:acquire(function() return e.closed end) then
        return nil, "LedgerError: closed while waiting for the node's lease"
    end
    e.led.lease, e.lease = l, l
    if o.heartbeat ~= false then
        task.spawn("ledger_rater_lease", function()
            while not e.closed and e.lease == l do
                if not task.sleep(l.renew_ms) then break end
                if e.lease == l and _M.renew(e) == false then break end
            end
        end)
    end
    return true
end

function _M.renew(e)
    local l = e.lease
    if not l then return false end
    local ok, err = l:renew()
    if ok == false then
        -- fenced for good: a new engine and lease on the next put (E:ready)
        e.lease, e.led, e.is_ready = nil, nil, nil
        e.lease_lost = (e.lease_lost or 0) + 1
    end
    return ok, err
end

return _M
