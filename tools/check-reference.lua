-- check-reference.lua ROOT: docs/reference/*.md agree with the code they describe.
--
--   luajit tools/check-reference.lua .          (ctest docs-reference; exit 1 on a finding)
--
-- Three lists are read from the code and compared with the reference pages' tables:
--
--   metrics  every metric family the code renders: core/metrics.c (its registry rows
--            {"name", "type", ...} and hand-written "# TYPE name" lines), the Lua side's one
--            registry (ron.base.metrics: every lua/ron/<package>/families.lua is loaded and
--            the families they declare are read back, the old names of a rename included)
--            and nginx/*.c. docs/reference/metrics.md documents each in exactly one table
--            row (first cell `name` or `name{labels}`), and documents nothing the code does
--            not render. A Lua file that writes a "# TYPE"/"# HELP" line itself (a family
--            rendered by hand, past the registry) is a finding too.
--   config   every key of the daemon's DEFAULTS table (lua/ron/node/schema.lua)
--            is in a first cell of docs/reference/config.md's "Daemon settings" table, and
--            that table names no key DEFAULTS lacks; where both sides are plain values
--            (numbers, "512 MiB", strings, booleans, {}), the documented default is the code's.
--   cli      every verb of host/cli/main.c's command table has a row in
--            docs/reference/cli.md's verb table (first cell `verb ...`), and the table
--            names no verb the host lacks.
--
-- The self-test (tests/docs/reference-selftest.sh) copies these files and breaks each rule.

local root = arg[1] or "."

-- ron.base.fs from this checkout's lua/ (the tools run under a plain luajit)
package.path = (arg[0]:match("^(.*)/tools/[^/]*$") or ".") .. "/lua/?.lua;" .. package.path
local fs = require("ron.base.fs")

local function read(path)
    return fs.read_file(root .. "/" .. path)
end

local findings = {}
local function finding(fmt, ...)
    findings[#findings + 1] = string.format(fmt, ...)
end

local function must(path)
    local s = read(path)
    if not s then
        finding("%s: missing", path)
        return ""
    end
    return s
end

local function files_under(dir, suffix)
    local out = {}
    local p = io.popen("cd '" .. root .. "' && find " .. dir .. " -type f -name '*" .. suffix
                       .. "' 2>/dev/null | sort")
    for name in p:lines() do out[#out + 1] = name end
    p:close()
    return out
end

-- Table rows of a markdown text: a list of { cells..., line = n, section = heading }.
local function rows(text)
    local out, section, ln = {}, "", 0
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
        ln = ln + 1
        local h = line:match("^#+%s+(.*)$")
        if h then section = h end
        if line:match("^%s*|") and not line:match("^%s*|%s*%-%-%-") then
            local cells = { line = ln, section = section }
            for cell in line:gsub("^%s*|", ""):gmatch("([^|]*)|") do cells[#cells + 1] = cell end
            out[#out + 1] = cells
        end
    end
    return out
end

local function sorted_keys(t)
    local k = {}
    for name in pairs(t) do k[#k + 1] = name end
    table.sort(k)
    return k
end

-- The code's names (name -> where) against those the page at path lists (name -> line), in
-- name order: a finding missing_fmt(path, name, where) for each the page lacks, and
-- unknown_fmt(path, line, name) for each it lists that the code does not have.
local function both_ways(path, code, page, missing_fmt, unknown_fmt)
    for _, name in ipairs(sorted_keys(code)) do
        if not page[name] then finding(missing_fmt, path, name, code[name]) end
    end
    for _, name in ipairs(sorted_keys(page)) do
        if not code[name] then finding(unknown_fmt, path, page[name], name) end
    end
end

-- ---- metrics -------------------------------------------------------------------------------

-- The families the Lua packages declare (ron.base.metrics' registry), with the file of each.
local function lua_families()
    local saved = package.path
    package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
    for k in pairs(package.loaded) do
        if k:match("^ron%.") then package.loaded[k] = nil end
    end
    local out = {}
    local ok, err = pcall(function()
        local metrics = require("ron.base.metrics")
        for _, f in ipairs(files_under("lua/ron", "families.lua")) do
            require(f:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/", "."))
        end
        for _, fam in ipairs(metrics.families()) do
            local where = fam.where:gsub("^.-/?(lua/ron/)", "%1")
            for _, name in ipairs(fam.names) do out[name] = where end
        end
    end)
    package.path = saved
    if not ok then
        finding("lua/ron/*/families.lua: cannot load the registry: %s", tostring(err))
    end
    return out
end

local emitted = {} -- name -> file that renders it
local function emits(file, text)
    local function add(name) emitted[name] = emitted[name] or file end
    for _, typ in ipairs({ "counter", "gauge", "histogram" }) do
        for name in text:gmatch('"([%l_][%w_:]*)",%s*"' .. typ .. '"') do add(name) end
    end
    for name in text:gmatch("# TYPE ([%l_][%w_:]*) ") do add(name) end
    for name in text:gmatch('family%(out,%s*"([%l_][%w_:]*)"') do add(name) end
end
emits("core/metrics.c", must("core/metrics.c"))
for _, f in ipairs(files_under("nginx", ".c")) do emits(f, read(f) or "") end
for name, file in pairs(lua_families()) do emitted[name] = emitted[name] or file end
-- Rendered once: no Lua file but the registry writes the exposition's comment lines.
for _, f in ipairs(files_under("lua", ".lua")) do
    if f ~= "lua/ron/base/metrics.lua" then
        local line = (read(f) or ""):match("[\"']# (%u%u%u%u) ")
        if line == "TYPE" or line == "HELP" then
            finding("%s: renders a metric family by hand (a \"# %s\" line): declare it in its "
                    .. "package's families.lua and render it through ron.base.metrics", f, line)
        end
    end
end

local documented = {} -- name -> line
local mpath = "docs/reference/metrics.md"
for _, r in ipairs(rows(must(mpath))) do
    local name = (r[1] or ""):match("^%s*`([%l_][%w_:]*)[`{]")
    if name then
        if documented[name] then
            finding("%s:%d: %s documented again (first at line %d)", mpath, r.line, name,
                    documented[name])
        else
            documented[name] = r.line
        end
    end
end
both_ways(mpath, emitted, documented, "%s: %s (rendered by %s) is not documented",
          "%s:%d: %s is documented but no code renders it")

-- ---- config --------------------------------------------------------------------------------

-- A default as text, normalised so the code's literal and the page's spelling compare:
-- numbers (and products like 512 * 1024 * 1024, and "512 MiB") as numbers, strings
-- unquoted, true/false, {}. nil for anything else (a table with content, prose).
local function norm_default(v)
    v = v:gsub("`", ""):gsub("^%s+", ""):gsub("%s+$", "")
    local mib = v:match("^(%d+) MiB$")
    if mib then return tostring(tonumber(mib) * 1048576) end
    if v:match("^[%d%s%*]+$") then
        local f = loadstring("return " .. v)
        local ok, n = pcall(f)
        if ok and type(n) == "number" then return tostring(n) end
    end
    local q = v:match('^"([^"]*)"$')
    if q then return q end
    if v == "true" or v == "false" or v == "{}" then return v end
    if v:match("^[%w_.:/]+$") then return v end -- a bare word: macronode, var, 127.0.0.1:9464
    return nil
end

local schema = must("lua/ron/node/schema.lua")
local defaults, literal = {}, {}
local block = schema:match("_M%.DEFAULTS%s*=%s*(%b{})") or ""
-- Top-level keys only: a key at the table's first indentation level.
local indent
for line in block:gmatch("[^\n]+") do
    local sp, key, rest = line:match("^(%s+)([%a_][%w_]*)%s*=%s*(.*)$")
    if key then
        indent = indent or #sp
        if #sp == indent then
            defaults[key] = true
            local v = rest:gsub("%s*%-%-.*$", ""):gsub(",%s*$", "")
            literal[key] = norm_default(v)
        end
    end
end
if next(defaults) == nil then finding("lua/ron/node/schema.lua: no DEFAULTS keys") end

local cpath = "docs/reference/config.md"
local keys = {}
for _, r in ipairs(rows(must(cpath))) do
    if r.section:lower():match("daemon settings") then
        -- The keys of the first cell; flags in parentheses after them are not keys.
        local row = {}
        for span in (r[1] or ""):gsub("%b()", ""):gmatch("`([^`]+)`") do
            if span:match("^[%a_][%w_]*$") then
                keys[span] = r.line
                row[#row + 1] = span
            end
        end
        -- The default cell: one value for every key of the row, or one per key (", ").
        local vals = {}
        for v in ((r[2] or "") .. ","):gmatch("([^,]*),") do vals[#vals + 1] = v end
        if #vals ~= #row then vals = { r[2] or "" } end
        for i, k in ipairs(row) do
            local want, got = literal[k], norm_default(vals[i] or vals[1])
            if want and got and want ~= got then
                finding("%s:%d: daemon key %s: the page says default %s, schema.lua says %s",
                        cpath, r.line, k, got, want)
            end
        end
    end
end
both_ways(cpath, defaults, keys, "%s: daemon key %s (schema.lua DEFAULTS) is not documented",
          "%s:%d: daemon key %s is documented but not in schema.lua DEFAULTS")

-- ---- cli -----------------------------------------------------------------------------------

local main = must("host/cli/main.c")
local verbs = {}
local tbl = main:match("commands%[%]%s*=%s*(%b{})") or ""
for name in tbl:gmatch('\n%s*{"([%w%-]+)",') do verbs[name] = true end
if next(verbs) == nil then finding("host/cli/main.c: no command table found") end

local lpath = "docs/reference/cli.md"
local listed = {}
for _, r in ipairs(rows(must(lpath))) do
    local verb = (r[1] or ""):match("^%s*`([%w%-]+)")
    if verb and r.section:lower():match("verbs") then listed[verb] = r.line end
end
both_ways(lpath, verbs, listed, "%s: verb %s (host/cli/main.c) is not documented",
          "%s:%d: verb %s is documented but not in host/cli/main.c")

for _, f in ipairs(findings) do io.stderr:write(f, "\n") end
local n = function(t) return #sorted_keys(t) end
io.write(string.format("check-reference: %d metrics, %d daemon keys, %d verbs; %d findings\n",
                       n(emitted), n(defaults), n(verbs), #findings))
os.exit(#findings == 0 and 0 or 1)
