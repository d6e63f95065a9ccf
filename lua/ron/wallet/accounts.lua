-- ron.wallet.accounts: account management (operator): create, freeze, unfreeze, close, as
-- jobs of the commit queue; and the wallet's system accounts (docs/WALLET.md §1). Part of
-- ron.wallet.service (its facade copies .methods onto the service's class).
local A = require("ron.wallet.answer")
local codec = require("ron.ledger.codec")
local dec = require("ron.ledger.bigint").dec
local dto = require("ron.wallet.dto")
local ledger_engine = require("ron.ledger.ledger")

local format, sub = string.format, string.sub
local pairs, tostring = pairs, tostring

local ERR = ledger_engine.ERR
local answer, prob, problem_answer, ret = A.answer, A.prob, A.problem_answer, A.ret

local M = {}
local W = {}
M.methods = W

-- The wallet's system accounts (docs/WALLET.md §1): ids from their names.
local function system_id(name) return sub(codec.sha256(name), 1, 16) end
M.SYSTEM = {
    top_up = system_id("ron-wallet:issuance:top_up"),
    grant = system_id("ron-wallet:issuance:grant"),
    burned = system_id("ron-wallet:burned"),
}
local SYSTEM_NAME = {}
for k, v in pairs(M.SYSTEM) do SYSTEM_NAME[v] = k end

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

return M
