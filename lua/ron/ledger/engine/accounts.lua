-- ron.ledger.engine.accounts: accounts (LED-8, LED-9): created, frozen, unfrozen and closed as
-- append-only versions, each with its event.
-- A concern of the engine ron.ledger.ledger, which installs the methods below
-- (_M.methods) on its one Ledger class.
local ledger = require("ron.ledger")
local base = require("ron.ledger.engine.base")
local events = require("ron.ledger.events")
local phases = require("ron.ledger.phases")

local error = error
local type = type

local ERR = base.ERR
local fail = base.fail
local guard = base.guard
local hex = base.hex

local _M = {}
local Ledger = {} -- this concern's methods

-- ---- accounts (LED-8, LED-9: append-only versions) ----

function Ledger:create_account(a)
    if type(a) ~= "table" or type(a.id) ~= "string" or #a.id ~= 16 then
        return fail(ERR.InvalidRequest, "account id must be 16 bytes")
    end
    local policy = a.policy or "no_overdraft"
    if policy ~= "no_overdraft" and policy ~= "capped" and policy ~= "uncapped" then
        return fail(ERR.InvalidRequest, "unknown policy " .. tostring(policy))
    end
    local floor = policy == "capped" and (a.floor or 0) or 0
    if floor > 0 then return fail(ERR.InvalidRequest, "a floor is <= 0") end
    local acct = { id = a.id, version = 1, policy = policy, floor = floor,
                   status = a.status or "open", book = self.book }
    acct.bytes = ledger.encode_account(acct)
    return guard(nil, function()
        -- the row and its event (LED-68): one phase (LED-67)
        if phases.account(self, "create_account", acct) then return acct end
        local cur = self:_read("get_account", a.id)
        if cur and cur.version == 1 and cur.policy == policy and cur.floor == floor then
            -- (ours, its reply lost; or a row an older binary wrote: its event then)
            self:_account_event(cur)
            return cur
        end
        if cur and (cur.policy ~= policy or cur.floor ~= floor) then
            return fail(ERR.Conflict, "account " .. hex(a.id) .. " exists with other settings")
        end
        return cur
    end)
end

function Ledger:_set_status(id, status)
    self:_forget_account(id)
    return guard(nil, function()
        for _ = 1, self.max_attempts do
            local cur = self:_read("get_account", id)
            if not cur then return fail(ERR.NotFound, "no account " .. hex(id)) end
            if cur.status == status then
                self:_account_event(cur) -- (as create_account's: ours, or an older row)
                return cur
            end
            if cur.status == "closed" then
                return fail(ERR.AccountClosed, "account " .. hex(id) .. " is closed for good")
            end
            local nxt = { id = id, version = cur.version + 1, policy = cur.policy,
                          floor = cur.floor, status = status, book = cur.book }
            nxt.bytes = ledger.encode_account(nxt)
            if phases.account(self, "append_account_version", nxt) then return nxt end
            -- missed: another version landed first (or ours, reply lost): read and decide
            -- again.
        end
        return fail(ERR.Unavailable, "account " .. hex(id) .. " keeps changing")
    end)
end

-- Appends (book, id, kind, data) once (LED-68): 0 = it exists, or a racing insert took the
-- seq (read back, again). -> the event; a store that keeps refusing aborts the drive. (The
-- engine writes a row and its event in one phase; this is for a row found without one.)
function Ledger:_append_once(id, kind, data)
    for _ = 1, self.max_attempts * 4 do
        self:_p("append_event", self.book, id, kind, data)
        local ev = self:_read("get_event", self.book, id, kind)
        if ev then return ev end
        self.pause(1)
    end
    error({ ledger_store_failure = true, name = "append_event",
            err = kind .. " event not appended", class = "io" }, 0)
end

-- An account version is an event of the feed (LED-68): its data the canonical bytes, so a
-- version row the feed does not name, or other bytes than it names, is found by verify.
function Ledger:_account_event(acct)
    local bytes = acct.bytes or ledger.encode_account(acct)
    return self:_append_once(events.account_id(bytes), events.ACCOUNT, bytes)
end

-- A stored rejection is an event of the feed (LED-68): deleting the intent's row, or
-- changing its code, message or body hash, is found by verify. The engine stores both in
-- one phase (phases.reject); this appends the event of a rejection stored without one (an
-- older binary's), before its saga's record goes, so a crash in between leaves it to
-- recover() (_resume).
function Ledger:_rejection_event(req, stored)
    if stored.status ~= "rejected" then return end
    return self:_append_once(phases.rejection_event(req, stored))
end

function Ledger:freeze(id) return self:_set_status(id, "frozen") end
function Ledger:unfreeze(id) return self:_set_status(id, "open") end
function Ledger:close(id) return self:_set_status(id, "closed") end

function Ledger:account(id)
    return guard(nil, function() return self:_read("get_account", id) end)
end

_M.methods = Ledger
return _M
