-- bench-record.lua: the cost of record() from LuaJIT through the FFI (PRODUCT.md §7, second
-- row: "≤ 2× the C figure"), next to the C figure for the same configuration measured in
-- the same `make bench` run.
--
-- Variants (each one its own meter, uniform keys, one thread, time inside one window):
--   ffi-raw   ffi.cdef of the few functions + ffi.load(libronacct.so), calling
--             ra_meter_record_at(m, fixed_ms, tenant*, subject*, dim, inc) with the same
--             pre-parsed keys and the same operation sequence as the C benchmark (the same
--             splitmix64 stream from the same seed, so the very same records);
--   binding   require("ron.accounting") (PRODUCT.md §5): acct.open{clock = fixed}, handles
--             from acct.tenant(str) and meter:subject(str), meter:record(th, sh, dim, inc).
--             Skipped, and said so, when the binding is not there yet. At 100k keys (and in
--             --quick) also without cfg.clock (the system clock path), against the C
--             system-clock figure.
-- Before timing: one record per key (claims every entry) and one untimed pass.
--
-- The C figure: the BENCH line "record/c/k<N>/uniform/t1/fixed_time" from --c-results
-- (written earlier in the same run by bench-record --out), else bench-record (--c-bench) is
-- run for that configuration right now. Ratio = Lua ns/op / C ns/op.
--
-- usage: luajit bench-record.lua --lib build/libronacct.so [--c-results FILE]
--          [--c-bench PATH] [--out FILE] [--quick] [--keys 10000,100000,1000000]
--          [--ops N] [--reps N] [--seed N] [--variants ffi-raw,binding]
local ffi = require("ffi")
local bit = require("bit")

local opts = {
  lib = nil, c_results = nil, c_bench = nil, out = nil, quick = false,
  keys = { 10000, 100000, 1000000 }, ops = 4194304, reps = 5, seed = 0x5eed2026,
  variants = "ffi-raw,binding",
}
local B = require("bench_common") -- tests/bench/ is on LUA_PATH (cmake/bench.cmake)
local default_keys = opts.keys
B.args(arg, opts, { { "--lib", "lib", "str" }, { "--c-results", "c_results", "str" },
                    { "--c-bench", "c_bench", "str" }, { "--keys", "keys", "nums" },
                    { "--ops", "ops", "num" }, { "--reps", "reps", "num" },
                    { "--seed", "seed", "num" }, { "--variants", "variants", "str" } },
       "luajit bench-record.lua --lib libronacct.so [--c-results FILE] [--c-bench PATH] "
         .. "[--out FILE] [--quick] [--keys LIST] [--ops N] [--reps N] [--seed N] "
         .. "[--variants ffi-raw,binding]")
opts.keys_set = opts.keys ~= default_keys
-- A bare file name would make dlopen search the library path instead of the directory.
if opts.lib and not opts.lib:find("/") then opts.lib = "./" .. opts.lib end
if opts.quick then
  if not opts.keys_set then opts.keys = { 2000 } end
  opts.ops = 16384
  opts.reps = 2
end

local N_TENANTS, N_DIMS = 100, 2
local WINDOW_LEN_S = 300
local FIXED_NOW_MS = 1700000250000 -- mid-window, as in bench-record.c
local FIXED_NOW_S = FIXED_NOW_MS / 1000

-- The binding first (if any): its cdefs win; ours are only added where missing. It loads
-- the library named by --lib too (RON_ACCOUNTING_LIB), so both variants run the same build.
if opts.lib then
  pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")
  ffi.C.setenv("RON_ACCOUNTING_LIB", opts.lib, 1)
end
local acct_ok, acct = pcall(require, "ron.accounting")
local acct_err = not acct_ok and tostring(acct) or nil
if not acct_ok then acct = nil end

-- One ffi.cdef per top-level declaration, so a declaration the binding already made is
-- skipped (its error swallowed) without losing the others.
local function cdef_each(decls)
  local depth, start = 0, 1
  for i = 1, #decls do
    local ch = decls:sub(i, i)
    if ch == "{" then depth = depth + 1
    elseif ch == "}" then depth = depth - 1
    elseif ch == ";" and depth == 0 then
      pcall(ffi.cdef, decls:sub(start, i))
      start = i + 1
    end
  end
end
cdef_each [[
typedef struct ra_tenant_s { uint8_t b[16]; } ra_tenant_t;
typedef struct ra_subject_s { uint8_t b[16]; } ra_subject_t;
typedef int64_t (*ra_clock_fn)(void *ud);
typedef void (*ra_log_fn)(void *ud, int level, const char *msg);
typedef struct ra_config_s {
  uint32_t window_len_s; uint32_t shards; uint32_t capacity_rows; uint32_t pending_slices_cap;
  const char *const *dimensions; uint32_t n_dimensions; int amnesia; const char *shm_path;
  const char *host; const uint8_t *subject_key; ra_clock_fn clock; void *clock_ud;
  ra_log_fn log; void *log_ud;
} ra_config_t;
typedef struct ra_meter_s ra_meter_t;
typedef struct ra_slice_s ra_slice_t;
const char *ra_strerror(int code);
void ra_config_init(ra_config_t *cfg);
int ra_meter_open(const ra_config_t *cfg, ra_meter_t **out, char *errbuf, size_t errbuf_len);
void ra_meter_close(ra_meter_t *m);
int ra_tenant_parse(const char *s, size_t len, ra_tenant_t *out);
int ra_meter_subject(const ra_meter_t *m, const void *id, size_t len, ra_subject_t *out);
int ra_meter_dimension(const ra_meter_t *m, const char *name, size_t len);
int ra_meter_degraded(const ra_meter_t *m);
int ra_meter_record_at(ra_meter_t *m, int64_t now_ms, const ra_tenant_t *t, const ra_subject_t *s, int dim, uint64_t inc);
int ra_meter_rollover(ra_meter_t *m, int64_t now_ms, ra_slice_t **out, size_t out_cap, size_t *n_sealed);
size_t ra_meter_pending_count(const ra_meter_t *m);
int ra_meter_pending_get(const ra_meter_t *m, size_t idx, ra_slice_t **out);
void ra_slice_unref(const ra_slice_t *s);
size_t ra_slice_row_count(const ra_slice_t *s);
int ra_slice_row(const ra_slice_t *s, size_t idx, ra_subject_t *subject, uint64_t *inc);
struct ra_bench_timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct ra_bench_timespec *ts);
typedef struct ra_bench_op { const ra_tenant_t *t; const ra_subject_t *s; uint32_t key; uint16_t dim; uint16_t inc; } ra_bench_op_t;
typedef struct ra_bench_hop { uint32_t ti; uint32_t si; uint16_t di; uint16_t inc; } ra_bench_hop_t;
]]

local C = ffi.C
local ts = ffi.new("struct ra_bench_timespec")
local function now_ns()
  C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1e9 + tonumber(ts.tv_nsec)
end

local results_out = opts.out and assert(io.open(opts.out, "a"))

local function emit(line)
  print("BENCH " .. line)
  if results_out then results_out:write("BENCH ", line, "\n"); results_out:flush() end
  io.stdout:flush()
end

local function median(t)
  local c = {}
  for i = 1, #t do c[i] = t[i] end
  table.sort(c)
  return c[math.floor((#c - 1) / 2 + 0.5) + 1]
end

local function minimum(t)
  local m = t[1]
  for i = 2, #t do if t[i] < m then m = t[i] end end
  return m
end

-- splitmix64, exactly as bench-common.h; returns key index and inc for each operation.
local function gen(n, n_keys, seed, emit_op)
  local st = ffi.new("uint64_t", seed)
  local g = 0x9E3779B97F4A7C15ULL
  local m1, m2 = 0xBF58476D1CE4E5B9ULL, 0x94D049BB133111EBULL
  local nk = ffi.new("uint64_t", n_keys)
  for i = 0, n - 1 do
    st = st + g
    local z = st
    z = bit.bxor(z, bit.rshift(z, 30)) * m1
    z = bit.bxor(z, bit.rshift(z, 27)) * m2
    z = bit.bxor(z, bit.rshift(z, 31))
    local k = tonumber(bit.rshift(bit.rshift(z, 32) * nk, 32))
    emit_op(i, k, 1 + tonumber(bit.band(z, 63)))
  end
end

local function key_parts(k, n_subjects)
  local di = k % N_DIMS
  local si = math.floor(k / N_DIMS) % n_subjects
  local ti = math.floor(k / (N_DIMS * n_subjects))
  return ti, si, di
end

-- The run's opts.ops operations (gen, seeded) as a C array of ctype, fill(o, key, tenant,
-- subject, dimension, inc) setting each. -> the array, its length, the increments' total
local function op_seq(ctype, n_keys, n_subjects, fill)
  local n = opts.ops
  local seq = ffi.new(ctype, n)
  local total = 0
  gen(n, n_keys, opts.seed, function(i, k, inc)
    local ti, si, di = key_parts(k, n_subjects)
    fill(seq[i], k, ti, si, di, inc)
    total = total + inc
  end)
  return seq, n, total
end

local function tenant_str(t)
  return string.format("%08x-0000-4000-8000-%012x", 0x10000000 + t, t)
end

-- ---- the C figure of the same run -------------------------------------------------------
local c_cache = {}
-- Keeps the figures of the C bench's BENCH lines (from f, a file or a pipe), noting source.
local function cache_c_lines(f, source)
  for line in f:lines() do
    local name = line:match('^BENCH {.-"name":"(record/c/[^"]+)"')
    local ns = line:match('"ns_per_op":([%d%.]+)')
    if name and ns then
      c_cache[name] = {
        ns = tonumber(ns),
        plain = tonumber(line:match('"plain_inc":{"ns_per_op":([%d%.]+)')),
        atomic = tonumber(line:match('"atomic64_add":{"ns_per_op":([%d%.]+)')),
        source = source,
      }
    end
  end
  f:close()
end

local function read_c_results(file)
  local f = file and io.open(file, "r")
  if not f then return end
  cache_c_lines(f, "results file of this run")
end

local function c_figure(n_keys, clock)
  clock = clock or "fixed"
  local name = string.format("record/c/k%d/uniform/t1/%s", n_keys,
    clock == "fixed" and "fixed_time" or "system_clock")
  if c_cache[name] then return c_cache[name], name end
  if not opts.c_bench then return nil, name end
  local cmd = string.format("%q --keys %d --dist uniform --threads 1 --clock %s --ops %d --reps %d --seed %d",
    opts.c_bench, n_keys, clock, opts.ops, opts.reps, opts.seed)
  cache_c_lines(io.popen(cmd, "r"), "bench-record run now")
  return c_cache[name], name
end

-- ---- variant: raw FFI ------------------------------------------------------------------
local lib
local function load_lib()
  if lib then return lib end
  local ok, l = pcall(ffi.load, opts.lib or "ronacct")
  if not ok then error("cannot load libronacct (pass --lib path/to/libronacct.so): " .. tostring(l)) end
  lib = l
  return lib
end

local function raw_loop(L, m, seq, n, now)
  local rec = L.ra_meter_record_at
  local errs = 0
  for i = 0, n - 1 do
    local o = seq[i]
    if rec(m, now, o.t, o.s, o.dim, o.inc) ~= 0 then errs = errs + 1 end
  end
  return errs
end

local function call_floor_loop(L, m, n)
  local f = L.ra_meter_degraded
  local x = 0
  for _ = 1, n do x = x + f(m) end
  return x
end

local function run_raw(n_keys_req)
  local L = load_lib()
  local cfg = ffi.new("ra_config_t")
  L.ra_config_init(cfg)
  cfg.window_len_s = WINDOW_LEN_S
  cfg.capacity_rows = n_keys_req
  cfg.amnesia = 1
  cfg.host = "bench"
  local mp = ffi.new("ra_meter_t *[1]")
  local errbuf = ffi.new("char[256]")
  local rc = L.ra_meter_open(cfg, mp, errbuf, 256)
  if rc ~= 0 then error("ra_meter_open: " .. ffi.string(errbuf)) end
  local m = mp[0]

  local n_subjects = math.floor(n_keys_req / (N_TENANTS * N_DIMS))
  local n_keys = N_TENANTS * N_DIMS * n_subjects
  local tenants = ffi.new("ra_tenant_t[?]", N_TENANTS)
  local subjects = ffi.new("ra_subject_t[?]", n_subjects)
  for t = 0, N_TENANTS - 1 do
    assert(L.ra_tenant_parse(tenant_str(t), 36, tenants + t) == 0)
  end
  for s = 0, n_subjects - 1 do
    local id = "user-" .. s
    assert(L.ra_meter_subject(m, id, #id, subjects + s) == 0)
  end
  local dims = { [0] = L.ra_meter_dimension(m, "bytes", 5), L.ra_meter_dimension(m, "requests", 8) }

  local seq, n, seq_total = op_seq("ra_bench_op_t[?]", n_keys, n_subjects,
    function(o, k, ti, si, di, inc)
      o.t = tenants + ti
      o.s = subjects + si
      o.key = k
      o.dim = dims[di]
      o.inc = inc
    end)

  -- claim pass, then one untimed pass
  local expected, errors = 0, 0
  for k = 0, n_keys - 1 do
    local ti, si, di = key_parts(k, n_subjects)
    if L.ra_meter_record_at(m, FIXED_NOW_MS, tenants + ti, subjects + si, dims[di], 1) ~= 0 then
      errors = errors + 1
    end
    expected = expected + 1
  end
  errors = errors + raw_loop(L, m, seq, n, FIXED_NOW_MS)
  expected = expected + seq_total

  local ns = {}
  for r = 1, opts.reps do
    local t0 = now_ns()
    errors = errors + raw_loop(L, m, seq, n, FIXED_NOW_MS)
    ns[r] = (now_ns() - t0) / n
    expected = expected + seq_total
  end
  -- the bare FFI call floor: a trivial library call (ra_meter_degraded) in the same loop shape
  call_floor_loop(L, m, n)
  local floor = {}
  for r = 1, 3 do
    local t0 = now_ns()
    call_floor_loop(L, m, n)
    floor[r] = (now_ns() - t0) / n
  end

  -- conservation check
  local sealed = ffi.new("size_t[1]")
  local seal_at = (math.floor(FIXED_NOW_S / WINDOW_LEN_S) + 1) * WINDOW_LEN_S * 1000
  assert(L.ra_meter_rollover(m, seal_at, nil, 0, sealed) == 0)
  local sum, rows = 0, 0
  local sp = ffi.new("ra_slice_t *[1]")
  local inc = ffi.new("uint64_t[1]")
  for i = 0, tonumber(L.ra_meter_pending_count(m)) - 1 do
    if L.ra_meter_pending_get(m, i, sp) == 0 then
      local nr = tonumber(L.ra_slice_row_count(sp[0]))
      for r = 0, nr - 1 do
        L.ra_slice_row(sp[0], r, nil, inc)
        sum = sum + tonumber(inc[0])
      end
      rows = rows + nr
      L.ra_slice_unref(sp[0])
    end
  end
  L.ra_meter_close(m)
  return {
    n_keys = n_keys, n_subjects = n_subjects, ns = median(ns), ns_min = minimum(ns),
    floor = median(floor), ok = (errors == 0 and sum == expected), expected = expected,
    sealed = sum, rows = rows, errors = errors,
  }
end

-- ---- variant: the binding (PRODUCT.md §5) -----------------------------------------------
local function binding_loop(meter, hseq, n, TH, SH, DN)
  local errs = 0
  for i = 0, n - 1 do
    local o = hseq[i]
    local ok = meter:record(TH[o.ti], SH[o.si], DN[o.di], o.inc)
    if not ok then errs = errs + 1 end
  end
  return errs
end

local function run_binding(n_keys_req, sys_clock)
  local meter, err = acct.open {
    window_len_s = WINDOW_LEN_S, capacity_rows = n_keys_req, amnesia = true,
    clock = not sys_clock and function() return FIXED_NOW_S end or nil,
  }
  if not meter then error("acct.open: " .. tostring(err)) end
  local n_subjects = math.floor(n_keys_req / (N_TENANTS * N_DIMS))
  local n_keys = N_TENANTS * N_DIMS * n_subjects
  local TH, SH = {}, {}
  for t = 0, N_TENANTS - 1 do TH[t] = assert(acct.tenant(tenant_str(t))) end
  for s = 0, n_subjects - 1 do SH[s] = assert(meter:subject("user-" .. s)) end
  local DN = { [0] = "bytes", "requests" }

  local hseq, n, seq_total = op_seq("ra_bench_hop_t[?]", n_keys, n_subjects,
    function(o, _, ti, si, di, inc) o.ti, o.si, o.di, o.inc = ti, si, di, inc end)
  local expected, errors = 0, 0
  for k = 0, n_keys - 1 do
    local ti, si, di = key_parts(k, n_subjects)
    local ok, e = meter:record(TH[ti], SH[si], DN[di], 1)
    if not ok then
      errors = errors + 1
      if errors == 1 then io.stderr:write("binding record: ", tostring(e), "\n") end
    end
    expected = expected + 1
  end
  errors = errors + binding_loop(meter, hseq, n, TH, SH, DN)
  expected = expected + seq_total
  local ns = {}
  for r = 1, opts.reps do
    local t0 = now_ns()
    errors = errors + binding_loop(meter, hseq, n, TH, SH, DN)
    ns[r] = (now_ns() - t0) / n
    expected = expected + seq_total
  end
  -- conservation check through the binding's slices
  local sum, rows = 0, 0
  local now_s = sys_clock and os.time() or FIXED_NOW_S
  local slices = meter:rollover((math.floor(now_s / WINDOW_LEN_S) + 1) * WINDOW_LEN_S)
  for _, s in ipairs(slices or {}) do
    for _, row in ipairs(s.rows) do
      sum = sum + tonumber(row.inc)
      rows = rows + 1
    end
  end
  meter:close()
  return {
    n_keys = n_keys, n_subjects = n_subjects, ns = median(ns), ns_min = minimum(ns),
    ok = (errors == 0 and sum == expected), expected = expected, sealed = sum, rows = rows,
    errors = errors,
  }
end

-- ---- main ------------------------------------------------------------------------------
read_c_results(opts.c_results)
print(string.format("# bench-record.lua: %s %s, %s; ops/pass %d, reps %d (median), seed %#x",
  jit.version, jit.status() and "JIT on" or "JIT off", jit.arch, opts.ops, opts.reps, opts.seed))
print("# ratio = LuaJIT ns/op / C ns/op of the same configuration in the same run (target <= 2.0)")
do
  local ok, nsmod = pcall(require, "ron.accounting.binding.lib")
  local from = acct and ok and select(2, pcall(function() return select(2, nsmod.namespace()) end))
  print(string.format("# ffi-raw library: %s; binding: %s", opts.lib or "ronacct (dynamic linker)",
    acct and ("ron.accounting, library " .. tostring(from)) or "not available"))
end

local want = {}
for v in opts.variants:gmatch("[^,]+") do want[v] = true end
local fails = 0

local function report(variant, r, how, clock)
  clock = clock or "fixed"
  local c, cname = c_figure(r.n_keys, clock)
  local name = string.format("record/luajit-%s/k%d/uniform/t1/%s", variant, r.n_keys,
    clock == "fixed" and "fixed_time" or "system_clock")
  print(string.format("\n== %s: %d keys (%d tenants x %d subjects x %d dims), uniform, 1 thread, %s",
    name, r.n_keys, N_TENANTS, r.n_subjects, N_DIMS, how))
  local ratio = c and r.ns / c.ns
  print(string.format("   luajit      %7.1f ns/op  %8.2fM/s  (min %.1f ns/op)", r.ns, 1e3 / r.ns, r.ns_min))
  if c then
    print(string.format("   C           %7.1f ns/op  (%s, %s)  luajit/C = %.2fx", c.ns, cname, c.source, ratio))
  else
    print("   C figure: not available (no --c-results line and no --c-bench)")
  end
  if r.floor then
    print(string.format("   bare FFI call (ra_meter_degraded) %.1f ns/op in the same loop shape", r.floor))
  end
  print(string.format("   conservation: %s (recorded %.0f, sealed %.0f in %d rows, %d errors)",
    r.ok and "ok" or "FAILED", r.expected, r.sealed, r.rows, r.errors))
  local j = string.format(
    '{"bench":"record","name":"%s","lang":"luajit","variant":"%s","params":{"keys":%d,"tenants":%d,' ..
    '"subjects":%d,"dims":%d,"dist":"uniform","threads":1,"clock":"%s","ops_per_thread":%d,' ..
    '"reps":%d,"seed":%d},"ns_per_op":%.3f,"ns_per_op_min":%.3f,"ops_per_s":%.0f,',
    name, variant, r.n_keys, N_TENANTS, r.n_subjects, N_DIMS, clock, opts.ops, opts.reps, opts.seed,
    r.ns, r.ns_min, 1e9 / r.ns)
  if c then
    j = j .. string.format('"baselines":{"c_record":{"name":"%s","ns_per_op":%.3f}%s},"ratios":{"c_record":%.3f%s},',
      cname, c.ns, r.floor and string.format(',"ffi_call_floor":{"ns_per_op":%.3f}', r.floor) or "",
      ratio, r.floor and string.format(',"ffi_call_floor":%.3f', r.ns / r.floor) or "")
  else
    j = j .. '"baselines":{},"ratios":{},'
  end
  j = j .. string.format('"conservation_ok":%s}', r.ok and "true" or "false")
  emit(j)
  if not r.ok then fails = fails + 1 end
end

-- Each measurement starts from a flushed JIT: traces recorded for one meter (say, with a
-- cfg.clock) must not be reused, through side exits, for another (without one).
local function fresh()
  collectgarbage()
  jit.flush()
end

for _, k in ipairs(opts.keys) do
  if want["ffi-raw"] then
    fresh()
    report("ffi-raw", run_raw(k), "ffi.load + ra_meter_record_at(fixed ms)")
  end
  if want["binding"] then
    if acct then
      fresh()
      report("binding", run_binding(k), "require 'ron.accounting', meter:record(handles, cfg.clock fixed)")
      if k == 100000 or opts.quick then
        -- the production path: no cfg.clock, the core reads the system clock
        fresh()
        report("binding", run_binding(k, true), "require 'ron.accounting', meter:record(handles), system clock", "system")
      end
    else
      print(string.format("\n== record/luajit-binding/k%d: skipped: require 'ron.accounting' failed: %s",
        k, (acct_err or "?"):gsub("\n.*", "")))
    end
  end
end
if results_out then results_out:close() end
if fails > 0 then
  io.stderr:write("bench-record.lua: ", fails, " configuration(s) failed their check\n")
  os.exit(1)
end
