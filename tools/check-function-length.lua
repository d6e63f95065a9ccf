-- check-function-length.lua [ROOT [ALLOW]]: functions stay short (STYLE: a function over
-- ~70 lines holds more than one concern).
--
--   luajit tools/check-function-length.lua .     (ctest lint-function-length; exit 1 on a
--                                                 finding; `make lint` runs it)
--
-- Every C file (*.c, *.h) and Lua file (*.lua) git tracks, generated ones aside (a "Generated
-- by" line at the top: the cdefs; the fuzz corpus), is cut into functions; a function's
-- length is its lines from the first line of its definition to its closing brace or `end`.
--
--   over WARN (70) lines    listed, as a warning: split it where that is mechanical
--   over FAIL (150) lines   a failure, unless tools/function-length-allow.txt lists it
--
-- The allow-list may only shrink. Each line is `path name lines`: the function's length
-- when it was listed. The check fails when a listed function grew beyond that, and when an
-- entry is no longer needed (the function is gone or at most FAIL lines long): delete the
-- line then. Functions are named by their C name, their Lua name (`M.start`, `RT:feed`,
-- `local f = function`), or `<enclosing>/anon@<n>` for the n-th anonymous function inside
-- a named one (`<file>` at the top level).
--
-- The self-test (tests/lint/function-length-selftest.sh) breaks each rule on a copy.

local WARN, FAIL = 70, 150

local root = arg[1] or "."
local allow_path = arg[2] or (root .. "/tools/function-length-allow.txt")

-- ron.base.fs from this checkout's lua/ (the tools run under a plain luajit)
package.path = (arg[0]:match("^(.*)/tools/[^/]*$") or ".") .. "/lua/?.lua;" .. package.path
local fs = require("ron.base.fs")

local read = fs.read_file

local function lines_of(s)
    local out = {}
    for line in (s .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = line end
    return out
end

-- ---- C ------------------------------------------------------------------------------------

-- A line with its comments, strings and character literals blanked, so braces and
-- parentheses can be counted; `state` carries an open block comment across lines.
local function c_strip(line, state)
    local out, i, n = {}, 1, #line
    while i <= n do
        local c, c2 = line:sub(i, i), line:sub(i, i + 1)
        if state.comment then
            local j = line:find("*/", i, true)
            if not j then return table.concat(out), state end
            state.comment, i = false, j + 2
        elseif c2 == "/*" then
            state.comment, i = true, i + 2
        elseif c2 == "//" then
            break
        elseif c == '"' or c == "'" then
            local j = i + 1
            while j <= n and line:sub(j, j) ~= c do
                j = j + (line:sub(j, j) == "\\" and 2 or 1)
            end
            out[#out + 1], i = c .. c, j + 1
        else
            out[#out + 1], i = c, i + 1
        end
    end
    return table.concat(out), state
end

local function c_functions(src)
    local found, state = {}, { comment = false }
    local depth, stmt_start, stmt, fn, in_macro = 0, nil, "", nil, false
    for ln, raw in ipairs(lines_of(src)) do
        local line
        line, state = c_strip(raw, state)
        if in_macro or (depth == 0 and line:match("^%s*#")) then
            in_macro = raw:match("\\%s*$") ~= nil -- a macro continues on the next line
        elseif depth == 0 then
            if line:match("%S") then
                stmt_start = stmt_start or ln
                stmt = stmt .. " " .. line
            end
            local opens = select(2, line:gsub("{", ""))
            if opens > 0 then
                local before = stmt:match("^(.-){") or ""
                local name = before:match("([%a_][%w_]*)%s*%(")
                -- A test macro (RA_TEST(name) { ... }) is named by its argument.
                local macro, arg = before:match("^%s*([%u_]+_TEST)%s*%(%s*([%w_]+)")
                if macro then name = arg end
                local is_fn = name and before:match("%)[%s%w_()]*$") and
                              not before:match("^[^(]*=") and not line:match("}")
                if is_fn then fn = { name = name, first = stmt_start } end
                depth = opens - select(2, line:gsub("}", ""))
                if depth <= 0 then depth, stmt, stmt_start = 0, "", nil end
            elseif line:match("[;}]%s*$") or not line:match("%S") then
                stmt, stmt_start = "", nil
            end
        else
            depth = depth + select(2, line:gsub("{", "")) - select(2, line:gsub("}", ""))
            if depth <= 0 then
                if fn then
                    found[#found + 1] = { name = fn.name, first = fn.first, last = ln }
                end
                depth, fn, stmt, stmt_start = 0, nil, "", nil
            end
        end
    end
    return found
end

-- ---- Lua -----------------------------------------------------------------------------------

-- Tokens with their line numbers: names, keywords and the few symbols that name a function
-- (`.`, `:`, `=`, `[`, `]`, `(`; strings as "<str>"), from the tools' shared tokenizer.
local lex = dofile((arg[0]:match("^(.*/)") or "./") .. "lua_lex.lua")
local NAMING = { ["."] = true, [":"] = true, ["="] = true, ["["] = true, ["]"] = true,
                 ["("] = true }
local function lua_tokens(src)
    local toks = {}
    for _, tk in ipairs(lex.tokens(src)) do
        if tk.t == "string" then
            toks[#toks + 1] = { "<str>", tk.line }
        elseif tk.t == "name" or NAMING[tk.v] then
            toks[#toks + 1] = { tk.v, tk.line }
        end
    end
    return toks
end

-- The name a `function` token at k gives its function: `function a.b:c(`, or the target of
-- `x = function` / `local x = function` / `["x"] = function`; nil when anonymous.
local function lua_name(toks, k)
    local name, j = {}, k + 1
    while toks[j] and toks[j][1] ~= "(" do
        name[#name + 1] = toks[j][1]
        j = j + 1
    end
    if #name > 0 then return table.concat(name) end
    if toks[k - 1] and toks[k - 1][1] == "=" and toks[k - 2] then
        local t = toks[k - 2][1]
        if t:match("^[%a_][%w_]*$") then
            local parts, m = { t }, k - 3
            while toks[m] and (toks[m][1] == "." or toks[m][1] == ":") and toks[m - 1] do
                table.insert(parts, 1, toks[m - 1][1] .. toks[m][1])
                m = m - 2
            end
            return table.concat(parts)
        end
    end
    return nil
end

local OPENS = { ["do"] = true, ["if"] = true, ["function"] = true, ["repeat"] = true }
-- busted's containers group tests; they are not functions with a concern of their own
-- (S.describe_pg: spec/support.lua's describe over a PostgreSQL started for the block).
local CONTAINERS = { describe = true, insulate = true, expose = true, context = true,
                     describe_pg = true }

-- Whether the `function` at k is the last argument of a container call:
-- describe("...", function() ... end).
local function in_container(toks, k)
    local j = k - 1
    while toks[j] and toks[j][1] ~= "(" do j = j - 1 end
    return toks[j - 1] ~= nil and CONTAINERS[toks[j - 1][1]] == true
end

local function lua_functions(src)
    local toks, found, stack = lua_tokens(src), {}, {}
    for k, t in ipairs(toks) do
        local w = t[1]
        -- `while`/`for` open their block at `do`.
        if OPENS[w] then
            local entry = { kind = w, first = t[2] }
            if w == "function" then
                local outer
                for s = #stack, 1, -1 do
                    if stack[s].kind == "function" then outer = stack[s] break end
                end
                local name = lua_name(toks, k)
                if not name then
                    local host = outer or stack.top_level or {}
                    stack.top_level = stack.top_level or host
                    host.anon = (host.anon or 0) + 1
                    name = ((outer and outer.name) or "<file>") .. "/anon@" .. host.anon
                end
                entry.name = name
                entry.container = in_container(toks, k)
            end
            stack[#stack + 1] = entry
        elseif w == "end" or w == "until" then
            local e = table.remove(stack)
            if e and e.kind == "function" and not e.container then
                found[#found + 1] = { name = e.name, first = e.first, last = t[2] }
            end
        end
    end
    return found
end

-- ---- the tree ------------------------------------------------------------------------------

local function tracked_files()
    local cmd = "cd '" .. root .. "' && git ls-files -co --exclude-standard -- "
                .. "'*.c' '*.h' '*.lua' 2>/dev/null"
    local p = assert(io.popen(cmd))
    local files = {}
    for f in p:lines() do
        if not f:match("^tests/fuzz/corpus/") then files[#files + 1] = f end
    end
    p:close()
    return files
end

local function generated(src)
    local head = src:sub(1, 400)
    return head:find("Generated by", 1, true) ~= nil or head:find("generated by", 1, true) ~= nil
end

local function load_allow()
    local allow, order = {}, {}
    local s = read(allow_path)
    if not s then return allow, order end
    for n, line in ipairs(lines_of(s)) do
        if line:match("%S") and not line:match("^%s*#") then
            local path, name, len = line:match("^(%S+)%s+(%S+)%s+(%d+)%s*$")
            if not path then
                io.stderr:write(string.format("%s:%d: not `path name lines`: %s\n",
                                              allow_path, n, line))
                os.exit(2)
            end
            local key = path .. " " .. name
            allow[key] = tonumber(len)
            order[#order + 1] = key
        end
    end
    return allow, order
end

local function main()
    local allow, order = load_allow()
    local warnings, failures, seen = {}, {}, {}
    local files = tracked_files()
    if #files == 0 then
        io.stderr:write("check-function-length: no files (not a git checkout?)\n")
        os.exit(2)
    end
    for _, f in ipairs(files) do
        local src = read(root .. "/" .. f)
        if src and not generated(src) then
            local fns = f:match("%.lua$") and lua_functions(src) or c_functions(src)
            for _, fn in ipairs(fns) do
                local len, key = fn.last - fn.first + 1, f .. " " .. fn.name
                if len > WARN then
                    local where = string.format("%s:%d %s: %d lines", f, fn.first, fn.name, len)
                    if len > FAIL then
                        seen[key] = math.max(seen[key] or 0, len)
                        if not allow[key] then
                            failures[#failures + 1] = where .. string.format(
                                " (over %d: split it, or list it in the allow-list)", FAIL)
                        end
                    else
                        warnings[#warnings + 1] = where
                    end
                end
            end
        end
    end
    for _, key in ipairs(order) do
        if not seen[key] then
            failures[#failures + 1] = string.format(
                "%s: %s is no longer over %d lines (or gone): delete its line", allow_path,
                key, FAIL)
        elseif seen[key] > allow[key] then
            failures[#failures + 1] = string.format(
                "%s: grew from %d to %d lines (the allow-list only shrinks: split it)", key,
                allow[key], seen[key])
        elseif seen[key] < allow[key] then
            warnings[#warnings + 1] = string.format(
                "%s: %d lines, listed at %d: lower its line in %s", key, seen[key],
                allow[key], allow_path)
        end
    end
    for _, w in ipairs(warnings) do print("warning: " .. w) end
    for _, e in ipairs(failures) do io.stderr:write("FAIL: ", e, "\n") end
    local over = 0
    for _ in pairs(seen) do over = over + 1 end
    print(string.format("check-function-length: %d files, %d functions over %d lines, %d over %d "
                        .. "(%d allowed), %d failures", #files, #warnings, WARN, over, FAIL,
                        #order, #failures))
    os.exit(#failures == 0 and 0 or 1)
end

main()
