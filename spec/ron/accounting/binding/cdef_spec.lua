-- The Lua cdef and the header agree (STYLE.md rule 2): the committed cdef.lua is exactly
-- what tools/gen-cdef.sh prints today, it parses in LuaJIT, and the library exports every
-- function it declares with the constants it declares.
local S = require("support")
local ffi = require("ffi")

describe("ron.accounting.binding.cdef", function()
    local committed_path = S.root .. "lua/ron/accounting/binding/cdef.lua"

    local function generate(cc)
        local env = cc and ("CC=" .. S.shell_quote(cc) .. " ") or ""
        local out, rc = S.run(env .. "sh " .. S.shell_quote(S.root .. "tools/gen-cdef.sh"))
        assert.equal(0, rc, out)
        return out
    end

    it("is current: the committed file equals a fresh generation (run `make cdef`)", function()
        local fresh = generate()
        local committed = S.read_file(committed_path)
        if fresh ~= committed then
            -- Name the first differing line so the failure says what changed.
            local n, a_line, b_line = 0, nil, nil
            local a_it, b_it = committed:gmatch("([^\n]*)\n"), fresh:gmatch("([^\n]*)\n")
            repeat
                n = n + 1
                a_line, b_line = a_it(), b_it()
            until a_line ~= b_line
            assert.is_true(false, ("lua/ron/accounting/binding/cdef.lua is stale (run `make cdef`): line %d is %q, "
                   .. "the header gives %q"):format(n, tostring(a_line), tostring(b_line)))
        end
    end)

    it("does not depend on the preprocessor", function()
        local gcc = S.run("command -v gcc")
        local clang = S.run("command -v clang")
        if gcc == "" or clang == "" then
            pending("needs both gcc and clang")
            return
        end
        assert.equal(generate("gcc"), generate("clang"))
    end)

    it("keeps the header's declarations: every function, no RA_EXTERN, no macros", function()
        local text = S.read_file(committed_path)
        local header = S.read_file(S.root .. "include/ron/accounting.h")
        local region = header:match("/%* RA_CDEF_BEGIN %*/(.-)/%* RA_CDEF_END %*/")
        assert.is_string(region)
        local declared = {}
        for name in region:gmatch("RA_EXTERN[^;]-[%s%*](ra_[%w_]+)%s*%(") do
            declared[#declared + 1] = name
        end
        assert.is_true(#declared > 30)
        local gen = dofile(committed_path)
        assert.same(declared, gen.functions)
        assert.is_nil(text:find("RA_EXTERN", 1, true))
        assert.is_nil(text:find("RA_ERRNO_MAP", 1, true))
        assert.is_nil(text:find("#", 1, true))
        assert.equal(header:match('#define RA_VERSION_STRING "([^"]+)"'), gen.version)
    end)

    it("parses in LuaJIT and matches the library", function()
        -- The module has been loaded by ron.accounting; declared types are usable.
        local acct = require("ron.accounting")
        assert.equal(16, ffi.sizeof("ra_tenant_t"))
        assert.equal(16, ffi.sizeof("ra_subject_t"))
        assert.equal(24, ffi.sizeof("ra_slice_id_t"))
        local C = require("ron.accounting.binding.lib").namespace()
        for _, name in ipairs(require("ron.accounting.binding.cdef").functions) do
            assert.is_not_nil(C[name], name)
        end
        -- The enum the X-macro generated carries the values the library uses.
        for code = C.RA_ERRNO_MIN, -1 do
            local name = ffi.string(C.ra_err_name(code))
            assert.not_equal("Unknown", name)
        end
        assert.equal("CapacityExceeded", ffi.string(C.ra_err_name(C.RA_ECAPACITY)))
        assert.equal("BufferTooSmall", ffi.string(C.ra_err_name(C.RA_EBUFSIZE)))
        assert.equal("Unknown", ffi.string(C.ra_err_name(C.RA_ERRNO_MIN - 1)))
        assert.equal(300, C.RA_WINDOW_DEFAULT_S)
        assert.is_string(acct.version())
    end)

    it("documents the defaults ra_config_init applies", function()
        local acct = require("ron.accounting")
        local C = require("ron.accounting.binding.lib").namespace()
        local cfg = ffi.new("ra_config_t")
        C.ra_config_init(cfg)
        local d = acct.DEFAULTS
        assert.equal(cfg.window_len_s, d.window_len_s)
        assert.equal(cfg.shards, d.shards)
        assert.equal(cfg.capacity_rows, d.capacity_rows)
        assert.equal(cfg.pending_slices_cap, d.pending_slices_cap)
        assert.equal(cfg.amnesia ~= 0, d.amnesia)
        assert.equal(0, cfg.n_dimensions)
        assert.same({}, d.dimensions)
    end)
end)
