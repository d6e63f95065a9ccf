-- ron.ledger.engine.requests: the requests (commit, reverse: checked, their body hash) and
-- their outcomes (durable before they are returned, LED-50; replays, LED-27).
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local codec = require("ron.ledger.codec")
local base = require("ron.ledger.engine.base")
local view = require("ron.ledger.view")

local format = string.format
local type = type

local ERR = base.ERR
local EVENT_KIND = base.EVENT_KIND
local fail = base.fail
local guard = base.guard

local _M = {}
local Ledger = {} -- this concern's methods

-- ---- requests ----

local function check_asset(a)
    return type(a) == "table" and type(a.code) == "string" and type(a.scale) == "number"
end

local function check_amount(v)
    if type(v) == "number" then return v > 0 and v % 1 == 0 and v <= 2 ^ 53 end
    return type(v) == "cdata" and v > 0
end

-- True when the movements net every (account, asset) pair to zero: such a request would
-- make a transfer that moves nothing, which no ledger stores (LED-14: the core refuses it
-- as NonCanonical; the engine stored that rejection, a cryptic answer to a plain mistake,
-- and the model oracle of `make sim-ledger` disagreed with it, seed 20261447). A pair
-- that is never credited nets a debit, so one look per movement settles the common request
-- without netting it; the rest are netted exactly by resolution's own rule (view.nets_of:
-- nil on an overflow, which is not nothing, and resolution refuses it).
local function credited(mvs, m)
    for _, m2 in ipairs(mvs) do
        if m2.to == m.from and m2.asset.code == m.asset.code
           and m2.asset.scale == m.asset.scale then
            return true
        end
    end
    return false
end

local function nets_to_nothing(req)
    for _, m in ipairs(req.movements) do
        if not credited(req.movements, m) then return false end
    end
    local nets = view.nets_of(req)
    if not nets then return false end
    for _, p in ipairs(nets) do
        if p.net ~= 0 then return false end
    end
    return true
end

local function check_request(req)
    if type(req) ~= "table" then return "request must be a table" end
    local k = req.intent
    if type(k) ~= "string" or #k < 1 or #k > 255 then return "intent must be 1..255 bytes" end
    if req.body_hash ~= nil and (type(req.body_hash) ~= "string" or #req.body_hash ~= 32) then
        return "body_hash must be 32 bytes"
    end
    if req.metadata ~= nil and type(req.metadata) ~= "string" then
        return "metadata must be a string"
    end
    if req.keys ~= nil then
        if type(req.keys) ~= "table" or #req.keys > 4 then return "keys must be a list of <= 4" end
        for _, key in ipairs(req.keys) do
            if type(key) ~= "string" or #key < 1 or #key > 512 then
                return "a key is 1..512 bytes"
            end
        end
    end
    if req.kind == "reverse" then return nil end
    if type(req.movements) ~= "table" or #req.movements == 0 then
        return "movements must be a non-empty array"
    end
    for i, m in ipairs(req.movements) do
        if type(m) ~= "table" or type(m.from) ~= "string" or #m.from ~= 16 or
            type(m.to) ~= "string" or #m.to ~= 16 then
            return format("movements[%d]: from and to must be 16-byte account ids", i)
        end
        if not check_asset(m.asset) then return format("movements[%d]: bad asset", i) end
        if not check_amount(m.amount) then
            return format("movements[%d]: amount must be a positive integer", i)
        end
    end
    if nets_to_nothing(req) then
        return "the movements net to nothing: no account's balance would change"
    end
    if req.overdraft ~= nil then
        if type(req.overdraft) ~= "table" then return "overdraft must be a table" end
        for from, to in pairs(req.overdraft) do
            if type(from) ~= "string" or #from ~= 16 or type(to) ~= "string" or #to ~= 16 then
                return "overdraft maps 16-byte account ids to 16-byte account ids"
            end
        end
    end
end

-- The part of a request its body hash covers (when the caller gives none).
local function body_of(req)
    return codec.encode_body(req.kind, req.metadata, req.movements, req.overdraft, req.target)
end

-- The body hash the engine stores for a request without one (kind "commit" or "reverse").
function _M.body_hash(kind, req)
    if req.body_hash then return req.body_hash end
    if kind == "reverse" then
        return codec.sha256(codec.encode_body("reverse", req.metadata or "", nil, nil, req.target))
    end
    return codec.sha256(codec.encode_body("commit", req.metadata or "", req.movements,
                                          req.overdraft))
end

function Ledger:commit(req)
    local bad = check_request(req)
    if bad then return fail(ERR.InvalidRequest, bad) end
    local r = { kind = "commit", intent = req.intent, movements = req.movements,
                metadata = req.metadata or "", overdraft = req.overdraft, keys = req.keys }
    r.body_hash = req.body_hash or codec.sha256(body_of(r))
    return self:_acked(self:_run(r))
end

-- A reversal: a new transfer that consumes what transfer_id created and recreates what it
-- consumed, through the same path (LED-34).
function Ledger:reverse(transfer_id, intent, opts)
    opts = opts or {}
    if type(transfer_id) ~= "string" or #transfer_id ~= 32 then
        return fail(ERR.InvalidRequest, "transfer id must be 32 bytes")
    end
    local r = { kind = "reverse", intent = intent, target = transfer_id,
                metadata = opts.metadata or "", body_hash = opts.body_hash }
    local bad = check_request(r)
    if bad then return fail(ERR.InvalidRequest, bad) end
    r.body_hash = r.body_hash or codec.sha256(body_of(r))
    return self:_acked(self:_run(r))
end

-- ---- outcomes ----

-- wip/perf (LED-50): an outcome is durable before it is returned. With the store's
-- durability "ack" its primitives commit without a sync; one flush() here makes all of them
-- (and a replayed outcome read back) durable. A stored rejection is flushed too; a request
-- refused before any write (InvalidRequest) and Unavailable (nothing acknowledged) are not.
-- A failed flush answers Unavailable: the caller's retry finds the intent and flushes again.
-- new { flush = false }: the caller flushes (the exporter's group commit).
function Ledger:flush()
    if not self.store.flush then return 0 end
    return guard(nil, function() return self:_p("flush") end)
end

-- durable (an internal 4th value): the outcome's last phase flushed in the same call
-- (LED-67), nothing left to flush.
function Ledger:_acked(r, err, code, durable)
    if durable then return r, err, code end
    if not self.flush_on_ack or (r == nil and (code == ERR.InvalidRequest
                                               or code == ERR.Unavailable)) then
        return r, err, code
    end
    local n, ferr = self:flush()
    if not n then return fail(ERR.Unavailable, "not durable: " .. tostring(ferr)) end
    return r, err, code
end

function Ledger:_outcome(req, stored)
    if stored.body_hash and req.body_hash and stored.body_hash ~= req.body_hash then
        return fail(ERR.Conflict, "intent already used with another body")
    end
    self.stats.replays = self.stats.replays + 1
    if stored.status == "committed" then
        local ev = self:_read("get_event", self.book, stored.transfer_id, EVENT_KIND)
        return { transfer_id = stored.transfer_id, status = "committed",
                 event_seq = ev and ev.seq, replayed = true }
    end
    return nil, stored.message, stored.code
end

function Ledger:_new_sid()
    self.seq = self.seq + 1
    return format("%s:%s:%d", self.node, self.nonce, self.seq)
end

function Ledger:_run(req)
    -- (the prior outcome is read by the saga's open phase, with its claim: LED-67)
    return guard(nil, self._drive, self, self:_new_sid(), req, true)
end

_M.body_of = body_of
_M.check_request = check_request
_M.methods = Ledger
return _M
