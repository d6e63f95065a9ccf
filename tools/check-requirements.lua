-- check-requirements.lua ROOT: every requirement id cited in the tree resolves inside the tree.
--
--   luajit tools/check-requirements.lua .        (ctest docs-requirements; exit 1 on a finding)
--
-- Why: comments and tests cite invariants (I-n), gates (G-n, G-n.m), performance rules (P-n),
-- seed components (C-n), seed 001's async invariants (I-async-n), the other systems' ids
-- (AUD-I-n, LED-n, WLT-n) and sections of documents that live outside the repository
-- ("PRODUCT.md §5", "seed 001 §5", "STYLE §12"). A citation is only worth something when a
-- reader can follow it, so each must be DEFINED as a markdown table row in some docs/**.md:
--
--   | I-n | statement in our words | `code/that/upholds.c` | `tests/that-prove.c` |
--
-- The first cell is the id (backticks, brackets and bold are ignored; "PRODUCT.md §5" and
-- "PRODUCT §5" are one id). A definition row's third and fourth cells name files in
-- backticks; each must exist (a `path:detail` suffix is ignored), so rows cannot rot
-- silently when code moves. A citation of an in-repo page's section ("FORMAT.md §4.8",
-- "docs/CONCURRENCY.md §7") must name a page that exists and a numbered heading it has.
-- Findings: undefined id, id defined twice, missing file in a row, dangling section.
--
-- Files scanned: `git ls-files` under ROOT, or every file below ROOT when it is not a git
-- work tree (the self-test, tests/docs/requirements-selftest.sh); binary files and fuzz
-- corpora are skipped.

local root = arg[1] or "."

local function sh_quote(s)
    return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- ron.base.fs from this checkout's lua/ (the tools run under a plain luajit)
package.path = (arg[0]:match("^(.*)/tools/[^/]*$") or ".") .. "/lua/?.lua;" .. package.path
local fs = require("ron.base.fs")

local read = fs.read_file

local function exists(path)
    local f = io.open(path, "rb")
    if f then
        f:close()
        return true
    end
    -- A directory: io.open fails on some systems, succeeds on others; ask the shell.
    return os.execute("test -e " .. sh_quote(path)) == 0
end

local function list_files()
    local files = {}
    local p = io.popen("git -C " .. sh_quote(root)
                       .. " ls-files -z --cached --others --exclude-standard 2>/dev/null")
    local out = p:read("*a")
    p:close()
    if out ~= "" then
        for name in out:gmatch("([^%z]+)") do files[#files + 1] = name end
        return files
    end
    p = io.popen("cd " .. sh_quote(root) .. " && find . -type f -not -path './.git/*'")
    for name in p:lines() do files[#files + 1] = name:gsub("^%./", "") end
    p:close()
    return files
end

local function skipped(name)
    return name:match("^tests/fuzz/corpus/") or name:match("^build[^/]*/")
        or name:match("%.bin$") or name:match("%.png$")
end

-- Ids: the compound forms first (their inner "I-3" is not a citation of I-3).
local COMPOUND = { "AUD%-I%-%d+", "LED%-%d+", "WLT%-%d+", "I%-async%-%d+" }
local SIMPLE = { "G%-%d+%.%d+", "[IGPC]%-%d+" }

local function ids_in(text, emit)
    local taken = {}
    local function scan(pat)
        local init = 1
        while true do
            local s, e = text:find("%f[%w]" .. pat .. "%f[^%w]", init)
            if not s then break end
            local free = true
            for i = s, e do
                if taken[i] then free = false break end
            end
            if free then
                for i = s, e do taken[i] = true end
                -- "G-6." at a sentence's end is G-6: %d+%.%d+ needs a digit after the dot.
                emit(text:sub(s, e), s)
            end
            init = e + 1
        end
    end
    for _, pat in ipairs(COMPOUND) do scan(pat) end
    for _, pat in ipairs(SIMPLE) do scan(pat) end
end

-- Sections of documents outside the repository, normalised to one spelling.
local function sections_in(text, emit)
    for pos, n in text:gmatch("()PRODUCT%.?m?d?%s*§%s*(%d+)") do emit("PRODUCT §" .. n, pos) end
    for pos, s, n in text:gmatch("()[Ss]eed%s+(%d%d%d)%s*§%s*(%d+)") do
        emit("seed " .. s .. " §" .. n, pos)
    end
    for pos, n in text:gmatch("()STYLE%.?m?d?%s*§%s*(%d+)") do emit("STYLE §" .. n, pos) end
end

-- Sections of the repository's own pages: FORMAT.md §4.8 needs docs/FORMAT.md (or the path
-- given) to have a heading numbered 4.8.
local function page_sections_in(text, emit)
    for pos, path, n in text:gmatch("()([%w_/%.%-]*%u[%w_%-]*%.md)%s*§%s*(%d[%d%.]*)") do
        local base = path:match("([^/]+)%.md$")
        if base ~= "PRODUCT" and base ~= "STYLE" then
            emit(path, (n:gsub("%.+$", "")), pos)
        end
    end
end

local function line_of(text, pos)
    local n = 1
    for _ in text:sub(1, pos):gmatch("\n") do n = n + 1 end
    return n
end

local function normalise_id(cell)
    local c = cell:gsub("[`%*%[%]]", ""):gsub("^%s+", ""):gsub("%s+$", "")
    c = c:gsub("^PRODUCT%.md", "PRODUCT"):gsub("^STYLE%.md", "STYLE"):gsub("^Seed", "seed")
    local found
    ids_in(c, function(id, s)
        if s == 1 and #id == #c then found = id end
    end)
    if found then return found end
    if c:match("^PRODUCT §%d+$") or c:match("^seed %d%d%d §%d+$") or c:match("^STYLE §%d+$") then
        return c
    end
    return nil
end

local findings = {}
local function finding(fmt, ...)
    findings[#findings + 1] = string.format(fmt, ...)
end

local files = list_files()
local texts = {}
for _, name in ipairs(files) do
    if not skipped(name) then
        local t = read(root .. "/" .. name)
        if t and not t:find("%z") then texts[name] = t end
    end
end

-- Definitions: table rows of docs/**.md whose first cell is an id.
local defined = {} -- id -> "file:line"
local ndefs = 0
for name, text in pairs(texts) do
    if name:match("^docs/.*%.md$") then
        local ln = 0
        for line in (text .. "\n"):gmatch("([^\n]*)\n") do
            ln = ln + 1
            if line:match("^%s*|") then
                local cells = {}
                for cell in line:gsub("^%s*|", ""):gmatch("([^|]*)|") do
                    cells[#cells + 1] = cell
                end
                local id = cells[1] and normalise_id(cells[1])
                if id then
                    local where = name .. ":" .. ln
                    if defined[id] then
                        finding("%s: %s is defined twice (first at %s)", where, id, defined[id])
                    else
                        defined[id] = where
                        ndefs = ndefs + 1
                    end
                    for k = 3, 4 do
                        for span in (cells[k] or ""):gmatch("`([^`]+)`") do
                            local path = span:match("^([^%s:]+)")
                            if path and (path:find("/") or path:match("%.%a+$")) then
                                if not exists(root .. "/" .. path) then
                                    finding("%s: %s cites %s, which does not exist", where,
                                            id, path)
                                end
                            end
                        end
                    end
                end
            end
        end
    end
end

-- Citations.
local ncites = 0
local missing = {} -- id -> first "file:line"
local names = {}
for name in pairs(texts) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do
    local text = texts[name]
    local function cite(id, pos)
        ncites = ncites + 1
        if not defined[id] and not missing[id] then
            missing[id] = name .. ":" .. line_of(text, pos)
        end
    end
    ids_in(text, cite)
    sections_in(text, cite)
    page_sections_in(text, function(path, n, pos)
        ncites = ncites + 1
        local page = path:find("/") and path or ("docs/" .. path)
        local body = texts[page] or read(root .. "/" .. page)
        local where = name .. ":" .. line_of(text, pos)
        if not body then
            finding("%s: cites %s §%s, but %s does not exist", where, path, n, page)
            return
        end
        local pat = "\n#+%s+" .. n:gsub("%.", "%%.") .. "[%.%s]"
        if not ("\n" .. body):find(pat) then
            finding("%s: cites %s §%s, which has no heading numbered %s", where, path, n, n)
        end
    end)
end
-- Relative links of markdown pages: [text](path#anchor) must name a file that exists and,
-- for a markdown target, a heading whose GitHub anchor is `anchor`.
local function slug(h)
    return (h:lower():gsub("[^%w%s_%-]", ""):gsub("%s", "-"))
end
local anchors = {} -- page -> set of anchors
local function anchors_of(page)
    if anchors[page] then return anchors[page] end
    local set, body = {}, texts[page] or read(root .. "/" .. page) or ""
    for h in ("\n" .. body):gmatch("\n#+%s+([^\n]+)") do set[slug(h)] = true end
    anchors[page] = set
    return set
end
local function normpath(p)
    local parts = {}
    for seg in p:gmatch("[^/]+") do
        if seg == ".." then parts[#parts] = nil elseif seg ~= "." then parts[#parts + 1] = seg end
    end
    return table.concat(parts, "/")
end
for _, name in ipairs(names) do
    if name:match("%.md$") then
        local text = texts[name]
        local dir = name:match("^(.*)/[^/]*$") or ""
        for pos, target in text:gmatch("()%]%(([^)%s]+)%)") do
            if not target:match("^%a[%w+.-]*:") then
                local path, anchor = target:match("^([^#]*)#?(.*)$")
                local page = path == "" and name
                    or normpath((dir ~= "" and dir .. "/" or "") .. path)
                local where = name .. ":" .. line_of(text, pos)
                ncites = ncites + 1
                if not exists(root .. "/" .. page) then
                    finding("%s: links to %s, which does not exist", where, page)
                elseif anchor ~= "" and page:match("%.md$") and not anchors_of(page)[anchor] then
                    finding("%s: links to %s#%s, which has no such heading", where, page, anchor)
                end
            end
        end
    end
end

local undefined = {}
for id in pairs(missing) do undefined[#undefined + 1] = id end
table.sort(undefined)
for _, id in ipairs(undefined) do
    finding("%s: cites %s, which no docs/*.md table row defines", missing[id], id)
end

for _, f in ipairs(findings) do io.stderr:write(f, "\n") end
io.write(string.format("check-requirements: %d files, %d definitions, %d citations, %d findings\n",
                       #names, ndefs, ncites, #findings))
os.exit(#findings == 0 and 0 or 1)
