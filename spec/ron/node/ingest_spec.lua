-- G-6.1 (DTO hygiene) for POST /v1/records: ron.node.ingest behind
-- ron.node.http on the host's loop (ctest lua-ingest-g6.1-host: `ron-accounting
-- run spec/run-busted.lua spec/ron/node/ingest_spec.lua`). Requests go through a
-- real server on port 0 with a small luv TCP client (as in http_spec.lua), or straight to
-- ing:handle(req) where the transport adds nothing. Every case checks what the meter holds
-- afterwards by sealing the window (injected clock) and summing the slices: a refused batch
-- records nothing. The configuration checks run anywhere; the rest needs the host (the decoder
-- and the HTTP server are part of it): under plain busted those cases are pending.
local S = require("support")

local acct = require("ron.accounting")
local ingest = require("ron.node.ingest")

local TOKEN_A, TOKEN_B = "tok-A.secret_1~x", "tok-B/secret+2=="
local HASH_A, HASH_B = acct.b3hex(TOKEN_A), acct.b3hex(TOKEN_B)

describe("ron.node.ingest configuration", function()
    local GOOD = { tokens = { [HASH_A] = S.TENANT_A } }

    it("accepts tokens stored as BLAKE3 digests (what b3sum prints)", function()
        assert.equal(S.b3sum(TOKEN_A), HASH_A)
        assert.is_true(ingest.check_config(GOOD))
        assert.is_true(ingest.check_config(false))
        assert.is_true(ingest.check_config { tokens = GOOD.tokens, max_records = 5,
                                             max_body = 4096, idempotency_keys = 0,
                                             retry_after_s = 2, log_every = 1 })
    end)

    it("refuses unknown keys, bad digests, bad tenants, no tokens, values out of range",
       function()
        local function refused(v, pat)
            local ok, err = ingest.check_config(v)
            assert.is_nil(ok)
            assert.truthy(err:find(pat, 1, true), err)
        end
        refused({ tokens = GOOD.tokens, max_recrods = 1 }, "unknown key 'ingest.max_recrods'")
        refused({ tokens = { [TOKEN_A] = S.TENANT_A } }, "is not a BLAKE3 digest")
        refused({ tokens = { [HASH_A:upper()] = S.TENANT_A } }, "is not a BLAKE3 digest")
        refused({ tokens = { [HASH_A] = "tenant-a" } }, "is not a tenant UUID")
        refused({ tokens = {} }, "ingest.tokens is empty")
        refused({}, "ingest.tokens must be a table")
        refused({ tokens = GOOD.tokens, max_body = 2 ^ 40 }, "ingest.max_body must be an integer")
        refused({ tokens = GOOD.tokens, max_records = 0 }, "ingest.max_records must be")
        refused("on", "ingest must be false or a table")
    end)
end)

if not S.needs_host("ron.node.ingest (G-6.1)", "lua-ingest-g6.1-host") then return end

local cjson = require("cjson.safe")
local http = require("ron.node.http")

local run = S.run_task

-- Sends raw bytes, reads to EOF: status, headers (lower-case), body (S.http_request).
local function request(task, port, raw, host)
    return S.http_request(task, port, raw, { host = host, timeout_ms = 10000 })
end

local function post(task, port, body, headers, host)
    local h = { "POST /v1/records HTTP/1.1", "Host: x", "Connection: close",
                "Content-Length: " .. #body }
    for k, v in pairs(headers or {}) do h[#h + 1] = k .. ": " .. v end
    return request(task, port, table.concat(h, "\r\n") .. "\r\n\r\n" .. body, host)
end

local function get(task, port, path, host)
    return request(task, port, "GET " .. path .. " HTTP/1.1\r\nHost: x\r\nConnection: close" ..
                               "\r\n\r\n", host)
end

local AUTH_A = { Authorization = "Bearer " .. TOKEN_A, ["Content-Type"] = "application/json" }

local function rec(t, subject, dim, value)
    return string.format('{"tenant":"%s","subject":"%s","dimension":"%s","value":%s}', t,
                         subject, dim, tostring(value))
end

local function batch(list) return '{"records":[' .. table.concat(list, ",") .. "]}" end

-- A meter on an injected clock, an ingest with two tokens (A -> TENANT_A, B -> TENANT_B) and
-- a log capture. cfg: extra acct.open settings; icfg: extra ingest settings.
-- A valid record (the refusal cases change one thing in it).
local GOOD_REC = rec(S.TENANT_A, "alice", "bytes", 7)

local function setup(cfg, icfg)
    local clock = S.clock(S.T0 + 5)
    local c = S.cfg { clock = clock.fn }
    for k, v in pairs(cfg or {}) do c[k] = v end
    local m = assert(acct.open(c))
    local logs = {}
    local o = { meter = m, clock = clock.fn, tokens = { [HASH_A] = S.TENANT_A,
                                                        [HASH_B] = S.TENANT_B },
                log = function(line) logs[#logs + 1] = line end }
    for k, v in pairs(icfg or {}) do o[k] = v end
    return m, ingest.new(o), clock, logs
end

-- Seals the current window (moves the clock to the next one): { ["tenant/dim"] = sum }.
local function seal(m, clock)
    clock.now = clock.now - clock.now % 60 + 61
    local sums = {}
    for _, s in ipairs(assert(m:rollover())) do
        local k = s.tenant .. "/" .. s.dimension
        sums[k] = (sums[k] or 0) + S.total(s)
    end
    return sums
end

-- ing:handle with a request table (no transport): status, decoded JSON body, headers.
local function call(ing, body, headers)
    local h = {}
    for k, v in pairs(headers or AUTH_A) do h[k:lower()] = v end
    local st, b, ctype, hs = ing:handle { method = "POST", path = "/v1/records", headers = h,
                                          body = body }
    assert.equal("application/json", ctype)
    return st, assert(cjson.decode(b)), hs or {}
end

describe("POST /v1/records (G-6.1)", function()
    it("G-6.1 records a valid batch for the token's tenant; totals exact", function()
        local m, ing, clock = setup()
        local st, r = call(ing, batch { rec(S.TENANT_A, "alice", "bytes", 1500),
                                        rec(S.TENANT_A, "bob", "bytes", 2500),
                                        rec(S.TENANT_A, "alice", "requests", 1),
                                        rec(S.TENANT_A, "caf\\u00e9 \\ud83d\\ude00", "cpu_units",
                                            "9007199254740991") })
        assert.equal(200, st)
        assert.same({ records = 4, applied = 4, skipped = 0 }, r)
        local sums = seal(m, clock)
        assert.same({ [S.TENANT_A .. "/bytes"] = 4000, [S.TENANT_A .. "/requests"] = 1,
                      [S.TENANT_A .. "/cpu_units"] = 9007199254740991 }, sums)
        -- a subject sent escaped is the same subject as the string recorded directly
        assert(m:record(S.TENANT_A, "café 😀", "cpu_units", 1))
        assert(m:record(S.TENANT_A, "caf\195\169 \240\159\152\128", "cpu_units", 1))
        st = call(ing, batch { rec(S.TENANT_A, "caf\\u00e9 \\ud83d\\ude00", "cpu_units", 3) })
        assert.equal(200, st)
        local slices = assert(m:rollover(clock.now + 60))
        assert.equal(1, #slices)
        assert.equal(1, #slices[1].rows)
        assert.equal(5, S.total(slices[1]))
        assert.equal(2, ing:stats().codes[200])
        m:close()
    end)

    it("G-6.1 unknown fields, duplicates, missing fields: 400 SchemaViolation naming the " ..
       "field and the byte offset; nothing recorded", function()
        local m, ing, clock = setup()
        local cases = {
            { batch { GOOD_REC, GOOD_REC:sub(1, -2) .. ',"unit":"B"}' }, "unknown_field",
              "records[1].unit" },
            { '{"records":[' .. GOOD_REC .. '],"extra":true}', "unknown_field", "extra" },
            { batch { GOOD_REC:sub(1, -2) .. ',"value":8}' }, "duplicate_field", "records[0].value" },
            { '{"records":[' .. GOOD_REC .. '],"records":[' .. GOOD_REC .. ']}', "duplicate_field",
              "records" },
            { batch { '{"tenant":"' .. S.TENANT_A .. '","subject":"a","value":1}' },
              "missing_field", "records[0].dimension" },
            { "{}", "missing_field", "records" },
            { batch { GOOD_REC, "[1]" }, "wrong_type", "records[1]" },
            { '{"records":{}}', "wrong_type", "records" },
            { batch { rec(S.TENANT_A, "a", "furlongs", 1) }, "unknown_dimension",
              "records[0].dimension" },
            { batch { rec("not-a-uuid", "a", "bytes", 1) }, "bad_tenant", "records[0].tenant" },
            { batch { rec(S.TENANT_A, "", "bytes", 1) }, "bad_subject", "records[0].subject" },
            { batch { rec(S.TENANT_A, string.rep("s", 257), "bytes", 1) }, "bad_subject",
              "records[0].subject" },
        }
        for _, c in ipairs(cases) do
            local st, r = call(ing, c[1])
            assert.equal(400, st, c[1])
            assert.equal("SchemaViolation", r.error)
            assert.equal(c[2], r.reason, c[1])
            assert.equal(c[3], r.field, c[1])
            assert.is_true(r.pos >= 0 and r.pos <= #c[1])
        end
        local s = ing:stats().rejected
        assert.equal(2, s.unknown_field)
        assert.equal(2, s.duplicate_field)
        assert.equal(2, s.missing_field)
        assert.equal(2, s.bad_subject)
        assert.same({}, seal(m, clock))
        m:close()
    end)

    it("G-6.1 negative, fractional, exponent, too large, non-integer values: 400, the whole " ..
       "batch refused", function()
        local m, ing, clock = setup()
        for _, c in ipairs {
            { "-1", "bad_value", "value must not be negative" },
            { "1.5", "bad_value", "no fraction" },
            { "1.0", "bad_value", "no fraction" },
            { "1e3", "bad_value", "no exponent" },
            { "2E2", "bad_value", "no exponent" },
            { "9007199254740992", "bad_value", "above 2^53-1" },
            { "18446744073709551616", "bad_value", "above 2^53-1" },
            { "007", "bad_value", "leading zero" },
            { '"5"', "wrong_type", "integer" },
            { "null", "wrong_type", "integer" },
            { "true", "wrong_type", "integer" },
        } do
            -- the bad record comes last: the good ones before it are not recorded either
            local body = batch { GOOD_REC, GOOD_REC, rec(S.TENANT_A, "bob", "requests", c[1]) }
            local st, r = call(ing, body)
            assert.equal(400, st, c[1])
            assert.equal(c[2], r.reason, c[1])
            assert.equal("records[2].value", r.field)
            assert.truthy(r.detail:find(c[3], 1, true), r.detail)
            assert.equal(body:find(c[1], #body - 30, true) - 1, r.pos)
        end
        assert.same({}, seal(m, clock))
        assert.equal(8, ing:stats().rejected.bad_value)
        m:close()
    end)

    it("G-6.1 malformed JSON, empty bodies, empty and oversized batches: 400", function()
        local m, ing, clock = setup({}, { max_records = 3 })
        for _, c in ipairs {
            { "", "empty_body" }, { " \n", "empty_body" },
            { "{", "malformed_json" }, { "nope", "malformed_json" },
            { batch { GOOD_REC } .. "x", "malformed_json" }, { batch { GOOD_REC } .. "{}", "malformed_json" },
            { '{"records":[' .. GOOD_REC .. ",]}", "malformed_json" },
            { '{"records":[' .. GOOD_REC .. "}", "malformed_json" },
            { batch { GOOD_REC }:gsub("alice", "al\\qce"), "malformed_json" },
            { batch { GOOD_REC }:gsub("alice", "al\1ce"), "malformed_json" },
            { batch { GOOD_REC }:gsub("alice", "al\255ce"), "malformed_json" },
            { batch { GOOD_REC }:gsub("alice", "\\udc00"), "malformed_json" },
            { '{"records":[]}', "no_records" },
            { batch { GOOD_REC, GOOD_REC, GOOD_REC, GOOD_REC }, "too_many_records" },
            { "[]", "wrong_type" },
        } do
            local st, r = call(ing, c[1])
            assert.equal(400, st, c[1])
            assert.equal(c[2], r.reason, c[1])
        end
        assert.equal(200, (call(ing, batch { GOOD_REC, GOOD_REC, GOOD_REC })))
        assert.same({ [S.TENANT_A .. "/bytes"] = 21 }, seal(m, clock))
        m:close()
    end)

    it("G-6.1 bad tokens: 401 with WWW-Authenticate; another tenant's record: 403; " ..
       "nothing recorded", function()
        local m, ing, clock, logs = setup()
        local body = batch { rec(S.TENANT_A, "alice-secret-subject", "bytes", 5) }
        local ct = { ["Content-Type"] = "application/json" }
        local st, r, hs = call(ing, body, ct)
        assert.equal(401, st)
        assert.equal("no_token", r.reason)
        assert.equal('Bearer realm="ron-accounting"', hs["WWW-Authenticate"])
        for _, auth in ipairs { "Bearer wrong-token", "Bearer " .. HASH_A, "Basic " .. TOKEN_A,
                                "Bearer", "Bearer " .. TOKEN_A .. " extra" } do
            st, r, hs = call(ing, body, { Authorization = auth,
                                          ["Content-Type"] = "application/json" })
            assert.equal(401, st, auth)
            assert.equal("bad_token", r.reason)
            assert.truthy(hs["WWW-Authenticate"]:find('error="invalid_token"', 1, true))
        end
        -- token B maps to tenant B: a record for tenant A is refused whole
        local mixed = batch { rec(S.TENANT_B, "bob", "bytes", 1),
                              rec(S.TENANT_A, "alice-secret-subject", "bytes", 5) }
        st, r = call(ing, mixed, { Authorization = "Bearer " .. TOKEN_B,
                                   ["Content-Type"] = "application/json" })
        assert.equal(403, st)
        assert.equal("forbidden_tenant", r.reason)
        assert.equal("records[1].tenant", r.field)
        -- the scheme is case-insensitive; token B records for B
        st = call(ing, batch { rec(S.TENANT_B, "bob", "bytes", 1) },
                  { Authorization = "bearer " .. TOKEN_B, ["Content-Type"] = "application/json" })
        assert.equal(200, st)
        assert.same({ [S.TENANT_B .. "/bytes"] = 1 }, seal(m, clock))
        local s = ing:stats()
        assert.equal(1, s.rejected.no_token)
        assert.equal(5, s.rejected.bad_token)
        assert.equal(1, s.rejected.forbidden_tenant)
        -- I-14: sampled reject lines carry tenant, dimension and reason, never a subject or
        -- a token
        local text = table.concat(logs, "\n")
        assert.truthy(text:find("reason=forbidden_tenant status=403 tenant=" .. S.TENANT_B ..
                                " dimension=bytes", 1, true), text)
        assert.truthy(text:find("reason=bad_token status=401 tenant=- dimension=-", 1, true))
        for _, secret in ipairs { "alice-secret-subject", "bob", TOKEN_A, TOKEN_B, HASH_A } do
            assert.is_nil(text:find(secret, 1, true), secret)
        end
        m:close()
    end)

    it("G-6.1 wrong content type: 415; JSON with charset utf-8 is fine", function()
        local m, ing, clock = setup()
        local body = batch { rec(S.TENANT_A, "alice", "bytes", 5) }
        for _, ctype in ipairs { "text/plain", "application/x-www-form-urlencoded",
                                 "application/json; charset=latin1", "application/jsonx",
                                 false } do
            local h = { Authorization = "Bearer " .. TOKEN_A, ["Content-Type"] = ctype or nil }
            local st, r = call(ing, body, h)
            assert.equal(415, st, tostring(ctype))
            assert.equal("content_type", r.reason)
        end
        for _, ctype in ipairs { "application/json", "Application/JSON; charset=UTF-8",
                                 'application/json;charset="utf-8"' } do
            local st = call(ing, body, { Authorization = "Bearer " .. TOKEN_A,
                                         ["Content-Type"] = ctype })
            assert.equal(200, st, ctype)
        end
        assert.same({ [S.TENANT_A .. "/bytes"] = 15 }, seal(m, clock))
        assert.equal(5, ing:stats().rejected.content_type)
        m:close()
    end)

    it("G-6.1 degraded meter: 503 with Retry-After, nothing recorded", function()
        local m, ing, clock = setup({}, { retry_after_s = 7 })
        m:set_degraded(true)
        local body = batch { rec(S.TENANT_A, "alice", "bytes", 5) }
        local st, r, hs = call(ing, body)
        assert.equal(503, st)
        assert.equal("7", hs["Retry-After"])
        assert.equal("DegradedExporter", r.error)
        assert.equal(0, r.applied)
        m:set_degraded(false)
        assert.equal(200, (call(ing, body)))
        assert.same({ [S.TENANT_A .. "/bytes"] = 5 }, seal(m, clock))
        assert.equal(1, ing:stats().rejected.degraded)
        m:close()
    end)

    it("G-6.1 full meter: 429 with Retry-After and the count applied; the same body with " ..
       "its Idempotency-Key resumes after the window is sealed: exact totals, nothing twice",
       function()
        local m, ing, clock = setup { capacity_rows = 8, shards = 1 }
        local list, want, sealed = {}, 0, 0
        local function seal_sum()
            local v = seal(m, clock)[S.TENANT_A .. "/bytes"] or 0
            sealed = sealed + v
            return v
        end
        for i = 1, 40 do
            list[i] = rec(S.TENANT_A, "user-" .. i, "bytes", i)
            want = want + i
        end
        local body = batch(list)
        local hk = { Authorization = "Bearer " .. TOKEN_A, ["Content-Type"] = "application/json",
                     ["Idempotency-Key"] = "batch-1" }
        local st, r, hs = call(ing, body, hk)
        assert.equal(429, st)
        assert.equal("CapacityExceeded", r.error)
        assert.equal(40, r.records)
        local applied = r.applied
        assert.is_true(applied >= 1 and applied < 40, tostring(applied))
        -- the window ends at T0 + 60; the clock is at T0 + 5: 55 s, + 1 for the sealer
        assert.equal("56", hs["Retry-After"])
        assert.equal(56, r.retry_after_s)
        -- a retry before the window ends: still full, nothing recorded twice
        st, r = call(ing, body, hk)
        assert.equal(429, st)
        assert.equal(applied, r.applied)
        assert.equal(applied, r.skipped)
        local first = 0
        for i = 1, applied do first = first + i end
        assert.equal(first, seal_sum())
        -- the same body resumes at records[applied] whenever there is room again: a key idle
        -- for a whole sealed window gives its entry back at the next seal (§3)
        local done = applied
        for _ = 1, 10 do
            st, r = call(ing, body, hk)
            if st == 200 then break end
            assert.equal(429, st)
            assert.is_true(r.applied >= done)
            assert.equal(done, r.skipped)
            done = r.applied
            seal_sum()
        end
        assert.equal(200, st)
        assert.same({ records = 40, applied = 40, skipped = done }, r)
        seal_sum()
        assert.equal(want, sealed) -- every record exactly once
        -- once more: answered, nothing recorded
        st, r = call(ing, body, hk)
        assert.equal(200, st)
        assert.equal(40, r.skipped)
        assert.equal(0, seal_sum())
        local s = ing:stats()
        assert.equal(40, s.records)
        assert.is_true(s.rejected.capacity >= 2)
        -- the same key with another body: 409
        st, r = call(ing, batch { list[1] }, hk)
        assert.equal(409, st)
        assert.equal("idempotency_conflict", r.reason)
        -- a bad key
        hk["Idempotency-Key"] = "has space"
        st, r = call(ing, body, hk)
        assert.equal(400, st)
        assert.equal("bad_idempotency_key", r.reason)
        m:close()
    end)

    it("G-6.1 without a key, the 429 says where to resume: records[applied..] sent again " ..
       "complete the batch exactly once", function()
        local m, ing, clock = setup { capacity_rows = 8, shards = 1 }
        local list, want = {}, 0
        for i = 1, 30 do
            list[i] = rec(S.TENANT_A, "u" .. i, "requests", 1)
            want = want + 1
        end
        local got, sealed = 0, 0
        for _ = 1, 20 do
            local st, r = call(ing, batch(list))
            if st == 200 then
                got = got + r.applied
                break
            end
            assert.equal(429, st)
            got = got + r.applied
            local rest = {}
            for i = r.applied + 1, #list do rest[#rest + 1] = list[i] end
            list = rest
            sealed = sealed + (seal(m, clock)[S.TENANT_A .. "/requests"] or 0)
        end
        assert.equal(want, got)
        sealed = sealed + (seal(m, clock)[S.TENANT_A .. "/requests"] or 0)
        assert.equal(want, sealed)
        m:close()
    end)

    it("the per-record path makes no garbage once compiled (buffers are per instance)",
       function()
        if not jit.status() then return end -- the interpreter boxes cdata: not a claim there
        local m, ing = setup()
        local list = {}
        for i = 1, 1000 do list[i] = rec(S.TENANT_A, "user-" .. i % 100, "bytes", i) end
        local body = batch(list)
        for _ = 1, 50 do assert.equal(200, (ing:handle { headers = {
            authorization = "Bearer " .. TOKEN_A, ["content-type"] = "application/json" },
            body = body })) end
        collectgarbage()
        collectgarbage("stop")
        local before = collectgarbage("count")
        local req = { headers = { authorization = "Bearer " .. TOKEN_A,
                                  ["content-type"] = "application/json" }, body = body }
        for _ = 1, 100 do ing:handle(req) end
        local kb = collectgarbage("count") - before
        collectgarbage("restart")
        -- 100 batches of 1000 records: the answer, the token's digest, a few small strings
        -- per request; under 2 KiB per request means nothing per record
        assert.is_true(kb * 1024 / 100 < 2048, string.format("%.0f bytes per request",
                                                            kb * 1024 / 100))
        m:close()
    end)

    it("G-6.1 over HTTP: 413 before the body is read (counted as oversize), 401, 200; " ..
       "/metrics carries accounting_ingest_*", function()
        run(function(task)
            local m, ing, clock = setup()
            local srv = assert(http.serve { meter = m, port = 0, max_body = ing.max_body,
                                            routes = { ing:route() },
                                            runtime = { metrics_text = function()
                                                return ing:metrics_text() end,
                                                ready = function() return true end } })
            local port = srv:port()
            local body = batch { rec(S.TENANT_A, "alice", "bytes", 5) }
            local st, hs, b = post(task, port, body, AUTH_A)
            assert.equal(200, st)
            assert.equal("application/json", hs["content-type"])
            assert.same({ records = 1, applied = 1, skipped = 0 }, cjson.decode(b))
            -- 1 MiB + 2 announced: h2o answers 413 from the header, the handler never runs
            -- (1 MiB + 1 is read, then refused: httpd.c's one byte of slack that gives
            -- chunked and Content-Length bodies one limit)
            st = request(task, port, "POST /v1/records HTTP/1.1\r\nHost: x\r\n" ..
                "Authorization: Bearer " .. TOKEN_A .. "\r\nContent-Type: application/json\r\n" ..
                "Content-Length: 1048578\r\n\r\n{\"records\":[")
            assert.equal(413, st)
            local big = batch { rec(S.TENANT_A, "alice", "bytes", 5) } .. string.rep(" ", 1048576)
            st = post(task, port, big, AUTH_A)
            assert.equal(413, st)
            -- exactly at the limit: decoded (trailing whitespace is fine)
            st = post(task, port, body .. string.rep(" ", 1048576 - #body), AUTH_A)
            assert.equal(200, st)
            st, hs = post(task, port, body, { ["Content-Type"] = "application/json" })
            assert.equal(401, st)
            assert.equal('Bearer realm="ron-accounting"', hs["www-authenticate"])
            st, hs = get(task, port, "/v1/records")
            assert.equal(405, st)
            assert.equal("POST", hs.allow)
            local _, _, text = get(task, port, "/metrics")
            assert.truthy(text:find('accounting_ingest_rejected_total{reason="oversize"} 2', 1,
                                    true), text)
            assert.truthy(text:find('accounting_ingest_rejected_total{reason="no_token"} 1', 1,
                                    true))
            assert.truthy(text:find("accounting_ingest_records_total 2\n", 1, true))
            assert.truthy(text:find('accounting_ingest_requests_total{code="413"} 2', 1, true))
            srv:close()
            assert.same({ [S.TENANT_A .. "/bytes"] = 10 }, seal(m, clock))
            m:close()
        end)
    end)

    local ip = S.non_loopback_ipv4()
    if not ip then
        pending("a non-loopback listener (no non-loopback IPv4 address on this machine)")
        return
    end
    it("a non-loopback listener: ingest answers everyone, /metrics /healthz /readyz only " ..
       "loopback peers unless metrics_public", function()
        run(function(task)
            local m, ing = setup()
            for _, public in ipairs { false, true } do
                local srv = assert(http.serve { meter = m, host = "0.0.0.0", port = 0,
                                                max_body = ing.max_body, metrics_public = public,
                                                routes = { ing:route() } })
                local port = srv:port()
                local body = batch { rec(S.TENANT_A, "alice", "bytes", 1) }
                assert.equal(200, (post(task, port, body, AUTH_A, ip)))
                assert.equal(200, (post(task, port, body, AUTH_A, "127.0.0.1")))
                for _, path in ipairs { "/metrics", "/healthz", "/readyz" } do
                    assert.equal(200, (get(task, port, path, "127.0.0.1")), path)
                    assert.equal(public and 200 or 403, (get(task, port, path, ip)), path)
                end
                srv:close()
            end
            m:close()
        end)
    end)
end)
