-- ron.wallet.money: the money path (issue, transfer, burn): the POST handler's checks
-- (Idempotency-Key, the body, who may move what, the answer cache, keys and nonces in
-- flight), the ledger work of one request (its Idempotency-Key and nonce rows, the commit,
-- retries with backoff) and the rendering of its outcome (receipts, stored rejections,
-- nonce_used). ron.wallet.committer's groups answer through the same W:_money_request,
-- W:_money_outcome and W:_nonce_used. Part of ron.wallet.service (its facade copies .methods
-- onto the service's class).
local A = require("ron.wallet.answer")
local accounts = require("ron.wallet.accounts")
local codec = require("ron.ledger.codec")
local dto = require("ron.wallet.dto")
local ledger_engine = require("ron.ledger.ledger")

local format, concat = string.format, table.concat
local floor, random, min = math.floor, math.random, math.min
local pairs, ipairs, type, tostring, pcall = pairs, ipairs, type, tostring, pcall

local ERR = ledger_engine.ERR
-- Every integer that names money or order (amount, nonce, seq, version, event seq) is
-- rendered through dec, never through a Lua number's 14-digit conversion (issue 24).
local dec = require("ron.ledger.bigint").dec
local jstr = dto.jstr
local answer, prob, problem_answer, ret, hex = A.answer, A.prob, A.problem_answer, A.ret, A.hex
local cached = A.cached
local SYSTEM = accounts.SYSTEM

local M = {}
local W = {}
M.methods = W

-- A ledger rejection code -> the problem code (docs/WALLET.md §4).
local REJECTION = {
    [ERR.InsufficientFunds] = "insufficient_funds",
    [ERR.NegativePosting] = "insufficient_funds",
    [ERR.AccountFrozen] = "account_frozen",
    [ERR.AccountClosed] = "account_closed",
    [ERR.UnknownAccount] = "unknown_account",
}

-- ---- rendering (deterministic: only what the ledger stored and the request's canon) ----

-- A receipt's members after transfer_id, status, event_seq and route: each route's fields
-- in this order (from, to, asset, amount, nonce, kind), those its requests carry (every
-- field of a decoded request but the memo). One format per receipt, made once per route
-- (a loop of formats per field was ~2.8 us and seven strings per answer, issue 25). The
-- strings need no escape: account ids are checked UUID text, asset codes [A-Z][A-Z0-9_]*,
-- kinds one of dto.KINDS (ron.wallet.dto); amounts and nonces through dec.
local RECEIPT_FIELDS = {
    issue = { "to", "asset", "amount", "nonce", "kind" },
    transfer = { "from", "to", "asset", "amount", "nonce" },
    burn = { "from", "asset", "amount", "nonce" },
}
local RECEIPT_FORMAT = {}
for route, fields in pairs(RECEIPT_FIELDS) do
    local f = { '{"transfer_id":"%s","status":"committed","event_seq":%s,"route":"', route, '"' }
    for _, name in ipairs(fields) do
        local num = name == "amount" or name == "nonce"
        f[#f + 1] = format(num and ',"%s":%%s' or ',"%s":"%%s"', name)
    end
    f[#f + 1] = "}\n"
    RECEIPT_FORMAT[route] = concat(f)
end
M.RECEIPT_FIELDS = RECEIPT_FIELDS

function W:_receipt(r, res)
    local route, id, seq = r.route, hex(res.transfer_id), dec(res.event_seq or 0)
    local fmt = RECEIPT_FORMAT[route]
    local body
    if route == "transfer" then
        body = format(fmt, id, seq, r.from_text, r.to_text, r.asset, dec(r.amount), dec(r.nonce))
    elseif route == "issue" then
        body = format(fmt, id, seq, r.to_text, r.asset, dec(r.amount), dec(r.nonce), r.kind)
    else
        body = format(fmt, id, seq, r.from_text, r.asset, dec(r.amount), dec(r.nonce))
    end
    return answer(201, body)
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

-- The ledger's asset of a request, one table per code and scale (the configured assets:
-- ron.wallet.dto checks a request's code against them), shared by the requests (the engine
-- reads it, never writes it): a table per request was ~100 B of garbage, issue 25.
local asset_tables = {} -- [scale][code]
local function asset_of(code, scale)
    local by = asset_tables[scale]
    if not by then
        by = {}
        asset_tables[scale] = by
    end
    local a = by[code]
    if not a then
        a = { code = code, scale = scale }
        by[code] = a
    end
    return a
end

local function movements(r)
    local asset = asset_of(r.asset, r.scale)
    if r.route == "issue" then
        return { { from = SYSTEM[r.kind], to = r.to, asset = asset, amount = r.amount } }
    elseif r.route == "burn" then
        return { { from = r.from, to = SYSTEM.burned, asset = asset, amount = r.amount } }
    end
    return { { from = r.from, to = r.to, asset = asset, amount = r.amount } }
end

-- The accounts a committed request involves: its transfer's pins (every account it
-- touches, LED-9) when the engine's result carries the transfer (the batch path), else its
-- movements' payers and payees (the same set: a payer's postings and change, its payee).
local function touched(r, res)
    local out = {}
    if res.transfer then
        for i, p in ipairs(res.transfer.pins) do out[i] = p.account end
        return out
    end
    for _, m in ipairs(movements(r)) do
        out[#out + 1] = m.from
        out[#out + 1] = m.to
    end
    return out
end

-- The cache's entries of the accounts a committed request involves dropped (touched's, the
-- batch path's pins read in place: no list per answer, issue 25).
local function invalidate_touched(self, r, res)
    local cache = self.cache
    if res.transfer then
        for _, p in ipairs(res.transfer.pins) do cache:invalidate(p.account) end
        return
    end
    for _, a in ipairs(touched(r, res)) do cache:invalidate(a) end
end

-- The accounts of the wallet's own money request with nonce row intent and body hash h while
-- its commit runs (the cache's feed meets its event before its answer), or nil.
function W:_own_running(intent, h)
    local job = self.inflight[intent]
    if type(job) ~= "table" or job.kind ~= "money" or job.nkey ~= intent or job.h ~= h then
        return nil
    end
    return touched(job.r, {})
end

-- ---- the ledger work of one money request (in its own task) ----

-- 503 account_busy: the payer's money is reserved by commits in flight; nothing decided.
local function account_busy(retry_after_s)
    return prob("account_busy", "the account's money is reserved by commits in flight (on " ..
                "this node or another; a dead node's are released when its lease expires); " ..
                "nothing was decided: retry the same request",
                { ["Retry-After"] = tostring(retry_after_s) })
end
function W:_account_busy(retry_after_s) return account_busy(retry_after_s) end

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
        -- its accounts' entries dropped now (a read racing it is not stored), so the feed
        -- need not read its transfer back (ron.wallet.cache, issue 25)
        invalidate_touched(self, r, res)
        if res.replayed then self.m.replays = self.m.replays + 1
        else
            self.held:clear(r.from) -- it commits again: no longer run apart
            self.m.commits = self.m.commits + 1
            self.cache:note_commit(res.transfer_id, self.clock(), res.event_seq)
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
    local hit_h, status, body, ctype, hd = cached(self, kkey)
    if hit_h then
        if hit_h ~= h then -- (a stored answer, under its body hash: W:_keep_answer)
            return ret(self, prob("idempotency_mismatch",
                                  "this Idempotency-Key was used with another body"))
        end
        self.m.replays = self.m.replays + 1
        self:_count(status)
        hd["Idempotent-Replayed"] = "true"
        return status, body, ctype, hd
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


return M
