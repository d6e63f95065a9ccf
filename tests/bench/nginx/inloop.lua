-- content_by_lua_file of tests/bench/nginx/bench-nginx.sh: ns per operation in a loop the
-- JIT compiles, inside an nginx worker (PRODUCT.md §7, "record() inside nginx").
--
--   GET /bench/loop?variant=V&n=N&keys=K&barrier=B
--
-- V:  ffi     R.ra_meter_record(m, tenant, subject, dim, 1): our record through the FFI
--             into the shared plane, with handles parsed once (what log() does after
--             resolving the request's tenant and subject)
--     stripe  the same as ffi through a handle striped per worker (meter:set_stripe:
--             init { stripes = true }): each worker adds to its own entries of the keys
--     key     R.ra_meter_record_key(m, key, 1): the same records through key handles
--             (ra_key_t, one per key, made once: no key hash, probe or compare)
--     key_stripe  key, striped per worker
--     log     ron.accounting.nginx's log() on this request: 3 variable reads, tenant
--             parse, subject hash, 2 records (the whole per-request work of the Lua path)
--     dict    ngx.shared.DICT:incr(key, 1, 0): lua-nginx-module's shared dictionary (a
--             mutex per increment)
--     atomic  ra_bench_atomic_add(p, 1): one relaxed fetch-add into a shared mapping
--             through the FFI: the floor for anything that counts in shared memory
--     var, varb, subject, tenant   pieces of log() alone, to see where its time goes (not
--             run by bench-nginx.sh): a header variable read, $bytes_sent read, the keyed
--             BLAKE3 of a subject, the parse of a tenant UUID
-- over K keys used round robin (the same keys in every worker: contention is real). With
-- B = 2, the request waits (ngx.sleep, at most 5 s) until two requests have arrived, so two
-- workers run their loops at the same time. Answers "pid cpu_ns_per_op alone|together
-- wall_ns_per_op wall_start_ns wall_end_ns" (CLOCK_MONOTONIC: comparable across workers).
local ffi = require("ffi")
local C = ffi.C
local B = RA_BENCH -- set in init_by_lua (bench-nginx.sh): meter, lib, region, dict

local variant = ngx.var.arg_variant or "ffi"
local n = tonumber(ngx.var.arg_n) or 1000000
local keys = tonumber(ngx.var.arg_keys) or 64
local barrier = tonumber(ngx.var.arg_barrier) or 1

local R = require("ron.accounting.binding.lib").namespace()
local gw = require("ron.accounting.nginx")
local acct = require("ron.accounting")

if not pcall(ffi.typeof, "struct ra_bench_timespec") then
    ffi.cdef [[
    struct ra_bench_timespec { long tv_sec; long tv_nsec; };
    int clock_gettime(int clk_id, struct ra_bench_timespec *tp);
    ]]
end
-- CPU time of this worker (CLOCK_THREAD_CPUTIME_ID), not wall time: on a shared
-- machine a worker that is descheduled mid-loop must not look slower; contention between
-- two workers running at once (cache lines bouncing, a mutex) still shows.
local ts = ffi.new("struct ra_bench_timespec")
local function cpu_ns()
    C.clock_gettime(3, ts)
    return tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
end
local function wall_ns()
    C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
    return tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
end

local m = gw.meter():cdata()
local tenants, subjects, names = {}, {}, {}
for k = 1, keys do
    tenants[k] = acct.tenant(string.format("6f1c3c1e-2b7a-4d5e-9a43-%012x", k))
    subjects[k] = gw.meter():subject("bench-subject-" .. k)
    names[k] = "bench-key-" .. k
end
local handles = ffi.new("ra_key_t[?]", keys + 1)
for k = 1, keys do
    assert(R.ra_key_init(handles[k], m, tenants[k], subjects[k], 1) == 0)
end
local dict = ngx.shared[B.dict]
local add = B.lib and B.lib.ra_bench_atomic_add
local region = B.region

local function run_ffi(count)
    for i = 1, count do
        local k = i % keys + 1
        R.ra_meter_record(m, tenants[k], subjects[k], 1, 1)
    end
end
local function run_key(count)
    for i = 1, count do
        R.ra_meter_record_key(m, handles[i % keys + 1], 1)
    end
end
local function run_log(count)
    local log = gw.log
    for _ = 1, count do log() end
end
local function run_dict(count)
    for i = 1, count do dict:incr(names[i % keys + 1], 1, 0) end
end
local function run_atomic(count)
    for i = 1, count do add(region + (i % keys) * 8, 1) end
end
-- pieces of log(), to see where its time goes
require("resty.core.var")
local var_get = C.ngx_http_lua_ffi_var_get
local vp, vl, ep = ffi.new("char *[1]"), ffi.new("size_t[1]"), ffi.new("char *[1]")
local lowbuf = ffi.new("char[64]")
local function run_var(count)
    local r = require("resty.core.base").get_request()
    for _ = 1, count do var_get(r, "http_x_tenant_id", 16, lowbuf, 0, vp, vl, ep) end
end
local function run_varb(count)
    local r = require("resty.core.base").get_request()
    for _ = 1, count do var_get(r, "bytes_sent", 10, lowbuf, 0, vp, vl, ep) end
end
local sbuf = ffi.new("ra_subject_t")
local function run_subject(count)
    for _ = 1, count do R.ra_meter_subject(m, "user-42", 7, sbuf) end
end
local tbuf = ffi.new("ra_tenant_t")
local function run_tenant(count)
    for _ = 1, count do R.ra_tenant_parse("6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21", 36, tbuf) end
end
-- This worker's handle serves every variant: striped only for `stripe`.
local striped = variant == "stripe" or variant == "key_stripe"
R.ra_meter_set_stripe(m, striped and ngx.worker.id() or 0)
local RUN = { ffi = run_ffi, stripe = run_ffi, key = run_key, key_stripe = run_key, log = run_log, dict = run_dict, atomic = run_atomic,
              var = run_var, varb = run_varb, subject = run_subject, tenant = run_tenant }
local run = RUN[variant]
if not run or (variant == "atomic" and not add) then
    ngx.status = 400
    ngx.say("unknown or unavailable variant ", variant)
    return
end

run(math.min(n, 20000)) -- warm-up: the JIT compiles the loop

local together = "alone"
if barrier > 1 then
    local ctl = ngx.shared[B.dict]
    local arrived = ctl:incr("barrier:" .. (ngx.var.arg_round or "0"), 1, 0)
    local waited = 0
    while arrived < barrier and waited < 5 do
        ngx.sleep(0.001)
        waited = waited + 0.001
        arrived = ctl:get("barrier:" .. (ngx.var.arg_round or "0"))
    end
    if arrived >= barrier then together = "together" end
end

local c0, w0 = cpu_ns(), wall_ns()
run(n)
local c1, w1 = cpu_ns(), wall_ns()
ngx.say(ngx.worker.pid(), " ", string.format("%.3f", (c1 - c0) / n), " ", together, " ",
        string.format("%.3f %.0f %.0f", (w1 - w0) / n, w0, w1))
