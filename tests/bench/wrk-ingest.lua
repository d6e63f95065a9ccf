-- wrk script of tests/bench/bench-ingest.sh: POST /v1/records batches.
--
-- Environment: INGEST_TOKEN, INGEST_TENANT, INGEST_BATCH (records per request),
-- INGEST_MODE: "reuse" (32 preformatted requests cycled: 1000 subjects x 2 dimensions, so
-- the meter's keys stay bounded), "new" (every record a subject never sent before: the
-- meter fills up and answers 429), "forbidden" (32 preformatted requests whose records
-- name another tenant: 403, each request one refusal), "bad_dimension" (32 preformatted
-- requests whose last record names a dimension the meter does not have: 400), "healthz"
-- (GET /healthz, the baseline) or "get" (GET of the URL's path without headers: the nginx
-- refusals bench, tests/bench/nginx/bench-nginx-refusals.sh). done() prints
-- one line
--   WRK {"requests":N,"duration_us":N,"p50_us":N,"p99_us":N,"max_us":N,"errors":N,
--        "status":{"200":N,...}}
-- with the answers counted per status over every thread.
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;"
               .. package.path
local W = require("wrk_common")
local token = assert(os.getenv("INGEST_TOKEN"), "INGEST_TOKEN")
local tenant = assert(os.getenv("INGEST_TENANT"), "INGEST_TENANT")
local batch = tonumber(os.getenv("INGEST_BATCH") or 100)
local mode = os.getenv("INGEST_MODE") or "reuse"
local format, concat = string.format, table.concat

setup, done = W.setup, W.done

local headers = { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json" }
local DIMS = { "bytes", "requests" }

local function body(first, subject_of)
    local parts = {}
    for i = 1, batch do
        local k = first + i
        parts[i] = format('{"tenant":"%s","subject":"%s","dimension":"%s","value":%d}', tenant,
                          subject_of(k), DIMS[k % 2 + 1], k % 4096 + 1)
    end
    return '{"records":[' .. concat(parts, ",") .. "]}"
end

local reqs, n = {}, 0
counts = {} -- global: read by done() through thread:get

function init()
    if mode == "healthz" then reqs[1] = wrk.format("GET", "/healthz") end
    if mode == "get" then reqs[1] = wrk.format("GET") end -- the URL's path, no headers
    if mode == "forbidden" or mode == "bad_dimension" then
        -- refused: the bench of the audited refusals (tests/bench/bench-ingest-audit.sh)
        local other = "b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d"
        for j = 1, 32 do
            local b = body(j * batch, function(k) return "user-" .. (k % 1000) end)
            if mode == "forbidden" then
                b = b:gsub((tenant:gsub("%-", "%%-")), other)
            else
                b = b:gsub('"dimension":"%a+","value":(%d+)}%]}$',
                           '"dimension":"no_such_dimension","value":%1}]}')
            end
            reqs[j] = wrk.format("POST", "/v1/records", headers, b)
        end
    end
    if mode == "reuse" then
        for j = 1, 32 do
            reqs[j] = wrk.format("POST", "/v1/records", headers,
                                 body(j * batch, function(k) return "user-" .. (k % 1000) end))
        end
    end
end

function request()
    n = n + 1
    if mode == "healthz" or mode == "get" then return reqs[1] end
    if reqs[2] then return reqs[n % #reqs + 1] end
    return wrk.format("POST", "/v1/records", headers, body(n * batch, function(k)
        return format("t%d-s%d", tid, k)
    end))
end

function response(status)
    counts[status] = (counts[status] or 0) + 1
end
