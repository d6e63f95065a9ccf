-- wrk_common.lua: what the wrk scripts (wrk-ingest.lua, wrk-wallet.lua) share: the threads'
-- registry (setup) and done()'s one line
--   WRK {"requests":N,"duration_us":N,"p50_us":N,"p99_us":N,"max_us":N,"errors":N,
--        "status":{"200":N,...}}
-- with the answers counted per status over every thread (each thread's global `counts`;
-- its string key first_error, the first answer that was not a success, printed once
-- before, as "WRK first error: ...").
--
--   package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;"
--                  .. package.path
--   local W = require("wrk_common")
--   setup, done = W.setup, W.done
local format, concat = string.format, table.concat

local _M = {}

local threads = {}

function _M.setup(thread)
    threads[#threads + 1] = thread
    thread:set("tid", #threads)
end

function _M.done(summary, latency)
    local agg, first_error = {}, nil
    for _, t in ipairs(threads) do
        for k, v in pairs(t:get("counts") or {}) do
            if k == "first_error" then
                first_error = first_error or v
            else
                agg[k] = (agg[k] or 0) + v
            end
        end
    end
    if first_error then io.write("WRK first error: ", first_error, "\n") end
    local st = {}
    for k, v in pairs(agg) do st[#st + 1] = format('"%d":%d', k, v) end
    table.sort(st)
    local e = summary.errors
    io.write(format('WRK {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,' ..
                    '"max_us":%d,"errors":%d,"status":{%s}}\n', summary.requests,
                    summary.duration, latency:percentile(50), latency:percentile(99),
                    latency.max, e.connect + e.read + e.write + e.timeout, concat(st, ",")))
end

return _M
