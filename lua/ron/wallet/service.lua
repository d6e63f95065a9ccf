-- ron.wallet.service: the wallet's HTTP routes over the ledger engine (issue 17, seed 004,
-- docs/WALLET.md). Runs inside `ron-accounting run` (the request decoder and the HTTP server
-- are the host's), on the daemon's server like ingest: the daemon adds w:routes().
--
--   local service = require "ron.wallet.service"
--   local w = service.new { ledger = led,     -- ron.ledger.ledger over any store
--                           tokens = { ["<b3 hex>"] = "operator" | "<account uuid>" },
--                           assets = { USD = 2 }, ... the keys of service.DEFAULTS }
--   w:start()             -- tasks: system accounts, workers, the feed (cache invalidator)
--   w:routes()            -- for http.serve { routes = ... }
--   w:ready()             -> true | false, { reasons }
--   w:metrics_text()      -- wallet_* families
--   w:stop()              -- intake stops (503 draining), workers end when the queue is empty
--
-- Tasks (seed 004 §2): `workers` committers take jobs from ONE bounded channel (the commit
-- queue, queue_capacity): handlers never wait, they try_send or answer 429 (WLT-7). A job's
-- ledger work runs in its own child task, joined with commit_timeout_ms: a commit that times
-- out is answered 503 and keeps running (aborting it mid-saga would leave the saga to
-- recover()); its key and nonce stay in flight (409) until it ends. One feed task polls the
-- ledger's event feed every poll_ms and invalidates the balance cache (WLT-6).
--
-- State is only touched between yields (the loop is single-threaded, no locks; seed 004 §4).
-- Every map is bounded: in-flight keys by the queue and the commits running, the answer LRU
-- and the balance cache by their capacities.
local B = require "ron.ledger.bigint"
local b3 = require "ron.base.b3"
local breaker = require "ron.wallet.breaker"
local cache = require "ron.wallet.cache"
local committer = require "ron.wallet.committer"
local codec = require "ron.ledger.codec"
local lru = require "ron.base.lru"
local dto = require "ron.wallet.dto"
local FAM = require "ron.wallet.families"
local held = require "ron.wallet.held"
local metrics = require "ron.base.metrics"
local ledger_engine = require "ron.ledger.ledger"
local task = require "ron.base.task"

local format, concat, match, lower, byte, sub =
      string.format, table.concat, string.match, string.lower, string.byte, string.sub
local floor, random, min = math.floor, math.random, math.min
local pairs, ipairs, type, tostring, tonumber, error, pcall, setmetatable =
      pairs, ipairs, type, tostring, tonumber, error, pcall, setmetatable

local ERR = ledger_engine.ERR
-- Every integer that names money or order (amount, nonce, seq, version, event seq) is
-- rendered through dec, never through a Lua number's 14-digit conversion (issue 24).
local dec = B.dec
local I64 = require("ffi").typeof("int64_t")

local _M = {}

-- wallet_invalidation_lag_seconds' bucket bounds: the cache's millisecond buckets in seconds
local LAG_LES = {}
for i, ms in ipairs(cache.LAG_BUCKETS) do LAG_LES[i] = format("%g", ms / 1000) end

_M.DEFAULTS = {
    tokens = nil,               -- required: { ["<BLAKE3 hex of a token>"] = "operator" | uuid }
    assets = nil,               -- required: { CODE = scale }
    queue_capacity = 512,       -- the commit queue (seed 004 §3)
    workers = 1,                -- committer tasks, one lane of the queue each (by payer)
    group_max = 256,            -- money jobs per group commit (ron.wallet.committer); 1: none
    commit_timeout_ms = 1000,   -- per ledger call (seed 004 §5: <= 1 s)
    retries = 3,                -- more tries of a commit that failed with a retry class
    retry_base_ms = 50,         -- backoff: base * 2^n, capped, plus jitter
    retry_cap_ms = 1000,
    retry_jitter_ms = 20,
    breaker_threshold = 20,     -- failures within breaker_window_ms open the breaker
    breaker_window_ms = 10000,
    breaker_open_ms = 5000,
    breaker_probes = 10,
    stall_ms = 1000,            -- readiness: a ledger call or the feed stuck this long
    poll_ms = 50,               -- the event feed's cadence
    cache_entries = 100000,     -- balances cached (two generations of this many at most)
    idempotency_cache = 10000,  -- rendered answers cached per Idempotency-Key (LRU)
    max_reads = 256,            -- balance/statement reads in flight (beyond: 429)
    min_seq_wait_ms = 1000,     -- how long a GET with min_seq waits for the feed
    statement_limit = 50,       -- default and cap of entries in one statement (cap: 4x)
}

local INTEGER_KEYS = {
    queue_capacity = { 1, 65536 }, workers = { 1, 256 }, group_max = { 1, 1024 },
    commit_timeout_ms = { 10, 60000 },
    retries = { 0, 10 }, retry_base_ms = { 1, 10000 }, retry_cap_ms = { 1, 60000 },
    retry_jitter_ms = { 0, 10000 }, breaker_threshold = { 1, 100000 },
    breaker_window_ms = { 1000, 600000 }, breaker_open_ms = { 100, 600000 },
    breaker_probes = { 1, 1000 }, stall_ms = { 50, 600000 }, poll_ms = { 5, 60000 },
    cache_entries = { 1, 10000000 }, idempotency_cache = { 0, 10000000 },
    max_reads = { 1, 65536 }, min_seq_wait_ms = { 0, 60000 }, statement_limit = { 1, 1000 },
}

-- The endpoints (labels of wallet_busy_rejections_total and requests).
_M.ENDPOINTS = { "issue", "transfer", "burn", "account", "balance", "statement" }

-- The kinds of the wallet's tasks (labels of wallet_tasks_*): committer workers, the event
-- feed, a ledger call of a job (commit), a read's answerer and its ledger call, the node
-- lease's heartbeat and survivor scan (ron.wallet.fleet).
_M.TASK_KINDS = { "worker", "feed", "call", "read", "read_call", "lease" }

-- -> true | nil, "wallet...: why"
function _M.check_config(v, keyname)
    keyname = keyname or "wallet"
    if type(v) ~= "table" then return nil, keyname .. " must be a table" end
    for k in pairs(v) do
        if k ~= "tokens" and k ~= "assets" and INTEGER_KEYS[k] == nil then
            return nil, format("unknown key '%s.%s'", keyname, tostring(k))
        end
    end
    for k, r in pairs(INTEGER_KEYS) do
        local x = v[k]
        if x ~= nil and (type(x) ~= "number" or x % 1 ~= 0 or x < r[1] or x > r[2]) then
            return nil, format("%s.%s must be an integer in %d..%d, got %s", keyname, k, r[1],
                               r[2], tostring(x))
        end
    end
    if type(v.tokens) ~= "table" then
        return nil, keyname .. ".tokens must be a table { [\"<b3 hex of a token>\"] = " ..
               "\"operator\" | \"<account uuid>\" }"
    end
    local n = 0
    for h, who in pairs(v.tokens) do
        n = n + 1
        if type(h) ~= "string" or #h ~= 64 or not match(h, "^[0-9a-f]+$") then
            return nil, format("%s.tokens: key %q is not a BLAKE3 digest (64 lowercase hex " ..
                               "digits: printf %%s TOKEN | b3sum)", keyname, tostring(h))
        end
        if who ~= "operator" and not dto.uuid_bytes(who) then
            return nil, format("%s.tokens[%s...]: %q is neither \"operator\" nor an account " ..
                               "UUID (lowercase)", keyname, h:sub(1, 8), tostring(who))
        end
    end
    if n == 0 then return nil, keyname .. ".tokens is empty" end
    if type(v.assets) ~= "table" or next(v.assets) == nil then
        return nil, keyname .. ".assets must be a table { CODE = scale, ... }"
    end
    for code, scale in pairs(v.assets) do
        if not dto.asset_ok(code) then
            return nil, format("%s.assets: %q is not an asset code ([A-Z][A-Z0-9_]{0,15})",
                               keyname, tostring(code))
        end
        if type(scale) ~= "number" or scale % 1 ~= 0 or scale < 0 or scale > 18 then
            return nil, format("%s.assets.%s: the scale must be an integer in 0..18", keyname,
                               code)
        end
    end
    return true
end

-- The wallet's system accounts (docs/WALLET.md §1): ids from their names.
local function system_id(name) return sub(codec.sha256(name), 1, 16) end
_M.SYSTEM = {
    top_up = system_id("ron-wallet:issuance:top_up"),
    grant = system_id("ron-wallet:issuance:grant"),
    burned = system_id("ron-wallet:burned"),
}
local SYSTEM_NAME = {}
for k, v in pairs(_M.SYSTEM) do SYSTEM_NAME[v] = k end

local function hex(s)
    return (s:gsub(".", function(c) return format("%02x", byte(c)) end))
end

local JSON = "application/json"
local jstr = dto.jstr

-- A ledger rejection code -> the problem code (docs/WALLET.md §4).
local REJECTION = {
    [ERR.InsufficientFunds] = "insufficient_funds",
    [ERR.NegativePosting] = "insufficient_funds",
    [ERR.AccountFrozen] = "account_frozen",
    [ERR.AccountClosed] = "account_closed",
    [ERR.UnknownAccount] = "unknown_account",
}

local W = {}
W.__index = W


function _M.new(o)
    if type(o) ~= "table" or type(o.ledger) ~= "table" then
        error("wallet.new: ledger (ron.ledger.ledger) is required", 2)
    end
    local cfg = {}
    for k, v in pairs(o) do
        if k ~= "ledger" and k ~= "clock" and k ~= "log" and k ~= "on_dry" then cfg[k] = v end
    end
    if o.on_dry ~= nil and type(o.on_dry) ~= "function" then
        error("wallet.new: on_dry must be a function(tenant, amount, asset)", 2)
    end
    local ok, err = _M.check_config(cfg)
    if not ok then error("wallet.new: " .. err, 2) end
    local self = setmetatable({}, W)
    for k, v in pairs(_M.DEFAULTS) do self[k] = v end
    for k, v in pairs(cfg) do self[k] = v end
    self.led = o.ledger
    self.T = task.current()
    self.clock = o.clock or function()
        local s, us = require("luv").gettimeofday()
        return s * 1000 + floor(us / 1000)
    end
    self.log = o.log or function(line) io.stderr:write("wallet: ", line, "\n") end
    self.dto = dto.new { assets = self.assets }
    self.tokens = {}
    for h, who in pairs(cfg.tokens) do
        if who == "operator" then
            self.tokens[h] = { operator = true, principal = "operator" }
        else
            local id = dto.uuid_bytes(who)
            self.tokens[h] = { account = id, principal = hex(id) }
        end
    end
    self.breaker = breaker.new { threshold = self.breaker_threshold,
                                 window_ms = self.breaker_window_ms,
                                 open_ms = self.breaker_open_ms, probes = self.breaker_probes,
                                 clock = self.clock }
    self.on_dry = o.on_dry
    self.dry = { total = 0, by_asset = {}, last = {}, n_last = 0 }
    self.cache = cache.new { ledger = self.led, entries = self.cache_entries,
                             clock = self.clock,
                             on_shortfall = function(ev) self:_shortfall(ev) end }
    self.answers = lru.new(self.idempotency_cache)
    -- payers a saga of another process kept reserved for a whole commit (issue 29 item 3)
    self.held = held.new { clock = self.clock, hold_ms = 1000 }
    self.not_ready = {}      -- reasons others hold (the node's lease: ron.wallet.fleet)
    self.inflight = {}       -- intent or key -> true while a commit for it runs
    self.calls = {}          -- ledger calls running: handle -> start ms
    self.n_reads = 0
    self.stopping = false
    self.m = { busy = {}, requests = {}, io_timeouts = { commit = 0, read = 0, feed = 0 },
               backoff_retries = 0, worker_inflight = 0, commits = 0, rejections = 0,
               replays = 0 }
    for _, e in ipairs(_M.ENDPOINTS) do self.m.busy[e] = 0 end
    -- the wallet's own tasks by kind (seed 004 §6, §9): spawned, finished, aborted at the
    -- drain deadline; live = the handles not yet ended (what wait() aborts)
    self.tasks = { spawned = {}, finished = {}, aborted = {}, live = {} }
    for _, k in ipairs(_M.TASK_KINDS) do
        self.tasks.spawned[k], self.tasks.finished[k], self.tasks.aborted[k] = 0, 0, 0
    end
    return self
end

-- A task of the wallet, counted by kind; its scheduler name is "wallet_<kind>" (the
-- scheduler's own tasks_* families keep their labels).
function W:_spawn(kind, fn)
    local tk = self.tasks
    tk.spawned[kind] = tk.spawned[kind] + 1
    local h
    h = self.T.spawn("wallet_" .. kind, function()
        local ok, a, b = pcall(fn)
        tk.live[h] = nil
        tk.finished[kind] = tk.finished[kind] + 1
        if not ok then error(a, 0) end
        return a, b
    end)
    tk.live[h] = kind
    return h
end

-- ---- answers ----

local function answer(status, body, headers)
    return { status = status, body = body, ctype = JSON, headers = headers }
end

local function problem_answer(p, headers)
    return { status = p.status, body = dto.problem_body(p), ctype = dto.PROBLEM_TYPE,
             headers = headers }
end

local function prob(code, detail, headers, extra)
    return problem_answer(dto.problem(code, detail, nil, nil, extra), headers)
end
function W:_prob(...) return prob(...) end

function W:_count(status)
    self.m.requests[status] = (self.m.requests[status] or 0) + 1
end

-- Sends a (possibly async) answer.
function W:_send(req, a, replayed)
    self:_count(a.status)
    local h = a.headers
    if replayed then
        h = {}
        for k, v in pairs(a.headers or {}) do h[k] = v end
        h["Idempotent-Replayed"] = "true"
    end
    return req:respond(a.status, a.body, a.ctype, h)
end

local function ret(self, a)
    self:_count(a.status)
    return a.status, a.body, a.ctype, a.headers
end

-- ---- request checks (synchronous, on the loop thread) ----

function W:_auth(req)
    local auth = req.headers.authorization
    if not auth then
        return nil, prob("no_token", "Authorization: Bearer <token> is required",
                         { ["WWW-Authenticate"] = 'Bearer realm="ron-wallet"' })
    end
    local token = match(auth, "^[Bb][Ee][Aa][Rr][Ee][Rr] +([%w%-%._~%+/]+=*) *$")
    local who = token and #token <= 4096 and self.tokens[b3.hex(token)]
    if not who then
        return nil, prob("bad_token", "unknown bearer token",
                         { ["WWW-Authenticate"] =
                               'Bearer realm="ron-wallet", error="invalid_token"' })
    end
    return who
end

local function is_json(ct)
    if not ct then return false end
    local mt, params = match(lower(ct), "^%s*([^;%s]+)%s*(.*)$")
    if mt ~= "application/json" then return false end
    if params == "" then return true end
    return match(params, "^;%s*charset%s*=%s*\"?utf%-8\"?%s*$") ~= nil
end

function W:_body_checks(req)
    if not is_json(req.headers["content-type"]) then
        return prob("content_type", "Content-Type must be application/json")
    end
    local ce = req.headers["content-encoding"]
    if ce and lower(ce) ~= "identity" then
        return prob("content_encoding", "compressed bodies are not accepted (send identity)")
    end
    return nil
end

-- ---- rendering (deterministic: only what the ledger stored and the request's canon) ----

local RECEIPT_FIELDS = { "from", "to", "asset", "amount", "nonce", "kind" }

function W:_receipt(r, res)
    local parts = { format('{"transfer_id":"%s","status":"committed","event_seq":%s,"route":"%s"',
                           hex(res.transfer_id), dec(res.event_seq or 0), r.route) }
    for _, f in ipairs(RECEIPT_FIELDS) do
        local v = r[f .. "_text"] or r[f]
        if v ~= nil then
            if type(v) == "number" then parts[#parts + 1] = format(',"%s":%s', f, dec(v))
            else parts[#parts + 1] = format(',"%s":"%s"', f, jstr(v)) end
        end
    end
    parts[#parts + 1] = "}\n"
    return answer(201, concat(parts))
end

-- An answer that is the ledger's stored outcome for the request's Idempotency-Key and body
-- (a receipt, a stored rejection, nonce_used): the only kind the answer cache may keep, as
-- every later send of the same key and body gets it from the ledger too. Never a 409
-- in_flight (it passes), a 422 idempotency_mismatch (the key's outcome is the other body's)
-- or a 5xx (issue 24, issue 29 item 4).
local function stored(a)
    a.stored = true
    return a
end

-- A stored rejection (message, code) -> the problem answer.
local function rejection(msg, code)
    local name = REJECTION[code]
    if not name then return nil end
    return stored(prob(name, msg))
end

-- The stored outcome of an intent, as a JSON member value (for nonce_used's "original").
local function outcome_json(o)
    if o.status == "committed" then
        return format('{"status":"committed","transfer_id":"%s"}', hex(o.transfer_id))
    end
    return format('{"status":"rejected","code":"%s","detail":"%s"}',
                  REJECTION[o.code] or tostring(ledger_engine.NAME[o.code] or o.code),
                  jstr(tostring(o.message)))
end

-- The transfer's metadata: what the statement shows; deterministic bytes.
local function metadata(r, principal)
    return format('{"wallet":"%s","kind":"%s","principal":"%s","nonce":%s%s}', r.route,
                  r.route == "issue" and r.kind or r.route, principal, dec(r.nonce),
                  r.memo and format(',"memo":"%s"', jstr(r.memo)) or "")
end

local function movements(r)
    local asset = { code = r.asset, scale = r.scale }
    if r.route == "issue" then
        return { { from = _M.SYSTEM[r.kind], to = r.to, asset = asset, amount = r.amount } }
    elseif r.route == "burn" then
        return { { from = r.from, to = _M.SYSTEM.burned, asset = asset, amount = r.amount } }
    end
    return { { from = r.from, to = r.to, asset = asset, amount = r.amount } }
end

-- ---- the ledger work of one money request (in its own task) ----

-- 503 account_busy: the payer's money is reserved by commits in flight; nothing decided.
local function account_busy(retry_after_s)
    return prob("account_busy", "the account's money is reserved by commits in flight (on " ..
                "this node or another; a dead node's are released when its lease expires); " ..
                "nothing was decided: retry the same request",
                { ["Retry-After"] = tostring(retry_after_s) })
end

-- -> answer, class ("retry": the ledger failed, a later try may succeed; "contended": a race
-- with other sagas, tried again too; "held": one other saga holds the payer; nil: final)
function W:_money_once(job)
    local led, store = self.led, self.led.store
    local r = job.r
    local n, err = store:put_intent(job.kkey, { status = "claimed", message = dec(r.nonce),
                                                body_hash = job.h })
    if n == nil then return prob("ledger_unavailable", tostring(err)), "retry" end
    if n == 0 then
        local cur, gerr = store:get_intent(job.kkey)
        if not cur then return prob("ledger_unavailable", tostring(gerr)), "retry" end
        if cur.body_hash ~= job.h then
            return prob("idempotency_mismatch", "this Idempotency-Key was used with another body")
        end
    end
    local prior, perr = store:get_intent(job.nkey)
    if prior == nil and perr ~= nil then
        return prob("ledger_unavailable", tostring(perr)), "retry"
    end
    if prior and prior.body_hash ~= job.h then return self:_nonce_used(job, prior) end
    local res, cerr, code = led:commit(self:_money_request(job))
    return self:_money_outcome(job, prior, res, cerr, code)
end

-- The stored 409 of a nonce that another body used (its outcome in "original").
function W:_nonce_used(job, prior)
    return stored(prob("nonce_used", format("nonce %s was used by another request",
                                            dec(job.r.nonce)), nil,
                       ',"original":' .. outcome_json(prior)))
end

-- The ledger request of a money job: its nonce row is the intent.
function W:_money_request(job)
    -- keys: the Idempotency-Key's row names this request too; the feed records it, so
    -- `ledger verify` checks that row's body hash (LED-68)
    return { intent = job.nkey, body_hash = job.h, keys = { job.kkey },
             movements = movements(job.r), metadata = metadata(job.r, job.principal) }
end

-- The answer of a commit's outcome (res, cerr, code) for job whose nonce row read prior:
-- the single path's and a group's (ron.wallet.committer) alike. -> answer, class, replayed
function W:_money_outcome(job, prior, res, cerr, code)
    local store, r = self.led.store, job.r
    if res and res.event_seq == nil then
        -- The intent's outcome is stored, its event not yet: the saga that commits it (on
        -- another node, maybe) is between the two writes. A receipt needs the event's seq
        -- (event_seq 0 would be cached and replayed for ever): in flight until it is there.
        return prob("in_flight", "this request is committed; its ledger event is being " ..
                    "written", { ["Retry-After"] = "1" })
    end
    if res then
        if res.replayed then self.m.replays = self.m.replays + 1
        else
            self.m.commits = self.m.commits + 1
            self.cache:note_commit(res.transfer_id, self.clock())
        end
        for _, m in ipairs(movements(r)) do
            self.cache:invalidate(m.from)
            self.cache:invalidate(m.to)
        end
        return stored(self:_receipt(r, res)), nil, res.replayed
    end
    if code == ERR.Unavailable then
        if ledger_engine.is_in_flight(cerr, code) then
            return prob("in_flight", "this nonce is being committed", { ["Retry-After"] = "1" })
        end
        -- a race with other sagas, not the ledger failing (issue 29 item 3): not for the
        -- breaker; "held": one saga kept the payer's postings for the whole commit
        if ledger_engine.is_held(cerr, code) then return account_busy(1), "held" end
        if ledger_engine.is_contention(cerr, code) then return account_busy(1), "contended" end
        return prob("ledger_unavailable", tostring(cerr)), "retry"
    end
    if code == ERR.Conflict then
        local o = store:get_intent(job.nkey)
        if o then
            return stored(prob("nonce_used", format("nonce %s was used by another request",
                                                    dec(r.nonce)), nil,
                               ',"original":' .. outcome_json(o)))
        end
        return prob("in_flight", "this nonce is being committed", { ["Retry-After"] = "1" })
    end
    local a = rejection(cerr, code)
    if a then
        self.m.rejections = self.m.rejections + 1
        return a, nil, prior ~= nil
    end
    self.log(format("commit failed: %s (%s)", tostring(cerr), tostring(code)))
    return prob("internal", "the ledger refused the request: " .. tostring(cerr))
end

function W:_backoff_ms(attempt)
    local d = min(self.retry_cap_ms, self.retry_base_ms * 2 ^ (attempt - 1))
    return floor(d + random() * self.retry_jitter_ms)
end

-- Retries of a retry class (the commit is keyed by its intent: safe to repeat).
function W:_money(job)
    local a, class, replayed
    for attempt = 0, self.retries do
        if attempt > 0 then
            self.m.backoff_retries = self.m.backoff_retries + 1
            self.T.sleep(self:_backoff_ms(attempt))
        end
        local ok, x, y, z = pcall(self._money_once, self, job)
        if not ok then
            self.log("commit error: " .. tostring(x))
            a, class = prob("internal", "wallet error"), nil
        else
            a, class, replayed = x, y, z
        end
        if class ~= "retry" and class ~= "contended" then break end
    end
    if class == "retry" then
        a = prob("ledger_unavailable", "the ledger failed; retry the same request",
                 { ["Retry-After"] = tostring(self.breaker:retry_after_s()) })
    elseif class == "held" and job.r.from then
        self.held:mark(job.r.from)
    end
    -- healthy for the breaker unless the ledger failed (contention is not a failure)
    return a, class ~= "retry", replayed
end

-- ---- workers ----

-- Runs fn(job) in a child task under commit_timeout_ms. On a timeout the child keeps
-- running; done(result...) is called when it ends, whichever came first.
function W:_call(op, fn, job, done)
    local t0 = self.clock()
    local finished, timed_out = false, false
    local holder = {}
    local child = self:_spawn("call", function()
        local ok, a, b, c = pcall(fn, self, job)
        self.calls[holder] = nil
        finished = true
        if not ok then
            self.log(op .. " error: " .. tostring(a))
            a, b, c = prob("internal", "wallet error"), true, false
        end
        done(timed_out, a, b, c)
        return true
    end)
    self.calls[holder] = t0
    local r1, r2 = child:join(self.commit_timeout_ms)
    if r1 == nil and r2 == "Timeout" and not finished then
        timed_out = true
        self.m.io_timeouts[op] = (self.m.io_timeouts[op] or 0) + 1
        self.breaker:record(false) -- a timeout is a ledger failure now, not when it ends
        return false
    end
    return true
end

function W:_job(job)
    if not self.breaker:allow() then
        self:_clear(job)
        return self:_send(job.req, prob("ledger_unavailable", "the ledger's breaker is open",
            { ["Retry-After"] = tostring(self.breaker:retry_after_s()) }))
    end
    local fn = job.kind == "money" and self._money or self._account
    local answered = false
    local in_time = self:_call("commit", fn, job, function(timed_out, a, healthy, replayed)
        if not timed_out then self.breaker:record(healthy) end
        if a.stored and job.kkey then self.answers:put(job.kkey, { h = job.h, a = a }) end
        self:_clear(job)
        if not timed_out then
            answered = true
            self:_send(job.req, a, replayed)
        end
    end)
    if not in_time and not answered then
        self:_send(job.req, prob("ledger_timeout", format("the commit did not finish within %d " ..
            "ms; it may still finish: retry the same request", self.commit_timeout_ms),
            { ["Retry-After"] = "1" }))
    end
end

function W:_clear(job)
    if job.kkey then self.inflight[job.kkey] = nil end
    if job.nkey then self.inflight[job.nkey] = nil end
end

-- One job alone (ron.wallet.committer groups money jobs queued together).
function W:_run_job(job)
    self.m.worker_inflight = self.m.worker_inflight + 1
    local ok, err = pcall(self._job, self, job)
    self.m.worker_inflight = self.m.worker_inflight - 1
    if not ok then
        self.log("worker error: " .. tostring(err))
        self:_clear(job)
        pcall(self._send, self, job.req, prob("internal", "wallet error"))
    end
end

function W:_worker(k) return committer.worker(self, k) end

function W:_enqueue(req, job, endpoint)
    if self.stopping then return ret(self, prob("draining", "the wallet is shutting down")) end
    if not self.queue then
        return ret(self, prob("starting", "the wallet is starting", { ["Retry-After"] = "1" }))
    end
    if self.breaker:state() == "open" then
        return ret(self, prob("ledger_unavailable", "the ledger's breaker is open",
                              { ["Retry-After"] = tostring(self.breaker:retry_after_s()) }))
    end
    job.req = req
    local ok = self.queue:try_send(job)
    if not ok then
        self.m.busy[endpoint] = self.m.busy[endpoint] + 1
        return ret(self, prob("busy", "the commit queue is full; retry later",
                              { ["Retry-After"] = "1" }))
    end
    if job.kkey then self.inflight[job.kkey] = true end
    if job.nkey then self.inflight[job.nkey] = true end
    return nil -- answered later (req:respond)
end

-- ---- handlers ----

function W:_post_money(req, route)
    local who, a = self:_auth(req)
    if not who then return ret(self, a) end
    a = self:_body_checks(req)
    if a then return ret(self, a) end
    local key = req.headers["idempotency-key"]
    if key == nil then
        return ret(self, prob("missing_idempotency_key", "money routes need an Idempotency-Key"))
    end
    if not dto.key_ok(key) then
        return ret(self, prob("bad_idempotency_key",
                              "an Idempotency-Key is 1..128 visible ASCII characters"))
    end
    local r, p = self.dto:decode(route, req.body)
    if not r then return ret(self, problem_answer(p)) end
    if route == "issue" and not who.operator then
        return ret(self, prob("forbidden", "only the operator issues money"))
    end
    if route == "transfer" and r.from ~= who.account then
        return ret(self, prob("forbidden", "an account moves only its own money"))
    end
    if route == "burn" and not who.operator and r.from ~= who.account then
        return ret(self, prob("forbidden", "an account burns only its own money"))
    end
    local kkey = "wlt:k:" .. who.principal .. ":" .. key
    local nkey = "wlt:n:" .. who.principal .. ":" .. dec(r.nonce)
    local h = codec.sha256(r.canon)
    local hit = self.answers:get(kkey)
    if hit then
        if hit.h ~= h then
            return ret(self, prob("idempotency_mismatch",
                                  "this Idempotency-Key was used with another body"))
        end
        self.m.replays = self.m.replays + 1
        self:_count(hit.a.status)
        local hd = { ["Idempotent-Replayed"] = "true" }
        for k, v in pairs(hit.a.headers or {}) do hd[k] = v end
        return hit.a.status, hit.a.body, hit.a.ctype, hd
    end
    if self.inflight[kkey] or self.inflight[nkey] then
        return ret(self, prob("in_flight", "this Idempotency-Key or nonce is being committed",
                              { ["Retry-After"] = "1" }))
    end
    local wait_s = r.from and self.held:retry_after_s(r.from)
    if wait_s then return ret(self, account_busy(wait_s)) end
    return self:_enqueue(req, { kind = "money", r = r, kkey = kkey, nkey = nkey, h = h,
                                principal = who.principal }, route)
end

-- account management (operator): create, freeze, unfreeze, close
function W:_account(job)
    local led, id = self.led, job.id
    local res, err, code
    if job.op == "create" then
        res, err, code = led:create_account { id = id, policy = "no_overdraft" }
    elseif job.op == "freeze" then res, err, code = led:freeze(id)
    elseif job.op == "unfreeze" then res, err, code = led:unfreeze(id)
    else res, err, code = led:close(id) end
    if res then
        self.cache:invalidate(id)
        return answer(200, format('{"account":"%s","status":"%s","version":%s}\n',
                                  dto.uuid_text(id), res.status, dec(res.version))), true
    end
    if code == ERR.Unavailable then
        return prob("ledger_unavailable", tostring(err)), ledger_engine.is_contention(err, code)
    end
    if code == ERR.NotFound then return prob("unknown_account", tostring(err)), true end
    if code == ERR.Conflict then return prob("account_exists", tostring(err)), true end
    if code == ERR.AccountClosed then return prob("account_closed", tostring(err)), true end
    return prob("internal", tostring(err)), true
end

function W:_post_account(req, id_text, op)
    local who, a = self:_auth(req)
    if not who then return ret(self, a) end
    if not who.operator then
        return ret(self, prob("forbidden", "only the operator manages accounts"))
    end
    local id
    if op == "create" then
        a = self:_body_checks(req)
        if a then return ret(self, a) end
        local r, p = self.dto:decode("account", req.body)
        if not r then return ret(self, problem_answer(p)) end
        id = r.account
    else
        id = dto.uuid_bytes(id_text)
        if not id then return ret(self, prob("bad_uuid", "the path's account id is not a UUID")) end
    end
    if SYSTEM_NAME[id] then return ret(self, prob("forbidden", "a system account")) end
    return self:_enqueue(req, { kind = "account", op = op, id = id }, "account")
end

local function query_params(q)
    local t = {}
    for k, v in (q or ""):gmatch("([^&=]+)=([^&]*)") do t[k] = v end
    return t
end

function W:_read_auth(req, id_text)
    local who, a = self:_auth(req)
    if not who then return nil, a end
    local id = dto.uuid_bytes(id_text)
    if not id then return nil, prob("bad_uuid", "the path's account id is not a UUID") end
    if not who.operator and who.account ~= id then
        return nil, prob("forbidden", "an account reads only its own data")
    end
    local q = query_params(req.query)
    local asset = q.asset
    if not asset or not dto.asset_ok(asset) or self.assets[asset] == nil then
        return nil, prob("bad_query", "asset=<a configured asset code> is required")
    end
    return id, q, asset
end

function W:_balance_answer(id, asset, amount, staleness)
    local seq = self.cache.seq
    return answer(200, format('{"account":"%s","asset":"%s","balance":%s,"ledger_seq":%s,' ..
                              '"staleness_ms":%d}\n', dto.uuid_text(id), asset,
                              dec(amount), dec(seq), staleness),
                  { ["X-Ledger-Seq"] = dec(seq), ["X-Staleness-Ms"] = tostring(staleness),
                    ["Cache-Control"] = "no-store" })
end

-- The read of a miss (in a task): waits for min_seq, reads through the cache.
function W:_read_balance(job)
    if job.min_seq and self.cache.seq < job.min_seq then
        local deadline = self.clock() + self.min_seq_wait_ms
        while self.cache.seq < job.min_seq and self.clock() < deadline do
            self.T.sleep(self.poll_ms)
        end
        if self.cache.seq < job.min_seq then
            return prob("not_caught_up", format("the cache has applied ledger events up to %s, " ..
                        "not yet %s", dec(self.cache.seq), dec(job.min_seq)),
                        { ["Retry-After"] = "1" })
        end
        local amount = self.cache:get(job.id, job.asset)
        if amount then
            return self:_balance_answer(job.id, job.asset, amount, self.cache:staleness_ms() or 0)
        end
    end
    self.cache:begin_read(job.id)
    local amount, err = self.led:balance(job.id, { code = job.asset,
                                                   scale = self.assets[job.asset] })
    if amount == nil then
        self.cache.reading[job.id] = nil
        return prob("ledger_unavailable", tostring(err), { ["Retry-After"] = "1" })
    end
    -- (as the store gives it: a number up to 2^53, an int64_t beyond; never tonumber'd)
    self.cache:put(job.id, job.asset, amount)
    return self:_balance_answer(job.id, job.asset, amount, 0)
end

function W:_spawn_read(req, fn, job, endpoint)
    if not self.system_ready then
        return ret(self, prob("starting", "the wallet is starting", { ["Retry-After"] = "1" }))
    end
    if self.n_reads >= self.max_reads then
        self.m.busy[endpoint] = self.m.busy[endpoint] + 1
        return ret(self, prob("busy", "too many reads in flight", { ["Retry-After"] = "1" }))
    end
    self.n_reads = self.n_reads + 1
    -- The read runs in a child joined with commit_timeout_ms: a stalled ledger answers 503
    -- ledger_timeout in time; the child ends on its own (its answer is then dropped).
    self:_spawn("read", function()
        local result, done = nil, false
        local child = self:_spawn("read_call", function()
            local ok, a = pcall(fn, self, job)
            if not ok then
                self.log("read error: " .. tostring(a))
                a = prob("internal", "wallet error")
            end
            result, done = a, true
            self.n_reads = self.n_reads - 1
            return true
        end)
        child:join(self.commit_timeout_ms + (job.min_seq and self.min_seq_wait_ms or 0))
        if not done then
            self.m.io_timeouts.read = self.m.io_timeouts.read + 1
            result = prob("ledger_timeout", "the ledger did not answer in time",
                          { ["Retry-After"] = "1" })
        end
        self:_send(req, result)
        return true
    end)
    return nil
end

function W:_get_balance(req, id_text)
    local id, q, asset = self:_read_auth(req, id_text)
    if not id then return ret(self, q) end
    local min_seq
    if q.min_seq then
        min_seq = dto.query_uint(q.min_seq, 0, dto.MAX_INT)
        if not min_seq then
            return ret(self, prob("bad_query", "min_seq must be an integer in 0.." ..
                                  dec(dto.MAX_INT) .. " (decimal digits)"))
        end
    end
    if not min_seq or self.cache.seq >= min_seq then
        local amount = self.cache:get(id, asset)
        if amount then
            return ret(self, self:_balance_answer(id, asset, amount,
                                                  self.cache:staleness_ms() or 0))
        end
    end
    return self:_spawn_read(req, self._read_balance, { id = id, asset = asset, min_seq = min_seq },
                            "balance")
end

-- ---- statement ----

-- The rater's usage metadata (ron.ledger.usage, LED-R-6), when that module is present.
local usage_ok, usage = pcall(require, "ron.ledger.usage")
if not usage_ok then usage = nil end

local function kind_of(rec)
    local m = rec and rec.metadata or ""
    local k = match(m, '^{"wallet":"[%w_]+","kind":"([%w_]+)"')
    if k then return k end
    if usage and usage.decode_metadata(m) then return "usage" end
    return "other"
end

-- A transfer's metadata as a JSON value: the wallet's own (JSON text) as it is, the rater's
-- as the slice it cites (stream, seq, window, digest, rate card, amount), anything else as
-- hex (metadata are bytes: never raw in JSON).
local function metadata_json(m)
    m = m or ""
    if match(m, '^{"wallet":"[%w_]+","kind":"[%w_]+","principal":"[%w]+","nonce":%d+') then
        return m
    end
    local u = usage and usage.decode_metadata(m)
    if u then
        return format('{"slice":{"tenant":"%s","dimension":"%s","seq":%s,"window_start_s":%s,' ..
                      '"window_len_s":%s,"b3":"%s","rate_card":"%s","quantity":%s,' ..
                      '"amount":%s}}', dto.uuid_text(u.tenant), jstr(u.dimension),
                      dec(u.seq), dec(u.window_start_s), dec(u.window_len_s),
                      hex(u.b3), jstr(u.version), dec(u.quantity), dec(u.amount))
    end
    return format('{"hex":"%s"}', hex(m))
end

function W:_statement(job)
    local led, store = self.led, self.led.store
    local hist, err = led:history(job.id, { limit = job.limit })
    if not hist then return prob("ledger_unavailable", tostring(err), { ["Retry-After"] = "1" }) end
    local entries = {}
    local origin_cache = {}
    local function origin(tid)
        local o = origin_cache[tid]
        if o == nil then
            local rec = led:transfer(tid)
            o = { kind = kind_of(rec) }
            origin_cache[tid] = o
        end
        return o
    end
    for _, rec in ipairs(hist) do
        local t = rec.transfer or (led:transfer(rec.id) or {}).transfer
        if t then
            local delta = I64(0) -- exact whatever the amounts (int64_t: as the ledger's)
            local consumed = {}
            local ids = {}
            for _, inp in ipairs(t.inputs) do ids[#ids + 1] = inp end
            local ps = #ids > 0 and store:get_postings(ids) or {}
            for _, p in ipairs(ps or {}) do
                if p.account == job.id and p.asset.code == job.asset then
                    delta = delta - p.amount
                    local by = p.id.transfer_id
                    consumed[#consumed + 1] = format(
                        '{"posting":"%s:%s","amount":%s,"funded_by":"%s","funded_by_kind":"%s"}',
                        hex(by), dec(p.id.index), dec(p.amount), hex(by), origin(by).kind)
                end
            end
            for _, out in ipairs(t.outputs) do
                if out.account == job.id and out.asset.code == job.asset then
                    delta = delta + out.amount
                end
            end
            if delta ~= 0 or #consumed > 0 then
                entries[#entries + 1] = format(
                    '{"transfer_id":"%s","created_at_ms":%s,"kind":"%s","delta":%s,' ..
                    '"metadata":%s,"consumed":[%s]}', hex(rec.id), dec(rec.created_at_ms or 0),
                    kind_of(rec), dec(delta), metadata_json(rec.metadata), concat(consumed, ","))
            end
        end
    end
    return answer(200, format('{"account":"%s","asset":"%s","entries":[%s]}\n',
                              dto.uuid_text(job.id), job.asset, concat(entries, ",")))
end

function W:_get_statement(req, id_text)
    local id, q, asset = self:_read_auth(req, id_text)
    if not id then return ret(self, q) end
    local limit = self.statement_limit
    if q.limit then
        limit = dto.query_uint(q.limit, 1, 4 * self.statement_limit)
        if not limit then
            return ret(self, prob("bad_query", format("limit must be an integer in 1..%d " ..
                                                      "(decimal digits)",
                                                      4 * self.statement_limit)))
        end
    end
    return self:_spawn_read(req, self._statement, { id = id, asset = asset, limit = limit },
                            "statement")
end

-- ---- routes ----

local UUIDP = "([%x%-]+)"
-- The wallet's paths: one that no route takes is the wallet's 404 (problem+json); others
-- (/v1/records, /metrics, ...) are the daemon's.
local NAMESPACES = { "^/v1/accounts/", "^/v1/issue/", "^/v1/transfer/", "^/v1/burn/" }

function W:routes()
    local list = {}
    for _, route in ipairs { "issue", "transfer", "burn" } do
        list[#list + 1] = { method = "POST", path = "^/v1/" .. route .. "$",
                            fn = function(req) return self:_post_money(req, route) end }
    end
    list[#list + 1] = { method = "POST", path = "^/v1/accounts$",
                        fn = function(req) return self:_post_account(req, nil, "create") end }
    for _, op in ipairs { "freeze", "unfreeze", "close" } do
        local pat = "^/v1/accounts/" .. UUIDP .. "/" .. op .. "$"
        list[#list + 1] = { method = "POST", path = pat, fn = function(req)
            return self:_post_account(req, match(req.path, pat), op)
        end }
    end
    local bal = "^/v1/accounts/" .. UUIDP .. "/balance$"
    list[#list + 1] = { method = "GET", path = bal, fn = function(req)
        return self:_get_balance(req, match(req.path, bal))
    end }
    local st = "^/v1/accounts/" .. UUIDP .. "/statement$"
    list[#list + 1] = { method = "GET", path = st, fn = function(req)
        return self:_get_statement(req, match(req.path, st))
    end }
    -- the HTTP server's answers on the wallet's paths are problems too (issue 24 §3)
    local function errors(status, detail, headers, header)
        return ret(self, dto.server_problem(status, detail, headers, header))
    end
    local out = {}
    for _, r in ipairs(list) do
        local fn = r.fn
        out[#out + 1] = { method = r.method, path = r.path, errors = errors, handler = function(req)
            local ok, s, b, c, hd = pcall(fn, req)
            if ok then return s, b, c, hd end
            self.log("handler error: " .. tostring(s))
            return ret(self, prob("internal", "wallet error"))
        end }
    end
    for _, ns in ipairs(NAMESPACES) do out[#out + 1] = { path = ns, errors = errors } end
    return out
end

-- ---- lifecycle ----

-- The system accounts, then the workers and the feed. From the main chunk or a task.
function W:start()
    self.T = task.current() -- every task of the wallet on the scheduler that started it
    self.queue = committer.queue(self.T, self.queue_capacity, self.workers)
    self.workers_h = {}
    for i = 1, self.workers do
        self.workers_h[i] = self:_spawn("worker", function() self:_worker(i) return true end)
    end
    self.feed_h = self:_spawn("feed", function()
        local led = self.led
        for _, s in ipairs {
            { _M.SYSTEM.top_up, "uncapped" }, { _M.SYSTEM.grant, "uncapped" },
            { _M.SYSTEM.burned, "no_overdraft" } } do
            while not self.stopping do
                local okc, _, code = led:create_account { id = s[1], policy = s[2] }
                if okc or code ~= ERR.Unavailable then break end
                if not self.T.sleep(self.poll_ms * 10) then return true end
            end
        end
        self.system_ready = true
        while not self.stopping do
            local ok, err = self.cache:poll()
            if not ok then self.feed_err = tostring(err) else self.feed_err = nil end
            if not self.T.sleep(self.poll_ms) then break end
        end
        return true
    end)
    return self
end

-- Intake stops; queued jobs are still answered; the workers end when the queue is empty.
function W:stop()
    if self.stopping then return end
    self.stopping = true
    if self.queue then self.queue:close() end
end

-- From a task, after stop(): waits (at most deadline_ms) for the workers to empty the queue,
-- the feed to end and every ledger call and read to finish; then aborts what is still
-- running (seed 004 §6: Draining -> Aborting -> Stopped), counted in
-- wallet_tasks_aborted_total{kind}. An aborted commit leaves its saga in the store: the
-- next start's recover() finishes or releases it, and a client's retry of the same request
-- (same key and nonce) gets its one outcome. -> true | false, n aborted (deadline)
function W:wait(deadline_ms)
    local t_end = self.clock() + (deadline_ms or 5000)
    for _, h in ipairs(self.workers_h or {}) do
        h:join(math.max(1, t_end - self.clock()))
    end
    if self.feed_h then self.feed_h:join(math.max(1, t_end - self.clock())) end
    while next(self.tasks.live) ~= nil and self.clock() < t_end do
        self.T.sleep(10)
    end
    if next(self.tasks.live) == nil then return true end
    local n = 0
    for h, kind in pairs(self.tasks.live) do
        if h:abort() then
            n = n + 1
            self.tasks.aborted[kind] = self.tasks.aborted[kind] + 1
        end
    end
    self.tasks.live = {}
    self.calls, self.n_reads = {}, 0 -- their tasks are gone
    self.m.worker_inflight = 0
    self.log(format("drain deadline (%d ms): %d task(s) aborted", deadline_ms or 5000, n))
    return false, n
end

function W:ready()
    local reasons = {}
    local now = self.clock()
    if not self.system_ready then reasons[#reasons + 1] = "wallet: starting" end
    local st = self.breaker:state()
    if st == "open" then reasons[#reasons + 1] = "wallet: the ledger's breaker is open" end
    for _, t0 in pairs(self.calls) do
        if now - t0 > self.stall_ms then
            reasons[#reasons + 1] = format("wallet: a ledger call has run for %d ms", now - t0)
            break
        end
    end
    local stale = self.cache:staleness_ms()
    if self.system_ready and (stale == nil or stale > self.stall_ms) then
        reasons[#reasons + 1] = format("wallet: the ledger's event feed is %s ms behind",
                                       tostring(stale))
    end
    if self.stopping then reasons[#reasons + 1] = "wallet: draining" end
    for _, why in pairs(self.not_ready) do reasons[#reasons + 1] = why end
    return #reasons == 0, reasons
end

-- A usage.shortfall event (the rater, ron.ledger.exporter): a tenant's
-- wallet did not cover a slice's charge; the rest went to its receivable. The wallet
-- publishes it: a counter, a log line, the operator's hook (a gateway throttles the tenant;
-- the metering keeps recording: usage is a fact). WLT-9.
function W:_shortfall(ev)
    local data = ev.data or ""
    local tenant = match(data, "tenant=(%S+)")
    local amount_text = match(data, "amount=(%d+)")
    local amount = tonumber(amount_text)
    local asset = match(data, "asset=(%S+)") or "?"
    local d = self.dry
    d.total = d.total + 1
    if d.by_asset[asset] ~= nil or d.n_last < 64 then -- a bounded label set
        if d.by_asset[asset] == nil then d.n_last = d.n_last + 1 end
        d.by_asset[asset] = (d.by_asset[asset] or 0) + 1
    end
    self.log(format("wallet ran dry: tenant=%s shortfall=%s %s (the receivable holds it)",
                    tostring(tenant), amount_text or "?", asset))
    if self.on_dry then
        local ok, err = pcall(self.on_dry, tenant, amount, asset)
        if not ok then self.log("on_dry hook: " .. tostring(err)) end
    end
end

-- ---- metrics (docs/reference/metrics.md) ----

function W:metrics_text()
    local out, m, c = {}, self.m, self.cache
    FAM.queue_depth:render(out, { { "commit", self.queue and self.queue:depth() or 0 } })
    FAM.busy:render_map(out, m.busy, _M.ENDPOINTS)
    FAM.io_timeouts:render_map(out, m.io_timeouts, { "commit", "read", "feed" })
    FAM.retries:render(out, m.backoff_retries)
    FAM.bus_lagged:render(out, { { "ledger", c.lagged_total } })
    FAM.worker_inflight:render(out, m.worker_inflight)
    FAM.groups:render(out, { { "groups", m.groups or 0 }, { "members", m.grouped or 0 },
                             { "fallbacks", m.group_fallbacks or 0 } })
    local tk = self.tasks
    local live = {}
    for _, k in ipairs(_M.TASK_KINDS) do live[k] = 0 end
    for _, k in pairs(tk.live) do live[k] = live[k] + 1 end
    FAM.tasks_spawned:render_map(out, tk.spawned, _M.TASK_KINDS)
    FAM.tasks_finished:render_map(out, tk.finished, _M.TASK_KINDS)
    FAM.tasks_aborted:render_map(out, tk.aborted, _M.TASK_KINDS)
    FAM.tasks_inflight:render_map(out, live, _M.TASK_KINDS)
    FAM.requests:render_map(out, m.requests)
    FAM.commits:render(out, { { "committed", m.commits }, { "rejected", m.rejections },
                              { "replayed", m.replays } })
    FAM.breaker_open:render(out, self.breaker:state() == "open" and 1 or 0)
    FAM.breaker_opens:render(out, self.breaker.opens_total)
    FAM.ledger_seq:render(out, c.seq)
    -- seconds (Prometheus' base unit) to the millisecond, written exactly: "0.25", not a
    -- double's %.17g digits
    local st = c:staleness_ms()
    FAM.staleness:render(out, st and format("%.3f", st / 1000) or "-1")
    FAM.cache_entries:render(out, c:size())
    FAM.dry:render_map(out, self.dry.by_asset)
    local cum, acc = {}, 0
    for i = 1, #cache.LAG_BUCKETS + 1 do
        acc = acc + c.lag_hist[i]
        cum[i] = acc
    end
    FAM.invalidation_lag:render_histogram(out, LAG_LES, cum, format("%.3f", c.lag_sum / 1000),
                                          c.lag_count)
    FAM.account_busy:render(out, { { "ledger", self.held.marked },
                                   { "at_once", self.held.refused } })
    if self.fleet then self.fleet:render(out) end
    return metrics.text(out)
end

function W:stats()
    return { busy = self.m.busy, requests = self.m.requests, io_timeouts = self.m.io_timeouts,
             backoff_retries = self.m.backoff_retries, commits = self.m.commits,
             rejections = self.m.rejections, replays = self.m.replays,
             queue = self.queue and self.queue:depth() or 0, breaker = self.breaker:state(),
             seq = self.cache.seq, staleness_ms = self.cache:staleness_ms(),
             lag_max_ms = self.cache.lag_max, lag_count = self.cache.lag_count }
end

return _M
