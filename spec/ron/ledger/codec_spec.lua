-- ron.ledger.codec: the engine's records keep their bytes (recover() reads back what an
-- older binary wrote) while the encoder gets faster (issue 25: the headers made once, keys
-- of one type sorted without a Lua comparator). The reference below is the encoder as it
-- was before those changes, kept verbatim: every generated value must encode to the same
-- bytes and decode back.
local ffi = require("ffi")
local codec = require("ron.ledger.codec")

local int64_t = ffi.typeof("int64_t")

local function key_less(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    return a < b
end

local function ref_put(v, out, n)
    local t = type(v)
    if v == nil then n = n + 1; out[n] = "n"
    elseif t == "boolean" then n = n + 1; out[n] = v and "t" or "f"
    elseif t == "number" then n = n + 1; out[n] = string.format("d%.17g;", v)
    elseif t == "cdata" and ffi.istype(int64_t, v) then
        n = n + 1
        out[n] = "i" .. tostring(v):gsub("LL$", "") .. ";"
    elseif t == "string" then
        out[n + 1], out[n + 2] = string.format("s%d:", #v), v
        n = n + 2
    elseif t == "table" then
        local keys, nk = {}, 0
        for k in pairs(v) do
            nk = nk + 1
            keys[nk] = k
        end
        if nk > 1 then table.sort(keys, key_less) end
        n = n + 1
        out[n] = string.format("T%d:", nk)
        for i = 1, nk do
            local k = keys[i]
            n = ref_put(k, out, n)
            n = ref_put(v[k], out, n)
        end
    end
    return n
end
local function ref_encode(v)
    local out = {}
    ref_put(v, out, 0)
    return table.concat(out)
end

-- A value of depth at most d from the generator's random stream.
local function gen_str(rnd)
    local n = rnd(0, 40)
    if rnd(1, 50) == 1 then n = rnd(4090, 4200) end -- past the header cache
    local b = {}
    for i = 1, n do b[i] = string.char(rnd(0, 255)) end
    return table.concat(b)
end
local gen
local function gen_key(rnd)
    if rnd(1, 2) == 1 then return rnd(-5, 300) end
    return gen_str(rnd):sub(1, rnd(0, 12))
end
function gen(rnd, d)
    local k = rnd(1, d > 0 and 8 or 6)
    if d <= 0 and k > 6 then k = 5 end
    if k == 1 then return rnd(1, 2) == 1
    elseif k == 2 then return rnd(-1e9, 1e9)
    elseif k == 3 then return rnd(-1e6, 1e6) / 7
    elseif k == 4 then return int64_t(rnd(-1e9, 1e9)) * 1000003
    elseif k <= 6 then return gen_str(rnd)
    end
    local t, shape = {}, rnd(1, 3)
    -- (a long array, past the header cache, holds scalars only: bounded work)
    local long = shape == 1 and rnd(1, 20) == 1
    local n = long and rnd(4097, 4200) or rnd(0, 12)
    for i = 1, n do
        if shape == 1 then t[i] = gen(rnd, long and 0 or d - 1) -- an array (one key type)
        elseif shape == 2 then t[gen_str(rnd):sub(1, 10)] = gen(rnd, d - 1) -- string keys
        else t[gen_key(rnd)] = gen(rnd, d - 1) end -- mixed
    end
    return t
end

-- the generator's stream for a case, its seed printed
local function seeded(name, seed)
    print(("%s: seed %d"):format(name, seed))
    math.randomseed(seed)
    return math.random
end

describe("ron.ledger.codec", function()
    it("encodes every generated value as the reference encoder did, and decodes it back",
       function()
        local seed = 25
        local rnd = seeded("codec_spec", seed)
        for round = 1, 300 do
            local v = gen(rnd, 3)
            local got, want = codec.encode(v), ref_encode(v)
            assert(got == want, ("seed %d round %d: bytes differ"):format(seed, round))
            assert.are.same(want, codec.encode(codec.decode(got)))
        end
    end)

    it("encodes a fixed shape's fields (encode_fields) as encode does the table of them; a "
       .. "transfer event's data as before", function()
        local events = require("ron.ledger.events")
        local seed = 2025
        local rnd = seeded("codec_spec encode_fields", seed)
        local names = { "body_hash", "created_at_ms", "intent", "keys", "kind", "target" }
        for round = 1, 300 do
            local x = {}
            for _, k in ipairs(names) do
                if rnd(1, 3) > 1 then x[k] = gen(rnd, 1) end
            end
            x.unrelated = "not a field"
            local t = {}
            for _, k in ipairs(names) do t[k] = x[k] end
            assert(codec.encode_fields(names, x) == ref_encode(t),
                   ("seed %d round %d: bytes differ"):format(seed, round))
            assert(events.transfer_data(x) == ref_encode(t))
        end
        assert.are.equal("T0:", codec.encode_fields(names, {}))
    end)

    -- A request's body as requests come (the engine's body hash when the caller gives
    -- none), and odd ones: a movement with another field or one missing, an asset with a
    -- third field, movements with holes, extra keys, a map, a scalar; any field absent.
    local function gen_asset(rnd)
        local a = { code = rnd(1, 5) == 1 and int64_t(7) or "USD", scale = rnd(0, 6) }
        local odd = rnd(1, 12)
        if odd == 1 then a.extra = gen(rnd, 0) elseif odd == 2 then a.scale = nil end
        return a
    end
    local function gen_movement(rnd)
        local m = { from = gen_str(rnd):sub(1, 16), to = gen_str(rnd):sub(1, 16),
                    asset = gen_asset(rnd),
                    amount = rnd(1, 3) == 1 and int64_t(rnd(1, 1e9)) * 1000003 or rnd(1, 1e9) }
        local odd = rnd(1, 15)
        if odd == 1 then m.note = gen(rnd, 1) elseif odd == 2 then m.to = nil
        elseif odd == 3 then m.asset = gen(rnd, 1) end
        return m
    end
    local function gen_movements(rnd)
        local odd = rnd(1, 12)
        if odd == 1 then return gen(rnd, 2) end
        local l = {}
        for i = 1, (odd == 2 and rnd(60, 80) or rnd(0, 4)) do l[i] = gen_movement(rnd) end
        if odd == 3 then l.extra = true elseif odd == 4 and #l > 2 then l[2] = nil
        elseif odd == 5 and #l > 2 then l[2], l.x = nil, true end -- (#l may stay: a hole)
        return l
    end
    local function maybe(rnd, v) if rnd(1, 4) > 1 then return v end end

    it("encodes a request's body (encode_body) as encode does the table of its fields",
       function()
        local seed = 2603
        local rnd = seeded("codec_spec encode_body", seed)
        for round = 1, 1000 do
            local kind = maybe(rnd, rnd(1, 2) == 1 and "commit" or "reverse")
            local meta = maybe(rnd, rnd(1, 8) == 1 and gen(rnd, 1) or gen_str(rnd))
            local mvs = maybe(rnd, gen_movements(rnd))
            local od = maybe(rnd, rnd(1, 2) == 1 and { [gen_str(rnd)] = gen_str(rnd) } or nil)
            local target = maybe(rnd, rnd(1, 6) == 1 and gen(rnd, 1) or gen_str(rnd))
            local want = ref_encode { kind = kind, metadata = meta, movements = mvs,
                                      overdraft = od, target = target }
            assert(codec.encode_body(kind, meta, mvs, od, target) == want,
                   ("seed %d round %d: bytes differ"):format(seed, round))
        end
        assert.are.equal("T0:", codec.encode_body())
    end)

    it("sorts mixed keys by type, then value; one-type keys by value", function()
        assert.are.equal("T3:d1;s1:ad2;s1:bs1:at", codec.encode { [1] = "a", [2] = "b", a = true })
        assert.are.equal("T2:s1:at" .. "s1:bf", codec.encode { b = false, a = true })
        assert.are.equal("T2:d-1;s0:d10;s0:", codec.encode { [10] = "", [-1] = "" })
    end)
end)
