-- Two settings of one benchmark compared (tests/bench/README.md "Comparing two settings"):
-- the command run N times under each, in ABBA order (A B B A A B B A ...), `sync` and a
-- pause before every run, and its BENCH lines' figures summed up per setting: the mean,
-- the standard deviation, and B - A with its 95 % interval (Welch). On this project's
-- 2-vCPU machines one tree's rating runs spread by +-10 % (six runs in a row: 3,589-4,368
-- slices/s), and pairs run always in the same order had shown gains that ABBA order did not
-- (docs/LEDGER.md, the binds blocks): a difference is one when its interval leaves 0.
--
--   luajit tests/bench/ab.lua [--runs N] [--settle S] [--name PATTERN] [--fields f1,f2]
--       --a 'VAR=value ...' --b 'VAR=value ...' -- command args...
--
--   --runs N      runs of each setting (default 4: 8 runs)
--   --settle S    seconds of pause after the `sync` before each run (default 5)
--   --name P      only the BENCH lines whose "name" matches the Lua pattern P
--   --fields F    the figures compared (default slices_per_s,ratio_same_rows,cpu_us_per_slice;
--                 a field a line lacks is skipped)
--   --a, --b      the settings: environment assignments put before the command (env(1))
-- The k-th matching BENCH line of a run is its case k (a bench that runs several cases
-- compares each). Exits 1 when a run printed no matching BENCH line.
local format, concat = string.format, table.concat

local T975 = { 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16,
               2.14, 2.13, 2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06,
               2.05, 2.05, 2.05, 2.04 }

local function usage(msg)
    io.stderr:write("ab.lua: ", msg, "\nusage: luajit tests/bench/ab.lua [--runs N] "
                    .. "[--settle S] [--name P] [--fields F] --a 'VAR=x' --b 'VAR=y' -- "
                    .. "command...\n")
    os.exit(2)
end

local function parse(argv)
    local o = { runs = 4, settle = 5, name = nil,
                fields = { "slices_per_s", "ratio_same_rows", "cpu_us_per_slice" } }
    local i = 1
    while i <= #argv do
        local a = argv[i]
        if a == "--" then
            o.cmd = { unpack(argv, i + 1) }
            break
        end
        local v = argv[i + 1]
        if v == nil then usage(a .. " needs a value") end
        if a == "--runs" then o.runs = tonumber(v) or usage("--runs: a number")
        elseif a == "--settle" then o.settle = tonumber(v) or usage("--settle: a number")
        elseif a == "--name" then o.name = v
        elseif a == "--fields" then
            o.fields = {}
            for f in v:gmatch("[^,]+") do o.fields[#o.fields + 1] = f end
        elseif a == "--a" then o.a = v
        elseif a == "--b" then o.b = v
        else usage("unknown option " .. a) end
        i = i + 2
    end
    if not (o.a and o.b and o.cmd and #o.cmd > 0) then usage("--a, --b and a command") end
    if o.runs < 2 then usage("--runs: at least 2") end
    return o
end

local function quote(s)
    if s:match("^[%w%-%./,_=:]+$") then return s end
    return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- one run: -> { [k] = { field = value } } of its matching BENCH lines, in order
local function run(o, env)
    os.execute("sync")
    if o.settle > 0 then os.execute("sleep " .. o.settle) end
    local words = {}
    for i, w in ipairs(o.cmd) do words[i] = quote(w) end
    local p = assert(io.popen("env " .. env .. " " .. concat(words, " ") .. " 2>&1"))
    local cases = {}
    for line in p:lines() do
        local json = line:match("^BENCH (%b{})")
        local name = json and json:match('"name":"([^"]*)"')
        if json and (not o.name or (name and name:match(o.name))) then
            local c = { name = name or "?" }
            for _, f in ipairs(o.fields) do
                c[f] = tonumber(json:match('"' .. f .. '":(%-?[%d%.eE%+%-]+)'))
            end
            cases[#cases + 1] = c
        end
    end
    p:close()
    return cases
end

local function stats(xs)
    local n, sum = #xs, 0
    for _, x in ipairs(xs) do sum = sum + x end
    local mean, ss = sum / n, 0
    for _, x in ipairs(xs) do ss = ss + (x - mean) ^ 2 end
    return mean, n > 1 and math.sqrt(ss / (n - 1)) or 0, n
end

-- B - A and the half-width of its 95 % interval (Welch's t)
local function welch(a, b)
    local ma, sa, na = stats(a)
    local mb, sb, nb = stats(b)
    local va, vb = sa ^ 2 / na, sb ^ 2 / nb
    local se = math.sqrt(va + vb)
    if se == 0 then return mb - ma, 0 end
    local df = (va + vb) ^ 2 / ((va ^ 2) / (na - 1) + (vb ^ 2) / (nb - 1))
    local t = T975[math.max(1, math.min(30, math.floor(df)))] or 1.96
    if df > 30 then t = 1.96 + 2.5 / df end
    return mb - ma, t * se
end

local function summary(o, got)
    for k = 1, #got.A[1] do
        print(format("case %d (%s):", k, got.A[1][k].name))
        for _, f in ipairs(o.fields) do
            local xa, xb = {}, {}
            for _, r in ipairs(got.A) do xa[#xa + 1] = r[k] and r[k][f] end
            for _, r in ipairs(got.B) do xb[#xb + 1] = r[k] and r[k][f] end
            if #xa == o.runs and #xb == o.runs then
                local ma, sa = stats(xa)
                local mb, sb = stats(xb)
                local d, h = welch(xa, xb)
                print(format("  %-18s A %.4g +- %.3g   B %.4g +- %.3g   B - A %+.4g (%+.1f %%), "
                             .. "95 %% interval %+.4g .. %+.4g%s", f, ma, sa, mb, sb, d,
                             ma ~= 0 and d / ma * 100 or 0, d - h, d + h,
                             (d - h > 0 or d + h < 0) and "" or "  (within the noise)"))
            end
        end
    end
end

local function main(argv)
    local o = parse(argv)
    print(format("ab.lua: %d runs of each, ABBA order, sync and %g s before each; A: %s; "
                 .. "B: %s; %s", o.runs, o.settle, o.a, o.b, concat(o.cmd, " ")))
    local got = { A = {}, B = {} }
    local order = { "A", "B", "B", "A" }
    for i = 1, 2 * o.runs do
        local which = order[(i - 1) % 4 + 1]
        local cases = run(o, which == "A" and o.a or o.b)
        if #cases == 0 then
            io.stderr:write(format("ab.lua: run %d (%s) printed no matching BENCH line\n", i,
                                   which))
            os.exit(1)
        end
        local list = got[which]
        list[#list + 1] = cases
        local parts = {}
        for k, c in ipairs(cases) do
            for _, f in ipairs(o.fields) do
                if c[f] then parts[#parts + 1] = format("%s%s %.4g", k > 1 and k .. ":" or "",
                                                        f, c[f]) end
            end
        end
        print(format("run %d %s: %s", i, which, concat(parts, "  ")))
        io.stdout:flush()
    end
    summary(o, got)
end

main(arg)
