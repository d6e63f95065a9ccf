-- ron.base.heap: the malloc policy that keeps SQLite's per-statement memory off brk (issue 25).
-- Each case runs in a child luajit (a fresh heap and a fresh policy: this process has
-- opened SQLite stores already) and reports whether freeing 768 KiB at the heap's top gave
-- it back to the kernel (sbrk(0) moved down).
local S = require("support")
local ffi = require("ffi")

local PROBE = [[
package.path = %q
local ffi = require("ffi")
ffi.cdef "void *malloc(size_t); void free(void *); void *sbrk(intptr_t);"
%s
local C, ps = ffi.C, {}
for i = 1, 8 do ps[i] = C.malloc(96 * 1024) end
local top = ffi.cast("intptr_t", C.sbrk(0))
for i = 8, 1, -1 do C.free(ps[i]) end
print(ffi.cast("intptr_t", C.sbrk(0)) < top and "trimmed" or "kept")
]]

local function probe(setup)
    local path = S.tmp_file(PROBE:format(package.path, setup))
    local p = assert(io.popen("luajit " .. path .. " 2>&1"))
    local out = p:read("*a")
    p:close()
    os.remove(path)
    return (out:gsub("%s+$", ""))
end

pcall(ffi.cdef, "int mallopt(int param, int value);")

describe("ron.base.heap", function()
    if not pcall(function() return ffi.C.mallopt end) then
        pending("not glibc: no mallopt")
        return
    end

    it("glibc's default gives a freed heap top back at once (the probe can fail)", function()
        assert.equal("trimmed", probe(""))
    end)

    it("keep(): freed memory stays at the heap's top for the next statement", function()
        assert.equal("kept", probe('assert(require("ron.base.heap").keep())'))
    end)

    it("a SQLite store applies it when it opens", function()
        local db = S.tmpname(".sqlite")
        assert.equal("kept", probe(string.format(
            'local s = assert(require("ron.ledger.store").open { backend = "sqlite", '
            .. 'path = %q }) s:close()', db)))
        for _, x in ipairs { "", "-wal", "-shm" } do os.remove(db .. x) end
    end)
end)
