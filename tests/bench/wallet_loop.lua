-- wallet_loop.lua: the wallet's own loop work, driven without HTTP, store or engine (issue
-- 25): one ron.wallet.service over a stub ledger whose store answers get_intents and
-- put_intents at once (every request new: no row found, every claim taken; the rows are not
-- kept, so the Lua heap holds what the wallet keeps, as over a real store) and whose
-- commit_many returns the engine's batch results at once (no yield). Requests go to the
-- POST /v1/transfer route's handler as the daemon's server hands them (headers, body,
-- respond), from one hot source, each its own Idempotency-Key and nonce; the committer
-- answers each group of them as one group. tests/bench/bench-wallet-loop.lua's figures and
-- spec/ron/wallet/loop_spec.lua's garbage bound.
--
--   local WL = dofile(".../tests/bench/wallet_loop.lua")   -- inside the host (the decoder)
--   local d = WL.new(T, { size = 64, cpu = fn_s })  -- started; cpu: a CPU clock (seconds)
--   local reqs = d:requests()         -- a group's requests (made apart: the server's work)
--   local cpu, handler_cpu = d:run(reqs)  -- handed to the handler, all answered
--   d:garbage(groups) -> bytes per request of the wallet's own (the collector stopped)
--   d.stub = { cpu =, kb = }          -- the stub's own CPU (s) and heap growth (kB) so far
--   d.statuses[201], d.w, d:close()
local acct = require("ron.accounting")
local codec = require("ron.ledger.codec")
local service = require("ron.wallet.service")

local format = string.format

local _M = {}

_M.FROM, _M.TO = "6f1e3c52-7d0b-4b8e-9a51-0c2f4e8d9a10", "0a0b0c0d-0e0f-4101-8203-040506070809"
local TOKEN = "wallet-loop-token"

local function stub_ledger(stub, cpu)
    local seq = 0
    local store = {}
    function store.get_intents() return {} end
    function store.put_intents(_, list) return #list end
    function store.head_seq() return seq end
    local led = { store = store, book = "loop", stats = {} }
    function led.create_account() return true end
    function led.events_since() return {} end
    function led.commit_many(_, reqs)
        local t0, k0 = cpu(), collectgarbage("count")
        local out = {}
        for k, r in ipairs(reqs) do
            seq = seq + 1
            local m = r.movements[1]
            -- (ids as random as the engine's BLAKE3: strings that differ in a few digits
            -- only would all meet in one chain of LuaJIT's string table)
            out[k] = { { transfer_id = codec.sha256(format("%d", seq)), status = "committed",
                         event_seq = seq, replayed = false,
                         transfer = { pins = { { account = m.from }, { account = m.to } } } } }
        end
        stub.cpu, stub.kb = stub.cpu + cpu() - t0, stub.kb + collectgarbage("count") - k0
        return out
    end
    return led
end

local D = {}
D.__index = D

function _M.new(T, o)
    local self = setmetatable({ T = T, size = o.size or 64, cpu = o.cpu or os.clock,
                                stub = { cpu = 0, kb = 0 }, statuses = {}, nonce = 0 }, D)
    local w = service.new { ledger = stub_ledger(self.stub, self.cpu), assets = { USD = 2 },
                            tokens = { [acct.b3hex(TOKEN)] = _M.FROM },
                            log = function(line) print("wallet: " .. line) end }
    w:start()
    while not w.system_ready do T.sleep(1) end
    for _, r in ipairs(w:routes()) do
        if r.method == "POST" and r.path == "^/v1/transfer$" then self.handler = r.handler end
    end
    self.w = w
    local answered = T.channel(self.size * 2, "wallet_loop_answers")
    self.answered = answered
    local statuses = self.statuses
    self.respond = function(_, status)
        statuses[status] = (statuses[status] or 0) + 1
        answered:try_send(status)
        return true
    end
    return self
end

local HEADERS = { authorization = "Bearer " .. TOKEN, ["content-type"] = "application/json",
                  host = "127.0.0.1" }

function D:requests()
    local out = {}
    for k = 1, self.size do
        self.nonce = self.nonce + 1
        local h = {}
        for name, v in pairs(HEADERS) do h[name] = v end
        h["idempotency-key"] = format("b%d", self.nonce)
        out[k] = { method = "POST", path = "/v1/transfer", peer = "127.0.0.1", headers = h,
                   body = format('{"from":"%s","to":"%s","asset":"USD","amount":1,"nonce":%d}',
                                 _M.FROM, _M.TO, self.nonce), respond = self.respond }
    end
    return out
end

-- -> CPU seconds of the whole group (handed to the handler, answered), of the handler's part
function D:run(reqs)
    local cpu, handler = self.cpu, self.handler
    local c0 = cpu()
    for k = 1, #reqs do assert(handler(reqs[k]) == nil, "answered at once") end
    local c1 = cpu()
    for _ = 1, #reqs do assert(self.answered:recv(10000), "not answered in 10 s") end
    return cpu() - c0, c1 - c0
end

-- Bytes the Lua heap grows per request over `groups` groups with the collector stopped,
-- the requests' own and the stub's growth taken off: the wallet's garbage (and what it
-- keeps: its bounded caches fill as they would). -> bytes, the handler's part
function D:garbage(groups)
    collectgarbage("collect")
    collectgarbage("stop")
    local kb0, made, hkb, stub0 = collectgarbage("count"), 0, 0, self.stub.kb
    for _ = 1, groups do
        local k0 = collectgarbage("count")
        local reqs = self:requests()
        local k1 = collectgarbage("count")
        made = made + k1 - k0
        for k = 1, #reqs do assert(self.handler(reqs[k]) == nil, "answered at once") end
        hkb = hkb + collectgarbage("count") - k1
        for _ = 1, #reqs do assert(self.answered:recv(10000), "not answered in 10 s") end
    end
    local kb = collectgarbage("count") - kb0 - made - (self.stub.kb - stub0)
    collectgarbage("restart")
    local n = groups * self.size
    return kb * 1024 / n, hkb * 1024 / n
end

function D:close()
    self.w:stop()
    self.w:wait(1000)
end

return _M
