-- check-layers.lua ROOT [LIBRONACCT.a]: the C side's walls (docs/ARCHITECTURE.md, module
-- map) hold: nothing includes or calls upward.
--
--   luajit tools/check-layers.lua . build/libronacct_test.a    (ctest lint-layers)
--
-- Includes (every tracked .c/.h under core/ host/ audit/ ledger/ nginx/): a quoted include
-- is resolved the way the build resolves it (the including file's folder, then the
-- component's include directories) and must land in a folder the component may see:
--
--   core/        core/, include/ron/
--   audit/       audit/, include/ron/, and of the core only core/io.h (the one I/O seam,
--                through audit/io.h)
--   ledger/      ledger/, include/ron/
--   nginx/       include/ron/
--   host/lua/    host/lua/, host/host_name.h, include/ron/ -- never host/cli/
--   host/cli/    host/cli/, host/host_name.h, host/lua/modules.h, include/ron/, and of
--                the core only core/wal_reader.h (its read-only scan), never internal.h
--
-- Calls (with the static core library): its objects' undefined symbols against the objects
-- defining them. meter.c is the facade (no other file of the core calls into it), only
-- journal.c and wal_scan.c call the WAL's files (wal.c), and seal.c never does: the
-- rollover hands its batch to the journal through meter.c.

local root, lib = arg[1] or ".", arg[2]

local findings = {}
local function finding(fmt, ...) findings[#findings + 1] = string.format(fmt, ...) end

local function exists(path)
    local f = io.open(root .. "/" .. path, "rb")
    if f then f:close() end
    return f ~= nil
end

local function normalise(path)
    local parts = {}
    for p in path:gmatch("[^/]+") do
        if p == ".." then table.remove(parts) elseif p ~= "." then parts[#parts + 1] = p end
    end
    return table.concat(parts, "/")
end

-- Per component: where its quoted includes are searched (after the file's own folder), and
-- which resolved paths it may include (Lua patterns).
local RULES = {
    { "^core/", { "core", "include" }, { "^core/", "^include/ron/" } },
    { "^audit/", { "audit", "include" }, { "^audit/", "^include/ron/", "^core/io%.h$" } },
    { "^ledger/", { "ledger", "include" }, { "^ledger/", "^include/ron/" } },
    { "^nginx/", { "include" }, { "^include/ron/" } },
    { "^host/lua/", { "host", "core", "include" },
      { "^host/lua/", "^host/host_name%.h$", "^include/ron/" } },
    { "^host/cli/", { "host", "core", "include" },
      { "^host/cli/", "^host/host_name%.h$", "^host/lua/modules%.h$", "^include/ron/",
        "^core/wal_reader%.h$" } },
}

local function rule_of(file)
    for _, r in ipairs(RULES) do
        if file:match(r[1]) then return r end
    end
end

local function check_includes()
    local p = assert(io.popen("cd '" .. root .. "' && git ls-files -co --exclude-standard -- "
                              .. "'core/*.[ch]' 'audit/*.[ch]' 'ledger/*.[ch]' 'nginx/*.[ch]' "
                              .. "'host/*.[ch]'"))
    local n = 0
    for file in p:lines() do
        local r = rule_of(file)
        local f = r and io.open(root .. "/" .. file, "rb")
        if f then
            n = n + 1
            local ln = 0
            for line in f:lines() do
                ln = ln + 1
                local inc = line:match('^%s*#%s*include%s+"([^"]+)"')
                if inc then
                    local dir = file:match("^(.*)/") or "."
                    local resolved
                    for _, d in ipairs({ dir, unpack(r[2]) }) do
                        local cand = normalise(d .. "/" .. inc)
                        if exists(cand) then resolved = cand break end
                    end
                    if resolved then -- not found: a system or third-party header
                        local ok = false
                        for _, pat in ipairs(r[3]) do ok = ok or resolved:match(pat) ~= nil end
                        if not ok then
                            finding("%s:%d includes %s (%s): outside what %s may see", file, ln,
                                    inc, resolved, r[1]:sub(2))
                        end
                    end
                end
            end
            f:close()
        end
    end
    p:close()
    if n == 0 then finding("no C files found under %s (not a git checkout?)", root) end
end

-- Who may call into an object of the core: the callee's file, and the only callers it may
-- have (besides itself).
local CALLEES = {
    ["meter.c.o"] = {},
    ["wal.c.o"] = { ["journal.c.o"] = true, ["wal_scan.c.o"] = true },
    ["wal_reader.c.o"] = { ["wal.c.o"] = true, ["journal.c.o"] = true },
}
local FORBIDDEN = { ["seal.c.o"] = { ["wal.c.o"] = true, ["wal_reader.c.o"] = true } }

local function check_calls()
    local p = assert(io.popen("nm -A '" .. lib .. "' 2>/dev/null"))
    local defined, wants = {}, {}
    for line in p:lines() do
        -- lib.a:member.o:<value> T name   or   lib.a:member.o:                 U name
        local member, kind, sym = line:match("^[^:]+:([^:]+):%s*%x*%s+(%a)%s+(%S+)$")
        if member then
            if kind == "U" then
                wants[member] = wants[member] or {}
                wants[member][sym] = true
            elseif kind == "T" or kind == "D" or kind == "B" or kind == "R" then
                defined[sym] = member
            end
        end
    end
    p:close()
    if not next(defined) then
        finding("%s: no symbols (nm failed, or not the core's static library)", lib)
        return
    end
    for caller, syms in pairs(wants) do
        for sym in pairs(syms) do
            local callee = defined[sym]
            if callee and callee ~= caller then
                local only = CALLEES[callee]
                if only and not only[caller] then
                    finding("core: %s calls %s (%s): upward, or around the layer that owns it",
                            caller:gsub("%.o$", ""), sym, callee:gsub("%.o$", ""))
                elseif FORBIDDEN[caller] and FORBIDDEN[caller][callee] then
                    finding("core: %s calls %s (%s)", caller:gsub("%.o$", ""), sym,
                            callee:gsub("%.o$", ""))
                end
            end
        end
    end
end

check_includes()
if lib then check_calls() end
table.sort(findings)
for _, f in ipairs(findings) do io.stderr:write("FAIL: ", f, "\n") end
print(string.format("check-layers: %d findings", #findings))
os.exit(#findings == 0 and 0 or 1)
