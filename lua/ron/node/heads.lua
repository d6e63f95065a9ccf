-- ron.node.heads: the stream heads the ledger lists, seeded into the meter
-- before the runtime starts (a micronode would fork every chain if it sealed first).
local task = require("ron.base.task")
local log = require("ron.node.log")

local ipairs, tostring = ipairs, tostring

local _M = {}

-- Seeds the meter with every head the exporter lists. A micronode (no WAL: its heads
-- may be gone) retries until the ledger answers or the daemon stops, since sealing
-- before would fork every chain; a macronode has its heads in the plane and WAL, so the
-- ledger's are a cross-check and a failure to list them is only logged. -> true to start
-- the runtime, false when the daemon stopped meanwhile.
function _M.seed(d, exporter)
    local amnesia = d.cfg.profile == "micronode"
    local hs, err
    local delay = 100
    while not d.stopping do
        hs, err = exporter:list_heads()
        if hs or not amnesia then break end
        log("WARN", "cannot list the ledger's stream heads (%s); nothing is sealed until it "
            .. "answers (micronode: sealing now would fork the chains); retry in %d ms",
            tostring(err), delay)
        if not task.sleep(delay) then return false end
        delay = math.min(delay * 2, 5000)
    end
    if d.stopping then return false end
    if not hs then
        log("WARN", "cannot list the ledger's stream heads: %s (the WAL's are used)", tostring(err))
        return true
    end
    local seeded, own, failed = 0, 0, 0
    for _, h in ipairs(hs) do
        local ok, serr = d.meter:seed_head(h.tenant, h.dimension, h)
        if ok then
            seeded = seeded + 1
        elseif tostring(serr):match("^Incompatible") then
            own = own + 1 -- this node's chain is ahead (slices not exported yet) or forked
        else
            failed = failed + 1
            if failed <= 3 then
                log("WARN", "stream head %s/%s: %s", h.tenant, h.dimension, tostring(serr))
            end
        end
    end
    log(own > 0 and amnesia and "WARN" or "INFO",
        "stream heads from the ledger: %d listed, %d continued or already equal, %d where "
        .. "this node has its own chain%s, %d refused", #hs, seeded, own,
        amnesia and "" or " (slices not exported yet)", failed)
    return true
end

return _M
