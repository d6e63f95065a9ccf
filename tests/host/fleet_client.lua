-- tests/host/fleet_client.lua: the clients' side of tests/host/fleet.lua (loaded by it from
-- its directory): HTTP against the nodes, every request by its Idempotency-Key, sending a
-- key until it settles, payers in a loop with a record per answer, and their summaries.
--
--   local C = require("fleet_client").new { sched = s, S = spec_support, check = fn,
--                                            op = token, tok = fn(id) -> token, sink = id }
local uv = require("luv")
local percentile = require("ron.base.percentile")

local format, concat = string.format, table.concat

local _M = {}

function _M.new(o)
    local sched, S, check = o.sched, o.S, o.check
    local function now_ms() return uv.hrtime() / 1e6 end

    -- ---- HTTP ----

    -- (a connection cut mid-answer, by a kill, is no answer: nil)
    local function post(node, path, token, body, key)
        local ok, st, h, b = pcall(S.http_post, sched, node.port, path, token, body, key)
        if not ok then return nil, {}, nil end
        return st, h or {}, b
    end

    local function get(node, path, token)
        local ok, st, h, b = pcall(S.http_get, sched, node.port, path, token)
        if not ok then return nil end
        return st, h, b
    end

    local function code_of(body) return body and body:match('"code":"([%w_]+)"') end

    local function balance(node, id)
        local st, _, b = get(node, "/v1/accounts/" .. id .. "/balance?asset=USD", o.op)
        if st ~= 200 then return nil end
        return tonumber(b:match('"balance":(%-?%d+)'))
    end

    -- Every request sent, by key: { path, token, body, from, amount, first201 = bytes, answers }
    local REQ = {}
    local nonce = {}
    local function next_nonce(id)
        nonce[id] = (nonce[id] or 0) + 1
        return nonce[id]
    end

    local function transfer_req(key, from, to, amount)
        local r = REQ[key]
        if not r then
            r = { path = "/v1/transfer", token = o.tok(from), from = from, amount = amount,
                  body = format('{"from":"%s","to":"%s","asset":"USD","amount":%d,"nonce":%d}',
                                from, to, amount, next_nonce(from)) }
            REQ[key] = r
        end
        return r
    end

    local function send(node, key)
        local r = REQ[key]
        local t0 = now_ms()
        local st, h, b = post(node, r.path, r.token, r.body, key)
        local dt = now_ms() - t0
        if st == 201 and not r.first201 then r.first201 = b end
        if st == 201 and r.first201 ~= b then
            check(false, "key %s: a second 201 with other bytes: %s / %s", key, r.first201, b)
        end
        return st, b, dt, h
    end

    -- Sends key to node until the answer is final (not 409 in_flight, 503, 429), for 30 s at most
    -- (an in_flight that outlives the commits is a stuck one: issue 29 item 4). -> st, body
    local function settle(node, key)
        local st, b
        local t_end = now_ms() + 30000
        repeat
            st, b = send(node, key)
            local passing = st == nil or st == 503 or st == 429
                or (st == 409 and code_of(b) == "in_flight")
            if not passing then return st, b end
            sched.sleep(100)
        until now_ms() > t_end
        return st, b
    end

    -- ---- load: clients paying in a loop; a record per answer ----


    -- (pace_ms: a pause after each answer, for load beside the phases rather than at full rate)
    local function payer_loop(node_fn, from, prefix, stop, rec, pace_ms)
        local i = 0
        while not stop() do
            i = i + 1
            local key = format("%s-%d", prefix, i)
            transfer_req(key, from, o.sink, 1)
            local node = node_fn()
            local t0 = now_ms()
            local st, b, dt = send(node, key)
            rec[#rec + 1] = { t = t0, dt = dt, st = st, code = st ~= 201 and code_of(b) or nil,
                              from = from, key = key }
            if st ~= 201 and st ~= 422 then sched.sleep(20) end
            if pace_ms then sched.sleep(pace_ms) end
        end
    end

    -- fns in tasks -> a function that waits for every one of them to end (at most limit_ms
    -- in all, 600 s by default) and fails the run when one did not, or raised. (Each was
    -- joined for 120 s and the outcome ignored: in `make soak-fleet` phase B settles ~120k
    -- keys in ~190 s, so the first worker's join gave up while its last key was in flight,
    -- and B counted its commits and balances without that key; the key then settled 201.
    -- That was the "one transfer more than the commits counted" of stops 48 and 49.)
    local function spawn_all(fns, limit_ms)
        local hs = {}
        for i, f in ipairs(fns) do hs[i] = sched.spawn("fleet_client", f) end
        return function()
            local limit = limit_ms or 600000
            local t_end = now_ms() + limit
            for _, h in ipairs(hs) do
                local ok, err = h:join(math.max(1, math.floor(t_end - now_ms())))
                check(ok ~= nil, "a client task did not end within %d ms: %s", limit,
                      tostring(err))
            end
        end
    end

    local function summary(rec, t_from, t_to)
        local ok, other, lat = 0, {}, {}
        for _, r in ipairs(rec) do
            if r.t >= t_from and r.t < t_to then
                if r.st == 201 then
                    ok = ok + 1
                    lat[#lat + 1] = r.dt
                else
                    local k = tostring(r.st) .. " " .. tostring(r.code)
                    other[k] = (other[k] or 0) + 1
                end
            end
        end
        local n_other = 0
        for _, v in pairs(other) do n_other = n_other + v end
        return { ok = ok, other = other, n_other = n_other, rate = ok / ((t_to - t_from) / 1000),
                 p50 = percentile(lat, 0.5), p99 = percentile(lat, 0.99) }
    end

    local function fmt_other(counts)
        local t = {}
        for k, v in pairs(counts) do t[#t + 1] = k .. "=" .. v end
        table.sort(t)
        return #t == 0 and "none" or concat(t, ", ")
    end

    return { post = post, get = get, code_of = code_of, balance = balance, REQ = REQ,
             next_nonce = next_nonce, transfer_req = transfer_req, send = send,
             settle = settle, payer_loop = payer_loop, spawn_all = spawn_all,
             summary = summary, fmt_other = fmt_other }
end

return _M
