-- The Lua tokenizer the tools' checks share (check-requires.lua, check-function-length.lua).
-- Loaded with dofile from beside the script (the tools run before the package is on any path):
--   local lex = dofile((arg[0]:match("^(.*/)") or "./") .. "lua_lex.lua")
--
-- lex.tokens(src) -> { { t = "name" | "string" | "op", v = text, line = n }, ... }: names and
-- keywords, strings (v their contents, escapes left as written; long brackets too) and
-- operators (`==`, `~=`, `<=`, `>=`, `..` and `...` as one; every other symbol alone).
-- Comments, white space and numbers are skipped. line: where the token starts.
local M = {}

local OPS2 = { ["=="] = true, ["~="] = true, ["<="] = true, [">="] = true, [".."] = true }

-- The long bracket ([[, [=[, ...) opening at `at`: its end and body; nil when none opens.
local function long_bracket(src, at, line)
    local eq = src:match("^%[(=*)%[", at)
    if not eq then return nil end
    local close = "]" .. eq .. "]"
    local s, e = src:find(close, at + #eq + 2, true)
    if not s then error("unfinished long bracket at line " .. line) end
    return e, src:sub(at + #eq + 2, s - 1)
end

-- The quoted string opening at i (quote q). -> the index of its closing quote, its body, the
-- newlines in it
local function quoted(src, i, q)
    local j, buf, n, nl = i + 1, {}, #src, 0
    while j <= n do
        local d = src:sub(j, j)
        if d == "\\" then
            buf[#buf + 1] = src:sub(j, j + 1)
            j = j + 2
        elseif d == q then
            break
        else
            if d == "\n" then nl = nl + 1 end
            buf[#buf + 1] = d
            j = j + 1
        end
    end
    return j, table.concat(buf), nl
end

local function newlines(s)
    local _, nl = s:gsub("\n", "")
    return nl
end

function M.tokens(src)
    local out, i, n, line = {}, 1, #src, 1
    while i <= n do
        local c = src:sub(i, i)
        if c == "\n" then
            line, i = line + 1, i + 1
        elseif c:match("%s") then
            i = i + 1
        elseif src:sub(i, i + 1) == "--" then
            local e, body = long_bracket(src, i + 2, line)
            if e then
                line, i = line + newlines(body), e + 1
            else
                i = src:find("\n", i, true) or n + 1
            end
        elseif c == '"' or c == "'" then
            local j, body, nl = quoted(src, i, c)
            out[#out + 1] = { t = "string", v = body, line = line }
            line, i = line + nl, j + 1
        elseif c == "[" and src:match("^%[=*%[", i) then
            local e, body = long_bracket(src, i, line)
            out[#out + 1] = { t = "string", v = body, line = line }
            line, i = line + newlines(body), e + 1
        elseif c:match("[%a_]") then
            local w = src:match("^[%w_]+", i)
            out[#out + 1] = { t = "name", v = w, line = line }
            i = i + #w
        elseif c:match("%d") or (c == "." and src:match("^%.%d", i)) then
            i = i + #src:match("^[%w_%.]+", i)
        else
            local op = src:sub(i, i + 2) == "..." and "..."
                       or (OPS2[src:sub(i, i + 1)] and src:sub(i, i + 1)) or c
            out[#out + 1] = { t = "op", v = op, line = line }
            i = i + #op
        end
    end
    return out
end

return M
