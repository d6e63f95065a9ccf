-- wrk script of tests/bench/bench-wallet.lua: ron-wallet under load on loopback.
--
-- Environment: WALLET_FROM ("uuid=token;uuid=token;...": the source accounts and their
-- tokens, used in turn), WALLET_TO (the sink account's UUID),
-- WALLET_MODE: "transfer" (POST /v1/transfer of 1 minor unit, every request its own
-- Idempotency-Key and nonce: thread t's n-th request uses nonce WALLET_BASE + t * 10^9 + n,
-- so runs and threads never collide), "balance" (GET the first source's balance: the
-- cache) or "healthz" (GET /healthz: the HTTP floor). done() prints one line
--   WRK {"requests":N,"duration_us":N,"p50_us":N,"p99_us":N,"max_us":N,"errors":N,
--        "status":{"201":N,...}}
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;"
               .. package.path
local W = require("wrk_common")
local sources = {} -- { { account, token }, ... }
for a, t in (assert(os.getenv("WALLET_FROM"), "WALLET_FROM")):gmatch("([^=;]+)=([^=;]+)") do
    sources[#sources + 1] = { a, t }
end
local to = assert(os.getenv("WALLET_TO"), "WALLET_TO")
local mode = os.getenv("WALLET_MODE") or "transfer"
local base = tonumber(os.getenv("WALLET_BASE") or "0")
local format = string.format

setup, done = W.setup, W.done

local n = 0
counts = {} -- global: read by done() through thread:get
local balance_req, healthz_req

function init()
    balance_req = wrk.format("GET", "/v1/accounts/" .. sources[1][1] .. "/balance?asset=USD",
                             { ["Authorization"] = "Bearer " .. sources[1][2] })
    healthz_req = wrk.format("GET", "/healthz")
end

function request()
    if mode == "balance" then return balance_req end
    if mode == "healthz" then return healthz_req end
    n = n + 1
    local nonce = base + tid * 1000000000 + n
    local src = sources[n % #sources + 1]
    return wrk.format("POST", "/v1/transfer", {
        ["Authorization"] = "Bearer " .. src[2], ["Content-Type"] = "application/json",
        ["Idempotency-Key"] = format("b%d", nonce) },
        format('{"from":"%s","to":"%s","asset":"USD","amount":1,"nonce":%d}', src[1], to,
               nonce))
end

function response(status, _, body)
    counts[status] = (counts[status] or 0) + 1
    -- the first answer that was not a success, for done() (a string key among the counts)
    if status >= 300 and not counts.first_error then
        counts.first_error = format("%d %s", status, body)
    end
end
