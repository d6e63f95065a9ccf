-- ron.node.trail: the daemon's side of its audit trail (docs/AUDIT.md, "In the
-- daemon"): the start of ron.audit.host from the `audit` block, what a failing trail does to
-- /readyz (AUD-I-42), the proof routes for the people the records are about (AUD-I-41), and
-- the audit records of requests the HTTP server refused before any handler.
--
--   local trail = require("ron.node.trail")
--   local h, err = trail.start(cfg, paths, log, mkdir_p)   -- ron.audit.host
--   trail.ready(d) -> reasons, notes        -- the trail's part of /readyz
--   trail.routes(d) -> { route, ... }       -- GET /v1/audit/checkpoint|inclusion|consistency
--   trail.on_early(d) -> fn(status, method, path, route_name)
--
-- Readiness: a trail that failed, whose breaker is open, or that shed an event in the last
-- SHED_WINDOW_MS is a reason. With audit.required = true it makes /readyz 503 (an operator who
-- must not serve without an audit trail); by default /readyz stays 200 and says so on a line
-- after "ready", and metering goes on (the trail never blocks the meter either way).
--
-- Proof routes (read-only, on the daemon's listener; only with audit.tokens and a trail on
-- disk), every answer text/plain, the format of `audit proof` (ron.audit.proofs):
--   GET /v1/audit/checkpoint[?stream=S]        the chain's newest signed checkpoint (a note)
--   GET /v1/audit/inclusion?stream=S&seq=N[&size=M]
--                      record N, its leaf and the inclusion proof in the tree of M records
--                      (default: the newest checkpoint's size); the record's bytes are sent
--   GET /v1/audit/consistency?stream=S&from=A&to=B
--                      the consistency proof from the tree of A records to the tree of B
--   stream: a chain's stream (audit.stream, or <stream>.<i> of a sharded trail); default the
--   first chain. Authorization: Bearer <token>, its BLAKE3 in audit.tokens: "operator" asks
--   about any record, a tenant only about records whose `tenant` attribute is its own (403
--   otherwise, the record not sent); checkpoints and consistency proofs name no record and
--   answer any token. A size past what the trail made durable is 404; at most PROOFS_MAX
--   proofs are computed at once (each reads the log up to its size in the threadpool), 503
--   with Retry-After beyond.
-- (ron.node loads this module under pcall: ron.audit.host needs libronaudit, which a build
-- may lack)
local acct = require("ron.accounting")
local clock = require("ron.base.clock")
local host = require("ron.audit.host")
local offload = require("ron.audit.offload")
local task = require("ron.base.task")

local format, concat, match, tonumber, tostring, ipairs, pairs =
      string.format, table.concat, string.match, tonumber, tostring, ipairs, pairs

local _M = {}

_M.SHED_WINDOW_MS = 10000
_M.PROOFS_MAX = 2

-- ron.audit.host from the `audit` block; its log directory is <var>/audit unless audit.dir
-- names one (none with amnesia). log(level, fmt, ...): the daemon's.
function _M.start(cfg, p, log, mkdir_p)
    local a = cfg.audit
    local o = { writer_id = a.writer_id or host.CONFIG_DEFAULTS.writer_id,
                stream = a.stream or host.CONFIG_DEFAULTS.stream,
                close_deadline_ms = cfg.drain_deadline_ms,
                log = function(line, level) log(level or "WARN", "audit: %s", line) end }
    for _, k in ipairs { "checkpoint_every", "queue_cap", "batch", "interval_ms",
                         "io_deadline_ms", "rotate_bytes", "shards", "recover_min_ms",
                         "recover_max_ms" } do
        o[k] = a[k] or host.CONFIG_DEFAULTS[k]
    end
    if a.amnesia then
        o.amnesia = true
    else
        local ok, err = mkdir_p(p.audit)
        if not ok then return nil, format("%s: %s", p.audit, tostring(err)) end
        o.dir = p.audit
        o.key_path = a.key_path or nil
        if o.key_path then
            o.checkpoint_interval_ms = a.checkpoint_interval_ms or
                                       host.CONFIG_DEFAULTS.checkpoint_interval_ms
        end
    end
    local h, err = host.start(o)
    if not h then return nil, err end
    log("INFO", "audit trail %s (%s/%s%s; check with: ron-accounting audit verify %s)",
        o.dir or "in RAM (amnesia)", o.writer_id, o.stream,
        o.key_path and format(", checkpoints every %d records", o.checkpoint_every)
        or ", no checkpoint key", o.dir or "-")
    -- AUD-I-37: whether the open used the head file or decoded everything (a slow start
    -- after a crash says why here)
    local infos = h.chains and h:open_info() or { h:open_info() }
    local parts = {}
    for i, oi in ipairs(infos) do
        parts[i] = (#infos > 1 and format("chain %d ", i) or "") .. host.open_text(oi)
    end
    log("INFO", "audit trail %s", concat(parts, "; "))
    return h
end

-- The trail's readiness (see the header): -> reasons (make /readyz 503), notes (after
-- "ready"); each a list.
function _M.ready(d)
    local reasons, notes = {}, {}
    if not d.audit then return reasons, notes end
    local s = d.audit:stats()
    local why
    if s.failed then
        why = format("audit trail failed: %s (%d event(s) shed, audit_failed; it retries by " ..
                     "itself)", s.failed, s.drops.audit_failed or 0)
    elseif s.stalled then
        why = "audit trail stalled: its sync is not back after io_deadline_ms (events shed, " ..
              "io_backpressure)"
    elseif s.last_shed_ms and _M.now() - s.last_shed_ms < _M.SHED_WINDOW_MS then
        local parts = {}
        for r, n in pairs(s.drops) do
            if n > 0 and r ~= "audit_closed" then parts[#parts + 1] = format("%s %d", r, n) end
        end
        table.sort(parts)
        why = format("audit trail shedding: events shed in the last %d s (since start: %s)",
                     _M.SHED_WINDOW_MS / 1000, concat(parts, ", "))
    end
    if why and d.cfg.audit.required then
        reasons[1] = why
    elseif why then
        notes[1] = why .. " (audit.required = false: serving and metering without it)"
    end
    return reasons, notes
end

-- ---- the proof routes ----

local function query(q)
    local t = {}
    for k, v in (q or ""):gmatch("([^&=]+)=([^&]*)") do t[k] = v end
    return t
end

local function int(v)
    local n = v and match(v, "^%d+$") and tonumber(v)
    return n and n < 2 ^ 53 and n or nil
end

local TEXT = "text/plain; charset=utf-8"

-- The token's holder: "operator", a tenant, or nil and the answer.
local function who(tokens, req)
    local auth = req.headers.authorization
    local token = auth and match(auth, "^[Bb][Ee][Aa][Rr][Ee][Rr] +([%w%-%._~%+/]+=*) *$")
    local w = token and #token <= 4096 and tokens[acct.b3hex(token)]
    if w then return w end
    return nil, 401, (auth and "unknown bearer token\n" or "Authorization: Bearer <token> is " ..
                      "required\n"), TEXT, { ["WWW-Authenticate"] = 'Bearer realm="ron-audit"' }
end

-- The chain a request names (stream=), or nil.
local function chain(d, q)
    for _, c in ipairs(d.audit.chains or { d.audit }) do
        if not q.stream or q.stream == c.stream then return c end
    end
end

-- A proof from the pool, answered later; at most PROOFS_MAX at once.
local function prove(st, req, tenant_of, kind, dir, a, b)
    if st.busy >= _M.PROOFS_MAX then
        return 503, "busy: proofs are being computed, retry\n", TEXT, { ["Retry-After"] = "1" }
    end
    st.busy = st.busy + 1
    task.spawn("audit_proof", function()
        local text, rec_tenant = offload.audit_proof(kind, dir, a, b)
        st.busy = st.busy - 1
        if not text then
            req:respond(500, tostring(rec_tenant) .. "\n", TEXT)
        elseif tenant_of ~= "operator" and kind == "inclusion" and rec_tenant ~= tenant_of then
            req:respond(403, "forbidden: the record is not your tenant's\n", TEXT)
        else
            req:respond(200, text, TEXT)
        end
    end)
end

local function handle(d, st, kind, req)
    local w, status, body, ct, hd = who(d.cfg.audit.tokens, req)
    if not w then return status, body, ct, hd end
    local q = query(req.query)
    local c = chain(d, q)
    if not c then return 404, "no such stream\n", TEXT end
    local cp = c:latest_checkpoint()
    if kind == "checkpoint" then
        if not cp then return 404, "no checkpoint yet\n", TEXT end
        return 200, cp.note, TEXT
    end
    local durable = c:stats().durable_seq
    local a, b
    if kind == "inclusion" then
        a, b = int(q.seq), q.size and int(q.size) or (cp and cp.size)
        if not a or not b or a < 1 or a > b then
            return 400, "seq=N (1..size) and size=M (default: the newest checkpoint's) are " ..
                        "required\n", TEXT
        end
    else
        a, b = int(q.from), q.to and int(q.to) or (cp and cp.size)
        if not a or not b or a > b then
            return 400, "from=A and to=B (A <= B; default B: the newest checkpoint's size) " ..
                        "are required\n", TEXT
        end
    end
    if b > durable then
        return 404, format("the trail has %d durable records, not %d\n", durable, b), TEXT
    end
    return prove(st, req, w, kind, c.dir, a, b)
end

function _M.routes(d)
    local a = d.cfg.audit
    if not (d.audit and d.audit_dir and a and a.tokens) then return {} end
    local st, out = { busy = 0 }, {}
    for _, kind in ipairs { "checkpoint", "inclusion", "consistency" } do
        out[#out + 1] = { method = "GET", path = "^/v1/audit/" .. kind .. "$", name = "audit",
                          handler = function(req) return handle(d, st, kind, req) end }
    end
    return out
end

-- ---- refusals before any handler ----

-- Requests the HTTP server refused before any handler, on a route that does not count them
-- itself (http.lua: ingest does): one `reject` record each, with the route that was asked.
function _M.on_early(d)
    return function(status, method, path, route)
        if not d.audit_emit then return end
        d.audit_emit("reject", { source = "http", route = route, status = status,
                                 reason = status == 413 and "oversize" or "malformed",
                                 method = host.text(method, 16), path = host.text(path, 200) })
    end
end

-- The wall clock in ms (the trail stamps its events with it).
_M.now = clock.wall_ms

return _M
