-- content_by_lua_file of the real-nginx hot-path test (tests/nginx/hotpath.sh): calls
-- ron.accounting.nginx's log() in a loop inside an nginx worker, on the current request
-- (its X-Tenant-Id and X-Subject-Id headers, its $bytes_sent), and reports
--   garbage_bytes  bytes allocated by N calls once compiled (collector stopped meanwhile)
--   loops          root traces of the loop that link back to themselves ("loop")
--   aborts         trace aborts in the loop or in ron/accounting/*, with their reasons
--                  (but see BENIGN below)
--   stitches       traces ended by stitching (a call the JIT cannot compile inline)
--   errors         log()'s error counters in this worker (all zero: every call recorded)
-- The shape follows spec/ron/accounting_hotpath_spec.lua (the same checks for record()).
local ngx_acct = require("ron.accounting.nginx")
-- the trace observer the spec shares, next to this file
local jit_trace = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "jit_trace.lua")

local N = tonumber(ngx.var.arg_n) or 100000
local log = ngx_acct.log

local function loop(n)
    for _ = 1, n do log() end
end

-- LuaJIT declines a trace that starts in log() (a hot function) and returns into this
-- loop, the caller's ("loop unroll limit reached", "leaving loop in root trace"): whether
-- that happens depends on hot counters other code shares, and the loop's own trace
-- compiles regardless. Those are reported, not failed; every other abort fails.
local BENIGN = { ["loop unroll limit reached"] = true, ["leaving loop in root trace"] = true }
local on_trace, ev = jit_trace.observer(loop, function(msg, in_loop)
    return BENIGN[msg] and not in_loop
end)

jit.flush()
jit.attach(on_trace, "trace")
loop(N)                      -- compiles
collectgarbage()
collectgarbage()
collectgarbage("stop")
local before = collectgarbage("count")
loop(N)                      -- measured
local after = collectgarbage("count")
collectgarbage("restart")
jit.attach(on_trace)

local errs = ngx_acct.errors()
local n_err = 0
for _, v in pairs(errs) do n_err = n_err + v end
ngx.say("calls ", 2 * N)
ngx.say("garbage_bytes ", math.floor((after - before) * 1024))
ngx.say("loops ", ev.loops)
ngx.say("stitches ", ev.stitches)
ngx.say("aborts ", #ev.aborts)
for _, a in ipairs(ev.aborts) do ngx.say("abort ", a) end
ngx.say("declined_function_traces ", ev.benign)
local parts = {}
for k, v in pairs(errs) do if v > 0 then parts[#parts + 1] = k .. "=" .. v end end
table.sort(parts)
ngx.say("errors ", n_err, " ", table.concat(parts, ","))
