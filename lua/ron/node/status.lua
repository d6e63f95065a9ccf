-- ron.node.status: the status page, `GET /` on the daemon's listener (issue 27 item 6;
-- docs/ops/http.md, "The status page"). One self-contained HTML page rendered on the server
-- from the very exposition /metrics serves (so every number it shows is a /metrics sample,
-- written as that sample is written), refreshing itself every REFRESH_S seconds, with no
-- script and no external asset (its Content-Security-Policy forbids both):
--   readiness and its reasons; streams (stuck ones first); sealed vs exported; the backlog,
--   the WAL and the plane against their caps; export and sealing rates (between two renders
--   of the page); the wallet's queue and breaker; the audit head and newest checkpoint.
--
--   local page = status.new(d)          -- d: the daemon (d.audit, d.cfg.exporter)
--   local html = page:render(exposition, ready, reasons[, now_s])
--
-- A number carries data-metric="name{labels}" (the sample's name and labels exactly as
-- /metrics writes them): the browser test compares each with /metrics.
local metrics = require("ron.base.metrics")

local format, concat, gsub, gmatch = string.format, table.concat, string.gsub,
                                     string.gmatch
local ipairs, pairs, tonumber, tostring, setmetatable, sort =
      ipairs, pairs, tonumber, tostring, setmetatable, table.sort

local _M = {}

_M.REFRESH_S = 5
_M.CONTENT_TYPE = "text/html; charset=utf-8"
_M.HEADERS = {
    ["Cache-Control"] = "no-store",
    ["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'",
    ["X-Content-Type-Options"] = "nosniff",
}
local MAX_STUCK_ROWS = 100 -- the runtime lists at most 100 stuck streams itself

local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
              ["'"] = "&#39;" }
local function esc(s) return (gsub(tostring(s), "[&<>\"']", ESC)) end
_M.escape = esc

-- Exposition text -> { [name] = { { key = 'name{labels}', labels = {k = v}, value = "text" },
-- ... } }: the samples as /metrics writes them (value kept as its text).
function _M.parse(text)
    local s = {}
    for line in gmatch(text, "[^\n]+") do
        local name, lab, v = metrics.sample_line(line)
        if name and v ~= "" then
            local labels = {}
            for k, lv in gmatch(lab, '([%w_]+)="(.-)"[,}]') do labels[k] = lv end
            local list = s[name] or {}
            s[name] = list
            list[#list + 1] = { key = name .. lab, labels = labels, value = v }
        end
    end
    return s
end

-- The one sample of name whose labels include `want` (nil: the first).
local function sample(S, name, want)
    for _, x in ipairs(S[name] or {}) do
        local ok = true
        for k, v in pairs(want or {}) do if x.labels[k] ~= v then ok = false end end
        if ok then return x end
    end
end

local function num(S, name, want)
    local x = sample(S, name, want)
    return x and tonumber(x.value)
end

-- A cell showing a sample exactly as /metrics wrote it ("–" when the family is absent).
local function sample_cell(x)
    if not x then return '<td class="na">&ndash;</td>' end
    return format('<td class="n" data-metric="%s">%s</td>', esc(x.key), esc(x.value))
end

local function cell(S, name, want) return sample_cell(sample(S, name, want)) end

local function sum(S, name, pred)
    local t, any = 0, false
    for _, x in ipairs(S[name] or {}) do
        if not pred or pred(x.labels) then
            t, any = t + (tonumber(x.value) or 0), true
        end
    end
    return any and t or nil
end

local function pct(v, cap)
    if not v or not cap or cap <= 0 then return "" end
    local p = 100 * v / cap
    local cls = p >= 80 and "bad" or p >= 50 and "warn" or "ok"
    return format('<td class="%s">%.1f %%</td><td><span class="bar"><span class="%s" '
                  .. 'style="width:%.0f%%"></span></span></td>', cls, p, cls,
                  p > 100 and 100 or p)
end

local function row(label, ...) return "<tr><th>" .. esc(label) .. "</th>" .. concat { ... }
                                      .. "</tr>" end

local P = {}
P.__index = P

function _M.new(d)
    return setmetatable({ d = d or {}, prev = nil }, P)
end

-- Rates between this render and the one before (the page's own refresh interval).
function P:rates(S, now)
    local cur = {
        t = now,
        sealed = num(S, "accounting_sealed_slices_total"),
        exported = sum(S, "accounting_exports_total",
                       function(l) return l.status == "ok" or l.status == "dup" end),
        records = num(S, "accounting_sealed_rows_total"),
        commits = sum(S, "wallet_commits_total"),
    }
    local prev, r = self.prev, {}
    self.prev = cur
    if prev and now > prev.t then
        for k, v in pairs(cur) do
            if k ~= "t" and v and prev[k] and v >= prev[k] then
                r[k] = (v - prev[k]) / (now - prev.t)
            end
        end
    end
    return r
end

local function rate_cell(v)
    if not v then return '<td class="na">&ndash;</td>' end
    return format('<td class="n">%.2f/s</td>', v)
end

local CSS = [[
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.4em 0 .4em}
table{border-collapse:collapse;background:#fff}th,td{padding:.25em .7em;
border-bottom:1px solid #e4e4e4;text-align:left}td.n{text-align:right;
font-variant-numeric:tabular-nums}.na{color:#999}.ok{color:#17692e}.warn{color:#8a5a00}
.bad{color:#b00020;font-weight:600}.bar{display:inline-block;width:10em;height:.7em;
background:#eee}.bar span{display:block;height:100%}.bar .ok{background:#3a9a52}
.bar .warn{background:#d8a200}.bar .bad{background:#c8102e}small{color:#666}
section{display:inline-block;vertical-align:top;margin-right:2em}
]]

local function readiness(ready, reasons)
    local out = { '<h2>Readiness</h2><p id="ready" class="', ready and "ok" or "bad", '">',
                  ready and "ready" or "not ready", "</p>" }
    if not ready and reasons and #reasons > 0 then
        out[#out + 1] = '<ul id="reasons">'
        for _, r in ipairs(reasons) do out[#out + 1] = "<li>" .. esc(r) .. "</li>" end
        out[#out + 1] = "</ul>"
    end
    return concat(out)
end

-- One row per stream of accounting_stream_seq (the runtime lists at most 100: stuck ones
-- first, then the furthest behind, and so does this table): the newest seq sealed and
-- exported, how far behind, and the reason a stuck one waits.
local function stream_rows(S)
    local by, list = {}, {}
    for _, x in ipairs(S.accounting_stream_seq or {}) do
        local l = x.labels
        local k = (l.tenant or "") .. "\0" .. (l.dimension or "")
        local r = by[k]
        if not r then
            r = { tenant = l.tenant or "", dim = l.dimension or "" }
            by[k], list[#list + 1] = r, r
        end
        r[l.state or "?"] = x
    end
    if #list == 0 then return "" end
    local stuck = {}
    for _, x in ipairs(S.accounting_stream_stuck or {}) do
        stuck[(x.labels.tenant or "") .. "\0" .. (x.labels.dimension or "")] = x.labels.reason
    end
    for _, r in ipairs(list) do
        r.stuck = stuck[r.tenant .. "\0" .. r.dim]
        local s = r.sealed and tonumber(r.sealed.value)
        local e = r.exported and tonumber(r.exported.value)
        r.behind = s and e and s > e and s - e or 0
    end
    sort(list, function(a, b)
        if (a.stuck ~= nil) ~= (b.stuck ~= nil) then return a.stuck ~= nil end
        if a.behind ~= b.behind then return a.behind > b.behind end
        if a.tenant ~= b.tenant then return a.tenant < b.tenant end
        return a.dim < b.dim
    end)
    local out = { '<table id="streams"><tr><th>tenant</th><th>dimension</th><th>sealed seq</th>'
                  .. "<th>exported seq</th><th>behind</th><th>state</th></tr>" }
    for _, r in ipairs(list) do
        out[#out + 1] = format('<tr%s><td>%s</td><td>%s</td>%s%s<td class="n">%d</td>'
                               .. "<td>%s</td></tr>", r.stuck and ' class="bad"' or "",
                               esc(r.tenant), esc(r.dim), sample_cell(r.sealed),
                               sample_cell(r.exported), r.behind,
                               r.stuck and "stuck: " .. esc(r.stuck)
                               or (r.behind > 0 and "exporting" or "exported"))
    end
    out[#out + 1] = "</table>"
    return concat(out)
end

-- Stuck streams first (each with its reason and the seq it waits at), then the totals, then
-- each stream's sealed and exported seq.
local function streams(S)
    local out = { "<h2>Streams</h2><table>",
                  row("stuck", cell(S, "accounting_streams_stuck")),
                  row("with a chain head", cell(S, "accounting_stream_heads")),
                  row("slices sealed", cell(S, "accounting_sealed_slices_total")),
                  row("exported ok", cell(S, "accounting_exports_total", { status = "ok" })),
                  row("exported dup", cell(S, "accounting_exports_total", { status = "dup" })),
                  row("sealed, not ACKed", cell(S, "accounting_export_backlog")),
                  "</table>" }
    local stuck = {}
    for _, x in ipairs(S.accounting_stream_stuck or {}) do stuck[#stuck + 1] = x end
    sort(stuck, function(a, b) return a.key < b.key end)
    if #stuck > 0 then
        out[#out + 1] = '<table id="stuck"><tr><th>tenant</th><th>dimension</th>'
                        .. "<th>reason</th><th>waits at seq</th></tr>"
        for i, x in ipairs(stuck) do
            if i > MAX_STUCK_ROWS then break end
            local l = x.labels
            out[#out + 1] = format('<tr class="bad" data-metric="%s"><td>%s</td><td>%s</td>'
                                   .. "<td>%s</td><td>%s</td></tr>", esc(x.key),
                                   esc(l.tenant or ""), esc(l.dimension or ""),
                                   esc(l.reason or ""), esc(l.seq or ""))
        end
        out[#out + 1] = "</table>"
    end
    out[#out + 1] = stream_rows(S)
    return concat(out)
end

local function capacity(S)
    local wal_e, wal_emax = num(S, "accounting_wal_entries"), num(S, "accounting_wal_max_entries")
    local wal_b = num(S, "accounting_wal_size_bytes")
    local wal_bmax = num(S, "accounting_wal_max_size_bytes")
    local pl, plmax = num(S, "accounting_plane_entries"), num(S, "accounting_plane_entries_max")
    return concat {
        "<h2>Backlog and WAL</h2><table>",
        row("backlog (slices in the WAL past the ring)", cell(S, "accounting_backlog_slices")),
        row("pending ring", cell(S, "accounting_pending_slices")),
        row("WAL slices", cell(S, "accounting_wal_entries"),
            cell(S, "accounting_wal_max_entries"), pct(wal_e, wal_emax)),
        row("WAL bytes", cell(S, "accounting_wal_size_bytes"),
            cell(S, "accounting_wal_max_size_bytes"), pct(wal_b, wal_bmax)),
        row("WAL not ACKed", cell(S, "accounting_wal_unacked")),
        row("plane entries", cell(S, "accounting_plane_entries"),
            cell(S, "accounting_plane_entries_max"), pct(pl, plmax)),
        row("degraded", cell(S, "accounting_degraded")),
        row("WAL failed", cell(S, "accounting_wal_failed")),
        "</table>" }
end

local function rates(r)
    return concat {
        "<h2>Rates</h2><table>",
        row("slices sealed", rate_cell(r.sealed)),
        row("slices exported (rated, with the ledger exporter)", rate_cell(r.exported)),
        row("rows sealed", rate_cell(r.records)),
        row("wallet money requests", rate_cell(r.commits)),
        "</table><small>over the last refresh interval</small>" }
end

local function wallet(S)
    if not S.wallet_breaker_open then return "" end
    local open = num(S, "wallet_breaker_open") == 1
    return concat {
        "<h2>Wallet</h2><table>",
        row("commit queue", cell(S, "wallet_queue_depth", { queue = "commit" })),
        row("breaker open", cell(S, "wallet_breaker_open"),
            open and '<td class="bad">open</td>' or '<td class="ok">closed</td>'),
        row("breaker opened (times)", cell(S, "wallet_breaker_opens_total")),
        row("ledger seq applied", cell(S, "wallet_ledger_seq")),
        row("balances cached", cell(S, "wallet_cache_entries")),
        "</table>" }
end

local function audit(S, d)
    if not S.audit_records_total then return "" end
    local failed = num(S, "audit_failed") == 1
    local out = { "<h2>Audit trail</h2><table>",
                  row("head (records)", cell(S, "audit_records_total")),
                  row("durable through", cell(S, "audit_durable_seq")),
                  row("checkpoints written", cell(S, "audit_checkpoints_total")),
                  row("queue", cell(S, "audit_queue_depth")),
                  row("failed", cell(S, "audit_failed"),
                      failed and '<td class="bad">FAILED</td>' or "") }
    local a, cps = d.audit, {}
    if a and a.checkpoints then -- a sharded trail: each chain's
        cps = a:checkpoints()
    elseif a and a.latest_checkpoint then
        cps = { a:latest_checkpoint() or false }
    end
    for i, cp in ipairs(cps) do
        if cp then
            out[#out + 1] = row(#cps > 1 and format("newest checkpoint (chain %d)", i)
                                or "newest checkpoint",
                                format('<td class="n">%s</td><td><code>%s</code></td>',
                                       esc(cp.size or "?"), esc(cp.root or "")))
        end
    end
    out[#out + 1] = "</table>"
    return concat(out)
end

function P:render(exposition, ready, reasons, now)
    local S = _M.parse(exposition)
    local r = self:rates(S, now or os.time())
    return concat {
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        format('<meta http-equiv="refresh" content="%d">', _M.REFRESH_S),
        '<meta name="viewport" content="width=device-width">',
        "<title>ron-accounting: ", ready and "ready" or "NOT READY", "</title>",
        "<style>", CSS, "</style></head><body>",
        "<h1>ron-accounting</h1><small>this page refreshes every ", tostring(_M.REFRESH_S),
        " s; the same numbers as <code>/metrics</code></small>",
        readiness(ready, reasons), streams(S),
        "<section>", capacity(S), "</section><section>", rates(r), "</section>",
        "<section>", wallet(S), "</section><section>", audit(S, self.d), "</section>",
        "</body></html>\n" }
end

return _M
