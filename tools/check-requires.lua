-- check-requires.lua ROOT: the Lua packages depend one way (docs/ARCHITECTURE.md, STYLE.md rule 9).
--
--   luajit tools/check-requires.lua .            (ctest lint-requires, `make lint`)
--
-- Reads every `require("ron.…")` of lua/ron/ (also `require("…")` and `pcall(require, "…")`)
-- with a small Lua tokenizer and checks two rules:
--
--   direction  a package requires only itself and the packages below it:
--                base        <- accounting, audit (the meter; the audit trail)
--                ledger      -> base, audit, and the meter's published export contract only
--                               (CONTRACT below: the slice binding, the exporter statuses, the
--                               accepted-loss records, the chain-admission rule)
--                wallet      -> ledger, base
--                node        -> every package (the daemon composing them)
--              and the meter's package never requires the systems built on it.
--   top level  a require sits at the top of its file, never inside a function (a require
--              in a function to dodge a cycle is a cycle); the exceptions are listed in
--              INSIDE below with their reason, and the list may only shrink.
--
-- The compatibility stubs (ron.accounting.compat forwards an old name through a require of
-- a variable) are not literal requires and so not checked; they go in one release.
local root = arg[1] or "."

local function sh(cmd)
    local p = io.popen(cmd)
    local out = {}
    for l in p:lines() do out[#out + 1] = l end
    p:close()
    return out
end

-- package of a module name or of a file under lua/
local function package_of(name)
    if name == "ron.accounting" then return "accounting" end
    return name:match("^ron%.([%w_]+)")
end

local ALLOWED = {
    base = { base = true },
    accounting = { accounting = true, base = true },
    audit = { audit = true, base = true },
    ledger = { ledger = true, base = true, audit = true },
    wallet = { wallet = true, ledger = true, base = true },
    node = { node = true, base = true, accounting = true, audit = true, ledger = true,
             wallet = true },
}

-- The meter's published export contract: what the ledger may use of ron.accounting.
local CONTRACT = {
    ["ron.accounting"] = "the slice binding (decode, the slice's fields)",
    ["ron.accounting.export.exporters"] = "the exporter contract (statuses, capabilities)",
    ["ron.accounting.export.loss"] = "the accepted-loss records",
    ["ron.accounting.export.chain"] = "the chain-admission rule (ok/dup/conflict/gap)",
}

-- Requires allowed inside a function: file -> { [module] = reason }. May only shrink (the
-- optional systems and the host's C modules load at the top under pcall).
local INSIDE = {
    -- the threadpool's VMs load this module for its offloaded driver (a pool body requires
    -- it there); the loop-side proxy alone needs the scheduler, which a pool VM must not
    -- load (its module creates handles on the loop)
    ["lua/ron/ledger/store/sqlite_off.lua"] = {
        ["ron.base.task"] = "loaded by the threadpool's VMs too",
    },
}

-- the Lua tokenizer the tools share (names, strings, operators), beside this script
local tokens = dofile((arg[0]:match("^(.*/)") or "./") .. "lua_lex.lua").tokens

-- { { name =, line =, in_function = bool }, ... }: the literal requires of a source.
local function requires(src)
    local toks = tokens(src)
    local stack, expect_do, found = {}, 0, {}
    local fdepth = 0
    local function push(kind)
        stack[#stack + 1] = kind
        if kind == "function" then fdepth = fdepth + 1 end
    end
    local function pop()
        local k = table.remove(stack)
        if k == "function" then fdepth = fdepth - 1 end
    end
    for k, tk in ipairs(toks) do
        local prev = toks[k - 1]
        local is_field = prev and prev.t == "op" and (prev.v == "." or prev.v == ":")
        if tk.t == "name" and not is_field then
            local v = tk.v
            if v == "function" or v == "if" or v == "repeat" then
                push(v)
            elseif v == "while" or v == "for" then
                push("loop")
                expect_do = expect_do + 1
            elseif v == "do" then
                if expect_do > 0 then expect_do = expect_do - 1 else push("do") end
            elseif v == "end" or v == "until" then
                pop()
            elseif v == "require" then
                local a, b = toks[k + 1], toks[k + 2]
                local name
                if a and a.t == "string" then
                    name = a.v
                elseif a and a.v == "(" and b and b.t == "string" then
                    name = b.v
                elseif a and a.v == "," and b and b.t == "string" then -- pcall(require, "x")
                    name = b.v
                end
                if name and name:match("^ron[%.]") or name == "ron" then
                    found[#found + 1] = { name = name, line = tk.line, in_function = fdepth > 0 }
                end
            end
        end
    end
    return found
end

-- ---- the check ------------------------------------------------------------------------------

local findings, n_req, n_inside = {}, 0, 0
local function finding(fmt, ...) findings[#findings + 1] = string.format(fmt, ...) end

local files = sh("cd '" .. root .. "' && find lua/ron -name '*.lua' | sort")
for _, file in ipairs(files) do
    local f = assert(io.open(root .. "/" .. file, "rb"))
    local src = f:read("*a")
    f:close()
    local mod = file:gsub("^lua/", ""):gsub("/init%.lua$", ""):gsub("%.lua$", ""):gsub("/", ".")
    local from = package_of(mod)
    local ok, list = pcall(requires, src)
    if not ok then
        finding("%s: cannot read: %s", file, tostring(list))
        list = {}
    end
    for _, r in ipairs(list) do
        n_req = n_req + 1
        local to = package_of(r.name)
        if not ALLOWED[from] then
            finding("%s: the package %s is not in the layering (tools/check-requires.lua)",
                    file, tostring(from))
        elseif not to or not ALLOWED[from][to] and not (from == "ledger" and CONTRACT[r.name]) then
            finding("%s:%d: %s (package %s) requires %s (package %s): against the direction "
                    .. "of the layering%s", file, r.line, mod, from, r.name, tostring(to),
                    from == "ledger" and to == "accounting"
                    and " (the ledger uses the meter's export contract only)" or "")
        end
        if r.in_function then
            n_inside = n_inside + 1
            local allow = INSIDE[file] and INSIDE[file][r.name]
            if not allow then
                finding("%s:%d: require \"%s\" inside a function: require at the top of the "
                        .. "file (a require in a function to dodge a cycle is a cycle)", file,
                        r.line, r.name)
            end
        end
    end
end

for _, f in ipairs(findings) do io.stderr:write(f, "\n") end
io.write(string.format("check-requires: %d files, %d requires (%d inside functions); "
                       .. "%d findings\n", #files, n_req, n_inside, #findings))
os.exit(#findings == 0 and 0 or 1)
