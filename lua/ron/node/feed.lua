-- ron.node.feed: the feed-driven ledger audit trail (issue 16, docs/AUDIT.md
-- "The ledger's feed in the trail", AUD-I-32): one `ledger.event` record per event of the
-- ledger's gapless feed (transfers, usage losses and shortfalls, carried checkpoints),
-- exactly once across shutdowns, restarts and crashes, in addition to the engine's
-- per-commit `ledger` record (which is written when the daemon sees its commit complete,
-- so a commit cut short by a shutdown or a crash has none).
--
-- How exactly once holds:
--  - the records are keyed: kind, attributes (book, ledger, event_seq, event kind, id) and
--    ts_ms (the transfer's created_at_ms, 0 for an event that names no transfer) are
--    functions of the event alone, and ron.audit.host:emit_keyed adds no event number, so
--    emitting one again folds into its first record (the log's dedupe, AUD-I-6; the
--    window is 65536 records, the replayed range at most one batch);
--  - the cursor (<audit dir>/feed-<ledger>-<book>.seq, written to a temporary file and
--    renamed) only moves past a batch once the trail says the batch is durable
--    (host:wait_durable): after a crash the range since the cursor is emitted again and
--    folds, so nothing is missing and nothing is twice;
--  - a shed event (Busy) is retried, never skipped.
local events = require("ron.ledger.events")
local ledger = require("ron.ledger")
local task = require("ron.base.task")

local format, tonumber, tostring, type = string.format, tonumber, tostring, type
local ipairs = ipairs

local _M = { KIND = "ledger.event", BATCH = 256 }

local F = {}
F.__index = F

-- o = { audit = host, dir = its log directory, name = "exporter" | "wallet", book,
--       engine = fn() -> engine | nil, err (ron.ledger.ledger), every_ms, log }
function _M.new(o)
    return setmetatable({ audit = o.audit, name = o.name, book = o.book or "main",
                          engine = o.engine, every_ms = o.every_ms, log = o.log,
                          path = format("%s/feed-%s-%s.seq", o.dir, o.name,
                                        (o.book or "main"):gsub("[^%w._-]", "_")),
                          batch = o.batch or _M.BATCH, fed = 0, records = 0 }, F)
end

function F:read_cursor()
    local f = io.open(self.path, "rb")
    if not f then return 0 end
    local s = f:read("*a")
    f:close()
    return tonumber(s:match("^(%d+)")) or 0
end

function F:write_cursor(seq)
    local tmp = self.path .. ".tmp"
    local f, err = io.open(tmp, "wb")
    if not f then return nil, err end
    f:write(format("%d\n", seq))
    f:close()
    local ok, rerr = os.rename(tmp, self.path)
    if not ok then return nil, rerr end
    return true
end

-- The record of one event: (kind, attrs, ts_ms), a function of the event alone (a failed
-- read is an error, never a different ts: that would be a second record).
function F:record(led, ev)
    local ts = 0
    if events.names_transfer(ev.kind) then -- (an account's, a rejection's: no transfer)
        local rec, err = led:transfer(ev.transfer_id)
        if rec == nil and err then return nil, err end
        if rec and rec.created_at_ms then ts = tonumber(rec.created_at_ms) or 0 end
    end
    return _M.KIND, { book = self.book, ledger = self.name, event_seq = tonumber(ev.seq),
                      event = ev.kind, id = ledger.hex(ev.transfer_id) }, ts
end

-- One pass: everything after the cursor, a batch at a time, each batch durable before the
-- cursor moves. -> true (caught up) | nil, err (try again later).
function F:pass()
    local led, err = self.engine()
    if not led then return nil, err end
    while true do
        local evs
        evs, err = led:events_since(self.cursor, self.batch)
        if not evs then return nil, err end
        if #evs == 0 then return true end
        for _, ev in ipairs(evs) do
            local kind, attrs, ts = self:record(led, ev)
            if not kind then return nil, attrs end
            while true do
                local ok, eerr = self.audit:emit_keyed(kind, attrs, ts)
                if ok then break end
                if type(eerr) ~= "string" or not eerr:find("^Busy") then return nil, eerr end
                if not task.sleep(self.every_ms) then return nil, "Canceled" end
            end
            self.records = self.records + 1
        end
        local ok, derr = self.audit:wait_durable()
        if not ok then return nil, derr end
        local last = tonumber(evs[#evs].seq)
        ok, err = self:write_cursor(last)
        if not ok then return nil, "cursor " .. self.path .. ": " .. tostring(err) end
        self.fed = self.fed + (last - self.cursor)
        self.cursor = last
        if #evs < self.batch then return true end
    end
end

function F:run()
    self.cursor = self:read_cursor()
    self.log("INFO", "audit feed: the %s ledger's events after seq %d go into the trail",
             self.name, self.cursor)
    local caught, warned = false, false
    repeat
        local ok, err = self:pass()
        if ok and not caught then
            caught = true
            self.log("INFO", "audit feed: the %s ledger's feed is in the trail through seq %d",
                     self.name, self.cursor)
        elseif not ok and err ~= "Canceled" and not warned then
            warned = true -- a ledger still starting: once, then quiet
            self.log("WARN", "audit feed: the %s ledger: %s (retrying)", self.name,
                     tostring(err))
        end
        if err and err:find("^Closed") then break end
    until not task.sleep(self.every_ms)
end

-- The daemon's audit_feed_<name> tasks: the event feed of every ledger of the list with an
-- engine ({ name, book, engine = fn() }, ron.node's ledgers()) into d.audit. -> the feeds
function _M.start(d, ledgers, every_ms, log)
    local feeds = {}
    for _, l in ipairs(ledgers) do
        if l.engine then
            feeds[#feeds + 1] = _M.new { audit = d.audit, dir = d.audit_dir, name = l.name,
                                         every_ms = every_ms, book = l.book, log = log,
                                         engine = l.engine }
        end
    end
    for _, f in ipairs(feeds) do task.spawn("audit_feed_" .. f.name, f.run, f) end
    return feeds
end

return _M
