-- ron.node.attest: the daemon's `audit_attest` task (issue 16, PRODUCT.md §9,
-- docs/AUDIT.md "Cross-attestation", AUD-I-30): each new signed checkpoint of the daemon's
-- audit trail is carried into the event feed of every ledger the daemon commits to (the
-- ledger exporter's book, the wallet's), so usage, money and audit attest to each other.
--
-- Every `audit.attest_interval_ms` (and once right at start: the last checkpoint of the
-- previous run, written while the daemon stopped, is carried then), the task reads the
-- size of the trail's latest checkpoint and, for each ledger that has not carried that
-- size yet, reads the note from <audit dir>/cp-<size>.note (renamed into place whole, so
-- never half a note) and calls the ledger's attest(cp) (ron.ledger.ledger:attest, one
-- "audit.checkpoint" event, idempotent per (origin, size)). A ledger that fails (starting,
-- a store error) is tried again next round. A ledger that already carries ANOTHER root for
-- that (origin, size) answers Conflict: the audit log was rewritten or restored from an old
-- backup; that is logged as an ERROR, counted (audit_attest_conflicts_total) and recorded
-- in the trail itself (kind "attest", event "conflict"), and not retried for that size.
local attest = require("ron.ledger.attest")
local L = require("ron.ledger.ledger")
local task = require("ron.base.task")
local FAM = require("ron.node.families")
local metrics = require("ron.base.metrics")

local ipairs, tostring = ipairs, tostring

local _M = {}

local A = {}
A.__index = A

-- o = { audit = host (ron.audit.host), dir = its log directory, every_ms,
--       targets = { { name = "exporter", attest = fn(cp) -> r | nil, err, code }, ... },
--       log = fn(level, fmt, ...) }
function _M.new(o)
    local self = setmetatable({ audit = o.audit, dir = o.dir, every_ms = o.every_ms,
                                targets = {}, log = o.log, carried = 0, conflicts = 0,
                                failures = 0 }, A)
    for i, t in ipairs(o.targets) do
        self.targets[i] = { name = t.name, attest = t.attest, size = nil }
    end
    return self
end

-- One round; -> the number of ledgers that carried a new checkpoint.
function A:round()
    local latest = self.audit:latest_checkpoint()
    if not latest then return 0 end
    local size, cp, n = latest.size, nil, 0
    for _, t in ipairs(self.targets) do
        if t.size ~= size then
            if not cp then
                local err
                cp, err = attest.latest(self.dir, size)
                if not cp then
                    self.failures = self.failures + 1
                    self.log("WARN", "audit attest: checkpoint %d: %s", size, tostring(err))
                    return n
                end
            end
            local r, err, code = t.attest(cp)
            if r then
                if not t.size then -- once per ledger and run: where the carrying starts
                    self.log("INFO", "audit attest: the %s ledger carries checkpoint %s size "
                             .. "%d at event seq %s%s", t.name, cp.origin, size,
                             tostring(r.event_seq), r.replayed and " (already there)" or "")
                end
                t.size = size
                if not r.replayed then
                    n = n + 1
                    self.carried = self.carried + 1
                end
            elseif code == L.ERR.Conflict then
                t.size = size
                self.conflicts = self.conflicts + 1
                self.log("ERROR", "audit attest: the %s ledger: %s", t.name, tostring(err))
                self.audit:emit("attest", { event = "conflict", ledger = t.name,
                                            origin = cp.origin, size = cp.size,
                                            root = cp.root })
            else
                self.failures = self.failures + 1
                if not t.warned then -- a ledger still starting: quiet until it answers
                    t.warned = true
                    self.log("WARN", "audit attest: the %s ledger: %s (retrying)", t.name,
                             tostring(err))
                end
            end
        end
    end
    return n
end

function A:run()
    repeat self:round() until not task.sleep(self.every_ms)
end

-- Several (one per chain of a sharded trail, AUD-I-38) as one: one task, one round each,
-- the metrics summed.
local G = {}
G.__index = G
function _M.group(parts)
    if #parts == 1 then return parts[1] end
    return setmetatable({ parts = parts, every_ms = parts[1].every_ms }, G)
end
function G:round()
    local n = 0
    for _, p in ipairs(self.parts) do n = n + p:round() end
    return n
end
G.run = A.run
function G:metrics_text()
    local sum = setmetatable({ carried = 0, conflicts = 0, failures = 0 }, A)
    for _, p in ipairs(self.parts) do
        sum.carried, sum.conflicts = sum.carried + p.carried, sum.conflicts + p.conflicts
        sum.failures = sum.failures + p.failures
    end
    return sum:metrics_text()
end

-- The daemon's audit_attest task: d.audit (a ron.audit.host, its chains each their own
-- checkpoints: AUD-I-38) into every ledger of the list that can attest ({ name, attest =
-- fn(cp) }, ron.node's ledgers()). -> the attester (its metrics_text) | nil (none).
function _M.start(d, ledgers, every_ms, log)
    local targets = {}
    for _, l in ipairs(ledgers) do
        if l.attest then targets[#targets + 1] = { name = l.name, attest = l.attest } end
    end
    if #targets == 0 then return nil end
    local parts = {}
    for i, c in ipairs(d.audit.chains or { d.audit }) do
        parts[i] = _M.new { audit = c, dir = c.dir or d.audit_dir, every_ms = every_ms,
                            targets = targets, log = log }
    end
    local a = _M.group(parts)
    task.spawn("audit_attest", a.run, a)
    return a
end

-- The audit_attest_* families for /metrics (docs/reference/metrics.md).
function A:metrics_text()
    local out = {}
    FAM.attested:render(out, self.carried)
    FAM.attest_conflicts:render(out, self.conflicts)
    return metrics.text(out)
end

return _M
