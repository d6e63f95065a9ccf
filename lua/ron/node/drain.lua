-- ron.node.drain: what a graceful stop (SIGINT/SIGTERM) left for recovery (issue 27). The
-- stop drains first — the runtime's workers and the put_many in flight (the rater's commits),
-- then the wallet's committers and calls, each within drain_deadline_ms — and only then
-- closes the stores; what the deadline cut off stays as pending sagas in the ledger. This
-- reads each ledger's pending sagas of its node before the stores close and says them in
-- the log: none after a clean drain; else how many, and that the next start (or `ron-accounting
-- ledger recover`) finishes them.
--
--   drain.report(d, log)   -- d: the daemon; log(level, fmt, ...) -> { [name] = n | false }
local ipairs, pcall, tostring, type = ipairs, pcall, tostring, type

local _M = {}

-- The engines whose stores are open now: { name, led } (never opens one: a stop does not
-- start the exporter's ledger).
local function engines(d)
    local out, e = {}, d.exporter
    if type(e) == "table" and e.is_ready and e.led then
        out[#out + 1] = { name = "exporter", led = e.led }
    end
    local w = d.wallet
    if w and w.store and w.led then out[#out + 1] = { name = "wallet", led = w.led } end
    return out
end

function _M.report(d, log)
    local res = {}
    for _, x in ipairs(engines(d)) do
        local led = x.led
        local store = led.store
        local list, err
        if type(store) == "table" and type(store.list_pending_sagas) == "function" then
            local ok, l, e = pcall(store.list_pending_sagas, store, led.node)
            list, err = ok and l or nil, ok and e or l
        end
        if not list then
            res[x.name] = false
            log("WARN", "stop: the %s ledger's pending sagas could not be read: %s", x.name,
                tostring(err or "no store"))
        else
            res[x.name] = #list
            if #list > 0 then
                log("WARN", "stop: %d saga(s) of the %s ledger (node %s) left pending at the "
                    .. "drain deadline: the next start (or `ron-accounting ledger recover`) "
                    .. "finishes them", #list, x.name, tostring(led.node))
            else
                log("INFO", "stop: the %s ledger's commits all finished (no pending saga)",
                    x.name)
            end
        end
    end
    return res
end

return _M
