-- ron.wallet.service: the wallet's HTTP routes over the ledger engine (issue 17, seed 004,
-- docs/WALLET.md). Runs inside `ron-accounting run` (the request decoder and the HTTP server
-- are the host's), on the daemon's server like ingest: the daemon adds w:routes().
--
--   local service = require("ron.wallet.service")
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
--
-- The concerns live in their own modules, each a table of methods this facade copies onto
-- the class (a name two of them define is an error at load): ron.wallet.answer (answers,
-- problems, sending and counting them), ron.wallet.request (token and body checks),
-- ron.wallet.money (issue, transfer, burn), ron.wallet.accounts (account management, the
-- system accounts), ron.wallet.reads (balance, statement), ron.wallet.jobs (tasks, the
-- commit queue, the drain's wait), ron.wallet.metrics (metrics_text, stats, dry wallets).
local A = require("ron.wallet.answer")
local accounts = require("ron.wallet.accounts")
local breaker = require("ron.wallet.breaker")
local cache = require("ron.wallet.cache")
local committer = require("ron.wallet.committer")
local check = require("ron.base.check")
local clock = require("ron.base.clock")
local blobcache = require("ron.base.blobcache")
local dto = require("ron.wallet.dto")
local held = require("ron.wallet.held")
local jobs = require("ron.wallet.jobs")
local ledger_engine = require("ron.ledger.ledger")
local money = require("ron.wallet.money")
local reads = require("ron.wallet.reads")
local request = require("ron.wallet.request")
local task = require("ron.base.task")
local wmetrics = require("ron.wallet.metrics")

local format, match = string.format, string.match
local pairs, ipairs, type, tostring, error, pcall, setmetatable, next =
      pairs, ipairs, type, tostring, error, pcall, setmetatable, next

local ERR = ledger_engine.ERR
local prob, ret, hex = A.prob, A.ret, A.hex

local _M = {}

-- The endpoints (labels of wallet_busy_rejections_total and requests) and the kinds of the
-- wallet's tasks (labels of wallet_tasks_*): ron.wallet.metrics'.
_M.ENDPOINTS, _M.TASK_KINDS = wmetrics.ENDPOINTS, wmetrics.TASK_KINDS

_M.DEFAULTS = {
    tokens = nil,               -- required: { ["<BLAKE3 hex of a token>"] = "operator" | uuid }
    assets = nil,               -- required: { CODE = scale }
    queue_capacity = 512,       -- the commit queue (seed 004 §3)
    workers = 1,                -- committer tasks, one lane of the queue each (by payer)
    group_max = 256,            -- money jobs per group commit (ron.wallet.committer); 1: none
    group_linger_ms = 10,       -- a committer waits up to this for its group to fill; 0: never
    group_pipeline = true,      -- two groups of a lane in flight (ron.wallet.committer); false:
                                -- one at a time
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
    idempotency_cache = 10000,  -- rendered answers cached per Idempotency-Key (two
                                -- generations, off the Lua heap: ron.base.blobcache)
    max_reads = 256,            -- balance/statement reads in flight (beyond: 429)
    min_seq_wait_ms = 1000,     -- how long a GET with min_seq waits for the feed
    statement_limit = 50,       -- default and cap of entries in one statement (cap: 4x)
}

local INTEGER_KEYS = {
    queue_capacity = { 1, 65536 }, workers = { 1, 256 }, group_max = { 1, 1024 },
    group_linger_ms = { 0, 1000 },
    commit_timeout_ms = { 10, 60000 },
    retries = { 0, 10 }, retry_base_ms = { 1, 10000 }, retry_cap_ms = { 1, 60000 },
    retry_jitter_ms = { 0, 10000 }, breaker_threshold = { 1, 100000 },
    breaker_window_ms = { 1000, 600000 }, breaker_open_ms = { 100, 600000 },
    breaker_probes = { 1, 1000 }, stall_ms = { 50, 600000 }, poll_ms = { 5, 60000 },
    cache_entries = { 1, 10000000 }, idempotency_cache = { 0, 10000000 },
    max_reads = { 1, 65536 }, min_seq_wait_ms = { 0, 60000 }, statement_limit = { 1, 1000 },
}

-- -> true | nil, "wallet...: why"
function _M.check_config(v, keyname)
    keyname = keyname or "wallet"
    if type(v) ~= "table" then return nil, keyname .. " must be a table" end
    for k in pairs(v) do
        if k ~= "tokens" and k ~= "assets" and k ~= "group_pipeline"
           and INTEGER_KEYS[k] == nil then
            return nil, format("unknown key '%s.%s'", keyname, tostring(k))
        end
    end
    local ok, err = check.ranges(v, INTEGER_KEYS, keyname)
    if not ok then return nil, err end
    if v.group_pipeline ~= nil and type(v.group_pipeline) ~= "boolean" then
        return nil, keyname .. ".group_pipeline must be a boolean"
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

-- The wallet's system accounts (docs/WALLET.md §1): ron.wallet.accounts'.
_M.SYSTEM = accounts.SYSTEM

local W = {}
W.__index = W
for _, part in ipairs { A, request, money, accounts, reads, jobs, wmetrics } do
    for name, fn in pairs(part.methods) do
        if W[name] ~= nil then error("ron.wallet.service: W:" .. name .. " defined twice") end
        W[name] = fn
    end
end

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
    self.clock = o.clock or clock.wall_ms
    self.log = o.log or function(line) io.stderr:write("wallet: ", line, "\n") end
    self.dto = dto.new { assets = self.assets }
    self.tokens, self.token_memo, self.n_token_memo = {}, {}, 0
    for h, who in pairs(cfg.tokens) do
        if who == "operator" then
            self.tokens[h] = { operator = true, principal = "operator" }
        else
            local id = dto.uuid_bytes(who)
            -- (account_text: the canonical text, as a path that names this account spells it)
            self.tokens[h] = { account = id, principal = hex(id), account_text = who }
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
                             on_shortfall = function(ev) self:_shortfall(ev) end,
                             own_running = function(intent, h)
                                 return self:_own_running(intent, h)
                             end }
    -- (off the Lua heap: as Lua objects, its 20,000 answers made the collector's sweep
    -- triple the loop time of one group commit in every cycle, issue 25)
    self.answers = blobcache.new(self.idempotency_cache)
    -- payers a saga of another process kept reserved for a whole commit (issue 29 item 3)
    self.held = held.new { clock = self.clock, hold_ms = 1000 }
    self.not_ready = {}      -- reasons others hold (the node's lease: ron.wallet.fleet)
    self.inflight = {}       -- intent or key -> its job while a commit for it runs
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
        list[#list + 1] = { method = "POST", path = pat, fn = function(req, id)
            return self:_post_account(req, id or match(req.path, pat), op)
        end }
    end
    local bal = "^/v1/accounts/" .. UUIDP .. "/balance$"
    -- (id: the router's capture of the path's id, ron.node.http; matched here without one)
    list[#list + 1] = { method = "GET", path = bal, fn = function(req, id)
        return self:_get_balance(req, id or match(req.path, bal))
    end }
    local st = "^/v1/accounts/" .. UUIDP .. "/statement$"
    list[#list + 1] = { method = "GET", path = st, fn = function(req, id)
        return self:_get_statement(req, id or match(req.path, st))
    end }
    -- the HTTP server's answers on the wallet's paths are problems too (issue 24 §3)
    local function errors(status, detail, headers, header)
        return ret(self, dto.server_problem(status, detail, headers, header))
    end
    local out = {}
    for _, r in ipairs(list) do
        local fn = r.fn
        out[#out + 1] = { method = r.method, path = r.path, errors = errors,
                          handler = function(req, cap)
            local ok, s, b, c, hd = pcall(fn, req, cap)
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

-- w:wait(deadline_ms), the drain after stop(): ron.wallet.jobs.

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

return _M

