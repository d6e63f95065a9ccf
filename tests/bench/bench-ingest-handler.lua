-- bench-ingest-handler.lua: the in-process baseline of tests/bench/bench-ingest.sh: the
-- POST /v1/records handler (ron.node.ingest: decode + tenant check + meter:record)
-- called in a loop on the same kind of batch the wrk run sends, without HTTP.
--
--   ron-accounting run tests/bench/bench-ingest-handler.lua BATCH SECONDS
--
-- Prints one line: HANDLER {"records_per_s":N,"us_per_batch":N,"decode_only_records_per_s":N}
-- (decode_only: ra_ingest_decode alone on the same body).
local ffi = require("ffi")
local uv = require("luv")
local acct = require("ron.accounting")
local ingest = require("ron.node.ingest")

local batch = tonumber(arg[1] or 100)
local seconds = tonumber(arg[2] or 2)
local TENANT, TOKEN = "6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21", "bench-token"

local m = assert(acct.open { capacity_rows = 200000, window_len_s = 300 })
local ing = ingest.new { meter = m, tokens = { [acct.b3hex(TOKEN)] = TENANT },
                         log = function() end }
local parts = {}
for i = 1, batch do
    parts[i] = string.format('{"tenant":"%s","subject":"user-%d","dimension":"%s","value":%d}',
                             TENANT, i % 1000, i % 2 == 0 and "bytes" or "requests", i % 4096 + 1)
end
local body = '{"records":[' .. table.concat(parts, ",") .. "]}"
local req = { method = "POST", path = "/v1/records", body = body,
              headers = { authorization = "Bearer " .. TOKEN,
                          ["content-type"] = "application/json" } }

local function timed(fn)
    for _ = 1, 200 do fn() end -- warm-up (JIT)
    local n, t0 = 0, uv.hrtime()
    local deadline = t0 + seconds * 1e9
    while true do
        for _ = 1, 50 do fn() end
        n = n + 50
        local t = uv.hrtime()
        if t >= deadline then return n, (t - t0) / 1e9 end
    end
end

local n, s = timed(function()
    local st = ing:handle(req)
    assert(st == 200, st)
end)
local C = ffi.C
local n_out = ffi.new("size_t[1]")
local dn, ds = timed(function()
    local rc = C.ra_ingest_decode(body, #body, ing.dims, ing.n_dims, ing.out, ing.max_records,
                                  n_out, ing.scratch, ing.max_body, ing.err)
    assert(rc == 0)
end)
io.write(string.format('HANDLER {"records_per_s":%.0f,"us_per_batch":%.1f,' ..
                       '"decode_only_records_per_s":%.0f,"body_bytes":%d}\n',
                       n * batch / s, s / n * 1e6, dn * batch / ds, #body))
m:close()
