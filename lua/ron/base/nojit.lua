-- ron.base.nojit: require a module with LuaJIT's trace compiler off for it and for every
-- module under the given name prefixes that it (or anything later) loads in this VM.
--
--   local m = require("ron.base.nojit").require("ron.ledger.store.sqlite",
--                                               { "ron.ledger.store." },
--                                               { "ron.ledger.store.sql_rows" }) -- (except)
--
-- Each chunk found on package.path under a prefix is loaded with jit.off(chunk, true): every
-- function it defines, now or later, runs in the interpreter. For the libuv pool's Lua VMs
-- (the offloaded SQLite store, ron.ledger.store.sqlite): each pool thread's VM compiled its
-- own traces of the same code, most of which aborted, and every compile made that VM's
-- machine code writable and executable again with two mprotect calls, each a TLB shootdown
-- across the process's threads (issue 25, docs/WALLET.md §8). The modules named in the
-- third list keep the JIT although a prefix covers them: code of few, long loops whose
-- traces are made once (the store's per-row code, whose every bind and check costs the
-- interpreter ~0.2 us). Without LuaJIT's jit module (plain Lua) this is require.
local loaders = package.loaders -- (LuaJIT and Lua 5.1; 5.2+ calls it searchers)

local _M = {}

-- prefix -> true, and module name -> true for the exceptions, for this VM (the searcher
-- below reads them)
local prefixes, except = {}, {}
local installed = false

local function under(name)
    if except[name] then return false end
    for p in pairs(prefixes) do
        if name:sub(1, #p) == p then return true end
    end
    return false
end

local function install()
    if installed or not jit then return end
    installed = true
    local search_path = loaders[2] -- Lua files on package.path
    table.insert(loaders, 2, function(name)
        if not under(name) then return nil end
        local chunk = search_path(name)
        if type(chunk) == "function" then jit.off(chunk, true) end
        return chunk
    end)
end

function _M.require(name, under_prefixes, except_names)
    for _, p in ipairs(under_prefixes or {}) do prefixes[p] = true end
    for _, n in ipairs(except_names or {}) do except[n] = true end
    prefixes[name] = true
    install()
    return require(name)
end

return _M
