-- perf_lj.lua: one thread's `perf report` samples summed by what they were doing inside
-- LuaJIT and around it (tests/bench/README.md "Inside LuaJIT"): compiled traces, the
-- collector and the allocator, string interning, tables, the interpreter, the trace
-- compiler, the serializer, the FFI, the kernel, libc, SQLite, ... Needs a LuaJIT with
-- symbols (tests/bench/luajit-symbols.sh); with the stripped one, LuaJIT's own samples are
-- bare addresses and fall in "luajit (no symbol)".
--
--   perf report -i perf.data --no-children --tid TID --sort dso,sym --stdio -g none \
--       | luajit tests/bench/perf_lj.lua
local format = string.format

-- LuaJIT's internal symbols by what they do, first match wins
local LJ = {
    { "collector and allocator", { "^gc_", "^propagatemark", "^lj_gc", "^lj_alloc", "^lj_mem",
                                   "^atomic", "^release_unused", "^sweep", "^lj_func_free",
                                   "^lj_tab_free", "^lj_str_free", "^lj_cdata_free" } },
    { "strings (interning, hashing)", { "^lj_str_", "^hash_", "^lj_strscan", "^lj_strfmt" } },
    { "tables", { "^lj_tab_", "^rehashtab", "^hashkey", "^newtab", "^hashmask", "^countint",
                  "^bestasize" } },
    { "interpreter and fast functions", { "^lj_BC_", "^lj_vm_", "^lj_ff_", "^lj_fff" } },
    { "trace compiler", { "^lj_record", "^rec_", "^lj_asm", "^asm_", "^lj_opt", "^lj_snap",
                          "^lj_ir", "^lj_trace", "^lj_mcode", "^lj_crecord", "^crec_",
                          "^recff", "^lj_ffrecord", "^split_", "^fold", "^lj_fold", "^ra_",
                          "^emit_", "^trace_", "^snap_" } },
    { "serializer and buffers", { "^serialize", "^lj_serialize", "^lj_buf", "^lj_cf_buffer",
                                  "^buffer_" } },
    { "FFI", { "^lj_cconv", "^lj_ccall", "^lj_ctype", "^lj_cdata", "^lj_carith", "^lj_cf_ffi",
               "^ccall_", "^cconv", "^lj_clib" } },
    { "runtime (metamethods, libraries, API)", { "^lj_meta", "^lj_cf_", "^lj_lib", "^lj_func",
                                                  "^lj_state", "^lj_err", "^lj_dispatch",
                                                  "^lj_debug", "^lua_", "^luaL_", "^lj_cont" } },
}

local function luajit_kind(sym)
    if sym:match("^0x") then return "luajit (no symbol)" end
    for _, k in ipairs(LJ) do
        for _, p in ipairs(k[2]) do
            if sym:match(p) then return "luajit: " .. k[1] end
        end
    end
    return "luajit: other"
end

local function kind(dso, sym)
    if dso:match("^%[JIT%]") then return "compiled traces" end
    if dso:match("luajit") then return luajit_kind(sym) end
    if dso:match("kernel") then return "kernel" end
    if dso:match("sqlite") then return "SQLite" end
    if dso:match("^libc") then return "libc" end
    return dso
end

local sums, order, total = {}, {}, 0
for line in io.lines() do
    -- "  2.79%  [kernel.kallsyms]  [k] _raw_spin_unlock_irqrestore"
    -- "  0.27%  [JIT] tid 31253    [.] 0x00007fbb661aea24"
    local pct, dso, sym = line:match("^%s*([%d.]+)%%%s+(%[JIT%] tid %d+)%s+%[.%]%s+(.-)%s*$")
    if not pct then pct, dso, sym = line:match("^%s*([%d.]+)%%%s+(%S+)%s+%[.%]%s+(.-)%s*$") end
    if pct then
        local k = kind(dso, sym)
        if not sums[k] then
            sums[k] = 0
            order[#order + 1] = k
        end
        sums[k] = sums[k] + tonumber(pct)
        total = total + tonumber(pct)
    end
end
if total == 0 then
    io.stderr:write("perf_lj.lua: no samples read (perf report ... --sort dso,sym --stdio -g none)\n")
    os.exit(1)
end
table.sort(order, function(a, b) return sums[a] > sums[b] end)
print(format("%6.2f %% of all samples in this report", total))
for _, k in ipairs(order) do
    print(format("%6.2f %%  %5.1f %% of them  %s", sums[k], 100 * sums[k] / total, k))
end
