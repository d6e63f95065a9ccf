-- ron.node.demo_wallets: the demo's prepaid wallets (`make run ARGS="--demo RATE"` with
-- the whole product, docs/ops/run.md): each demo tenant's usage wallet (the account the
-- rater charges) is opened and granted money through the wallet's own HTTP API as the
-- operator (idempotent: a restart replays the same grants), then the balances are logged
-- whenever they change, so a newcomer sees them go down and the smallest one run dry (the
-- wallet's "ran dry" line, its usage.shortfall event and wallet_dry_total).
local httpc = require("ron.base.net.http_client")
local task = require("ron.base.task")
local usage = require("ron.ledger.usage")
local dto = require("ron.wallet.dto")
local log = require("ron.node.log")

local format, concat = string.format, table.concat
local ipairs, tostring = ipairs, tostring

local _M = {}

-- USD cents (scale 2): at --demo 1000 a tenant uses ~1.00 USD of requests a window
-- (examples/cards/default.lua), so the third runs dry in its first window.
_M.PREPAID = { 10000, 5000, 20 }
_M.POLL_MS = 5000

local function call(d, method, path, body, key)
    local headers = { Authorization = "Bearer " .. d.product.token }
    if body then headers["Content-Type"] = "application/json" end
    if key then headers["Idempotency-Key"] = key end
    local res, err = httpc.request { method = method, url = d.product.url .. path,
                                     headers = headers, body = body,
                                     connect_timeout_ms = 5000, timeout_ms = 10000 }
    if not res then return nil, err end
    return res.status, res.body
end

-- "12345" cents -> "123.45" (string arithmetic: a money integer never goes through %g).
local function cents_text(s)
    local neg, digits = s:match("^(%-?)(%d+)$")
    if not digits then return s end
    digits = ("0"):rep(3 - #digits) .. digits
    return neg .. digits:sub(1, -3) .. "." .. digits:sub(-2)
end
_M.cents_text = cents_text

-- Opens and funds one tenant's wallet; retries while the wallet starts. -> true | nil, err
local function fund(d, i, id)
    local grant = format('{"to":"%s","asset":"USD","amount":%d,"nonce":%d,"kind":"grant"}',
                         id, _M.PREPAID[i], i)
    for _ = 1, 60 do
        if d.stopping then return nil, "stopping" end
        local st, body = call(d, "POST", "/v1/accounts", format('{"account":"%s"}', id))
        if st == 200 or st == 201 or (st == 409 and tostring(body):find("account_exists")) then
            st, body = call(d, "POST", "/v1/issue", grant, "demo-prepaid-" .. i)
            if st == 200 or st == 201 then return true end
        end
        if st and st ~= 503 and st ~= 429 then return nil, format("%s %s", st, tostring(body)) end
        task.sleep(1000)
    end
    return nil, "the wallet did not answer"
end

local function balances(d, ids)
    local parts = {}
    for i, id in ipairs(ids) do
        local st, body = call(d, "GET", "/v1/accounts/" .. id .. "/balance?asset=USD")
        local b = st == 200 and tostring(body):match('"balance":(%-?%d+)') or "?"
        parts[i] = format("tenant-%d %s USD%s", i, cents_text(b), b == "0" and " (dry)" or "")
    end
    return concat(parts, ", ")
end

-- The task: fund, then log the balances when they change (every POLL_MS at most).
function _M.task(d, tenants)
    local ids = {}
    for i, t in ipairs(tenants) do ids[i] = dto.uuid_text(usage.account("wallet", t)) end
    for i, id in ipairs(ids) do
        local ok, err = fund(d, i, id)
        if not ok then
            if not d.stopping then log("WARN", "demo: funding wallet %s: %s", id, err) end
            return
        end
    end
    log("INFO", "demo: %d tenants with prepaid wallets (%s); balances as they change:",
        #ids, concat(ids, " "))
    local last
    repeat
        local now = balances(d, ids)
        if now ~= last then log("INFO", "balances: %s", now) end
        last = now
    until not task.sleep(_M.POLL_MS) or d.stopping
end

return _M
