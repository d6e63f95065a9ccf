-- ron.ledger: thin Lua wrappers over libronledger, the ledger's pure core
-- (include/ron/ledger.h, docs/LEDGER.md). Values are plain Lua tables; each call converts
-- them into cdata scratch allocated once per module (lua-resty-core style) and back.
--
--   asset     { code = "USD", scale = 2 }
--   account   { id = <16-byte string>, version = n, policy = "no_overdraft"|"capped"|
--               "uncapped", floor = n (capped only, <= 0), status = "open"|"frozen"|"closed" }
--   posting   { id = { transfer_id = <32 bytes>, index = n }, account = <16 bytes>,
--               asset = asset, amount = n, status = "active"|"pending_inactive"|"inactive" }
--   transfer  { inputs = { {transfer_id =, index =}, ... } (ascending), outputs =
--               { {account =, asset =, amount =}, ... }, pins = { {account =, version =},
--               ... } (ascending by account), metadata = "" (optional), intent = "..." }
--   balance   { account =, asset =, amount = }
--
-- Amounts are exact integers (LED-4): a Lua number that is an integer of at most 2^53 in
-- magnitude, or an int64_t cdata. Results are Lua numbers up to 2^53 and int64_t cdata
-- beyond. Misuse (a wrong type, a missing field) raises; a refusal by the core returns
-- nil, "Name: message", code (code = the negative RL_E* value, ERR maps names to codes).
local ffi = require("ffi")
local C = require("ron.ledger.lib").namespace()
local codes = require("ron.ledger.codes")

local error = error
local ffi_copy = ffi.copy
local ffi_fill = ffi.fill
local ffi_new = ffi.new
local ffi_string = ffi.string
local format = string.format
local tonumber = tonumber
local type = type

local _M = {}

local MAX_INPUTS = C.RL_MAX_INPUTS
local MAX_OUTPUTS = C.RL_MAX_OUTPUTS
local MAX_PINS = C.RL_MAX_PINS
local MAX_INVOLVED = MAX_INPUTS + MAX_OUTPUTS

-- Scratch, once per module.
local buf_cap = C.RL_TRANSFER_ENC_MAX
local buf = ffi_new("uint8_t[?]", buf_cap)
local len_out = ffi_new("size_t[1]")
local asset_s = ffi_new("rl_asset_t")
local account_s = ffi_new("rl_account_t")
local posting_s = ffi_new("rl_posting_t")
local transfer_s = ffi_new("rl_transfer_t")
local inputs = ffi_new("rl_posting_ref_t[?]", MAX_INPUTS)
local outputs = ffi_new("rl_output_t[?]", MAX_OUTPUTS)
local pins = ffi_new("rl_pin_t[?]", MAX_PINS)
local accounts = ffi_new("rl_account_t[?]", MAX_INVOLVED)
local consumed = ffi_new("rl_posting_t[?]", MAX_INPUTS)
local balances = ffi_new("rl_balance_t[?]", MAX_INVOLVED)
local deltas = ffi_new("rl_delta_t[?]", MAX_INVOLVED)
local plan_s = ffi_new("rl_plan_t")
local id_out = ffi_new("uint8_t[32]")
local i64_out = ffi_new("int64_t[3]")
local u32_out = ffi_new("uint32_t[1]")
local acct_id = ffi_new("uint8_t[16]")
local idx_arr = ffi_new("uint32_t[?]", MAX_INPUTS)
local OUTPUT_SIZE, BALANCE_SIZE = ffi.sizeof("rl_output_t"), ffi.sizeof("rl_balance_t")
local POSTING_SIZE, ACCOUNT_SIZE = ffi.sizeof("rl_posting_t"), ffi.sizeof("rl_account_t")

local POLICY, POLICY_NAME = codes.POLICY, codes.POLICY_NAME
local ASTATUS, ASTATUS_NAME = codes.ASTATUS, codes.ASTATUS_NAME
local PSTATUS, PSTATUS_NAME = codes.PSTATUS, codes.PSTATUS_NAME
assert(POLICY.uncapped == C.RL_POLICY_UNCAPPED and ASTATUS.closed == C.RL_ACCOUNT_CLOSED
       and PSTATUS.inactive == C.RL_POSTING_INACTIVE, "ron.ledger.codes: not the header's")

-- Error names → codes, from the library itself (rl_err_name), so they never drift.
_M.ERR = {}
for code = C.RL_ERRNO_MIN, -1 do
    _M.ERR[ffi_string(C.rl_err_name(code))] = code
end

local function fail(rc)
    return nil, ffi_string(C.rl_err_name(rc)) .. ": " .. ffi_string(C.rl_strerror(rc)), rc
end

local function misuse(msg)
    error("ron.ledger: " .. msg, 3)
end

function _M.version() return ffi_string(C.rl_version()) end

-- Bytes as lowercase hex: one format of all the bytes (ids are 16 or 32 bytes; longer
-- strings loop). Not gsub with a callback: its closure and a callback per byte called from
-- C abort every trace through a caller (the wallet's answers, issue 25).
local HEX_MAX = 64
local HEX_FMT = {}
for n = 0, HEX_MAX do HEX_FMT[n] = ("%02x"):rep(n) end
function _M.hex(s)
    local n = #s
    if n <= HEX_MAX then return format(HEX_FMT[n], s:byte(1, n)) end
    local t = {}
    for i = 1, n do t[i] = format("%02x", s:byte(i)) end
    return table.concat(t)
end

-- ---- amounts ----

local TWO53 = 2 ^ 53
local int64_t = ffi.typeof("int64_t")

-- The names in misuse messages: what is a format (its %d the index i) plus a suffix, built
-- only when the message is (building them eagerly cost a few strings per field per call:
-- ~40 per rated slice).
local function label(what, i, suffix)
    return format(what, i) .. (suffix or "")
end

local function to_amount(v, what, i, suffix)
    if type(v) == "number" then
        if v ~= v or v % 1 ~= 0 or v > TWO53 or v < -TWO53 then
            misuse(format("%s: %s is not an exact integer amount", label(what, i, suffix),
                          tostring(v)))
        end
        return v
    end
    if type(v) == "cdata" and ffi.istype(int64_t, v) then return v end
    misuse(format("%s: amount must be an integer number or int64_t, got %s",
                  label(what, i, suffix), type(v)))
end

local function from_amount(v)
    if v <= TWO53 and v >= -TWO53 then return tonumber(v) end
    return int64_t(v)
end
_M.from_amount = from_amount

-- True when r = a + b or a - b of two Lua numbers is exact and what the core would answer:
-- both exact integers within 2^53, and r strictly inside it (a sum past 2^53 rounds to
-- 2^53 or beyond, never below: those go to the core, and from_amount). Then no FFI call
-- for the common amounts (a view's sums on the loop, per payer and request, issue 25).
local function exact(a, b, r)
    return a % 1 == 0 and b % 1 == 0 and a <= TWO53 and a >= -TWO53 and b <= TWO53
           and b >= -TWO53 and r < TWO53 and r > -TWO53
end

function _M.amount_add(a, b)
    if type(a) == "number" and type(b) == "number" and exact(a, b, a + b) then return a + b end
    local rc = C.rl_amount_add(to_amount(a, "a"), to_amount(b, "b"), i64_out)
    if rc ~= 0 then return fail(rc) end
    return from_amount(i64_out[0])
end

function _M.amount_sub(a, b)
    if type(a) == "number" and type(b) == "number" and exact(a, b, a - b) then return a - b end
    local rc = C.rl_amount_sub(to_amount(a, "a"), to_amount(b, "b"), i64_out)
    if rc ~= 0 then return fail(rc) end
    return from_amount(i64_out[0])
end

-- ---- table ↔ cdata ----

local function bytes(dst, s, n, what, i, suffix)
    if type(s) ~= "string" or #s ~= n then
        misuse(format("%s must be a string of %d bytes", label(what, i, suffix), n))
    end
    ffi_copy(dst, s, n)
end

local function put_asset(dst, a, what, i)
    if type(a) ~= "table" or type(a.code) ~= "string" or type(a.scale) ~= "number" then
        misuse(label(what, i) .. ": asset must be { code = string, scale = number }")
    end
    -- An illegal code or scale leaves a zero asset, which the core refuses with a code.
    if C.rl_asset_init(dst, a.code, #a.code, a.scale) ~= 0 then ffi_fill(dst, ffi.sizeof(dst)) end
end

local function get_asset(a)
    local n = 0
    while n < 16 and a.code[n] ~= 0 do n = n + 1 end
    return { code = ffi_string(a.code, n), scale = a.scale }
end

-- The deltas' assets: one table per distinct asset, shared by every plan (a plan's assets
-- are read, never changed; building one per delta was ~5 % of a rated slice's CPU).
local ASSET_SIZE = ffi.sizeof("rl_asset_t")
local assets_seen, n_assets_seen = {}, 0
local function shared_asset(a)
    local k = ffi_string(a, ASSET_SIZE)
    local r = assets_seen[k]
    if r then return r end
    if n_assets_seen >= 1024 then assets_seen, n_assets_seen = {}, 0 end
    r = get_asset(a)
    assets_seen[k], n_assets_seen = r, n_assets_seen + 1
    return r
end

local function enum(map, v, what)
    local n = map[v]
    if n == nil then misuse(format("%s: unknown value %s", what, tostring(v))) end
    return n
end

local function put_account(dst, a)
    if type(a) ~= "table" then misuse("account must be a table") end
    ffi_fill(dst, ACCOUNT_SIZE)
    bytes(dst.id, a.id, 16, "account.id")
    dst.version = a.version or 1
    dst.floor = to_amount(a.floor or 0, "account.floor")
    dst.policy = enum(POLICY, a.policy or "no_overdraft", "account.policy")
    dst.status = enum(ASTATUS, a.status or "open", "account.status")
end

local function get_account(a)
    return {
        id = ffi_string(a.id, 16),
        version = tonumber(a.version),
        floor = from_amount(a.floor),
        policy = POLICY_NAME[a.policy],
        status = ASTATUS_NAME[a.status],
    }
end

local function put_ref(dst, r, what, i)
    if type(r) ~= "table" then misuse(label(what, i) .. " must be a table") end
    bytes(dst.transfer_id, r.transfer_id, 32, what, i, ".transfer_id")
    dst.index = r.index
end

local function get_ref(r)
    return { transfer_id = ffi_string(r.transfer_id, 32), index = tonumber(r.index) }
end

local function put_posting(dst, p)
    if type(p) ~= "table" then misuse("posting must be a table") end
    ffi_fill(dst, POSTING_SIZE)
    put_ref(dst.id, p.id, "posting.id")
    bytes(dst.account, p.account, 16, "posting.account")
    put_asset(dst.asset, p.asset, "posting.asset")
    dst.amount = to_amount(p.amount, "posting.amount")
    dst.status = enum(PSTATUS, p.status or "active", "posting.status")
end

local function get_posting(p)
    return {
        id = get_ref(p.id),
        account = ffi_string(p.account, 16),
        asset = get_asset(p.asset),
        amount = from_amount(p.amount),
        status = PSTATUS_NAME[p.status],
    }
end

-- An (account, asset, amount) row, an output or a balance, into dst (size bytes), from
-- list element i, a table; at: the element's name for the messages ("outputs[%d]").
local function put_amount_row(dst, size, o, at, i)
    if type(o) ~= "table" then misuse(label(at, i) .. " must be a table") end
    ffi_fill(dst, size)
    bytes(dst.account, o.account, 16, at, i, ".account")
    put_asset(dst.asset, o.asset, at, i)
    dst.amount = to_amount(o.amount, at, i, ".amount")
end

local function count(list, max, what)
    list = list or {}
    if type(list) ~= "table" then misuse(what .. " must be an array") end
    -- More than the core accepts: pass max + 1 so that the core refuses it (LED-13).
    return list, #list > max and max + 1 or #list
end

-- Fills transfer_s; the strings it points into (metadata, intent) are kept alive by t.
local function put_transfer(t)
    if type(t) ~= "table" then misuse("transfer must be a table") end
    local ins, n_in = count(t.inputs, MAX_INPUTS, "transfer.inputs")
    local outs, n_out = count(t.outputs, MAX_OUTPUTS, "transfer.outputs")
    local ps, n_pin = count(t.pins, MAX_PINS, "transfer.pins")
    if n_in > MAX_INPUTS or n_out > MAX_OUTPUTS or n_pin > MAX_PINS then
        return C.RL_ELIMIT
    end
    for i = 1, n_in do put_ref(inputs[i - 1], ins[i], "transfer.inputs[%d]", i) end
    for i = 1, n_out do
        put_amount_row(outputs[i - 1], OUTPUT_SIZE, outs[i], "transfer.outputs[%d]", i)
    end
    for i = 1, n_pin do
        local p, d = ps[i], pins[i - 1]
        if type(p) ~= "table" then misuse("transfer.pins[" .. i .. "] must be a table") end
        bytes(d.account, p.account, 16, "transfer.pins[%d]", i, ".account")
        d.version = p.version
    end
    local metadata, intent = t.metadata or "", t.intent
    if type(metadata) ~= "string" then misuse("transfer.metadata must be a string") end
    if type(intent) ~= "string" then misuse("transfer.intent must be a string") end
    transfer_s.inputs, transfer_s.n_inputs = inputs, n_in
    transfer_s.outputs, transfer_s.n_outputs = outputs, n_out
    transfer_s.pins, transfer_s.n_pins = pins, n_pin
    transfer_s.metadata, transfer_s.metadata_len = metadata, #metadata
    transfer_s.intent, transfer_s.intent_len = intent, #intent
    return 0
end

local function get_transfer(t)
    local r = { inputs = {}, outputs = {}, pins = {} }
    for i = 0, t.n_inputs - 1 do r.inputs[i + 1] = get_ref(t.inputs[i]) end
    for i = 0, t.n_outputs - 1 do
        local o = t.outputs[i]
        r.outputs[i + 1] = {
            account = ffi_string(o.account, 16),
            asset = get_asset(o.asset),
            amount = from_amount(o.amount),
        }
    end
    for i = 0, t.n_pins - 1 do
        r.pins[i + 1] = { account = ffi_string(t.pins[i].account, 16),
                          version = tonumber(t.pins[i].version) }
    end
    r.metadata = ffi_string(t.metadata, t.metadata_len)
    r.intent = ffi_string(t.intent, t.intent_len)
    return r
end

-- ---- encodings (LED-1) ----

local function encoded(rc)
    if rc ~= 0 then return fail(rc) end
    return ffi_string(buf, len_out[0])
end

-- encode_<name>(v) -> bytes and decode_<name>(bytes) -> v for the fixed-size records, each
-- through its one reused C struct.
local function record_codec(name, s, put, get, enc, dec)
    _M["encode_" .. name] = function(v)
        put(s, v, name)
        return encoded(enc(s, buf, buf_cap, len_out))
    end
    _M["decode_" .. name] = function(b)
        local rc = dec(b, #b, s)
        if rc ~= 0 then return fail(rc) end
        return get(s)
    end
end
record_codec("asset", asset_s, put_asset, get_asset, C.rl_asset_encode, C.rl_asset_decode)
record_codec("account", account_s, put_account, get_account, C.rl_account_encode,
             C.rl_account_decode)
record_codec("posting", posting_s, put_posting, get_posting, C.rl_posting_encode,
             C.rl_posting_decode)

function _M.encode_transfer(t)
    local rc = put_transfer(t)
    if rc ~= 0 then return fail(rc) end
    return encoded(C.rl_transfer_encode(transfer_s, buf, buf_cap, len_out))
end

function _M.decode_transfer(s)
    if type(s) ~= "string" then misuse("decode_transfer: bytes must be a string") end
    local rc = C.rl_transfer_decode(s, #s, transfer_s, inputs, MAX_INPUTS, outputs, MAX_OUTPUTS,
                                    pins, MAX_PINS)
    if rc ~= 0 then return fail(rc) end
    return get_transfer(transfer_s)
end

-- The content id (LED-2): 32 raw bytes (ledger.hex() for display).
function _M.transfer_id(t)
    local rc = put_transfer(t)
    if rc == 0 then rc = C.rl_transfer_id(transfer_s, id_out) end
    if rc ~= 0 then return fail(rc) end
    return ffi_string(id_out, 32)
end

-- ---- selection (LED-10) ----

local select_cap = 0
local select_arr
local select_pos = {}

-- Returns { 1-based positions in pick order }, sum, change; or nil, err, code, sum (the
-- sum available when the code is InsufficientFunds).
function _M.select_postings(postings, account, asset, target, max_picks)
    if type(postings) ~= "table" then misuse("select_postings: postings must be an array") end
    local n = #postings
    if n > C.RL_SELECT_MAX then return fail(C.RL_ELIMIT) end
    if n > select_cap then -- grows, never shrinks: bounded by RL_SELECT_MAX in the core
        select_cap = n
        select_arr = ffi_new("rl_posting_t[?]", n)
    end
    -- Only what the core could pick crosses the FFI: a posting of a number amount <= 0 is
    -- never eligible (an uncapped source or a receivable holds pages of them: 32 postings
    -- marshalled per payer per transfer for nothing). pos maps back to 1-based positions.
    local m = 0
    for i = 1, n do
        local p = postings[i]
        if not (type(p) == "table" and type(p.amount) == "number" and p.amount <= 0) then
            put_posting(select_arr[m], p)
            select_pos[m] = i
            m = m + 1
        end
    end
    bytes(acct_id, account, 16, "select_postings: account")
    put_asset(asset_s, asset, "select_postings")
    local cap = max_picks or MAX_INPUTS
    if cap > MAX_INPUTS then misuse("select_postings: max_picks over RL_MAX_INPUTS") end
    local rc = C.rl_select_postings(select_arr, m, acct_id, asset_s, to_amount(target, "target"),
                                    idx_arr, cap, u32_out, i64_out, i64_out + 1)
    if rc ~= 0 then
        local a, b, c = fail(rc)
        return a, b, c, from_amount(i64_out[0])
    end
    local picks = {}
    for i = 0, u32_out[0] - 1 do picks[i + 1] = select_pos[idx_arr[i]] end
    return picks, from_amount(i64_out[0]), from_amount(i64_out[1])
end

-- ---- validation (LED-5..LED-9, LED-12) ----

-- Returns { transfer_id = <32 bytes>, deltas = { {account, asset, before, debit, credit,
-- after}, ... } } or nil, err, code.
-- with_bytes: also plan.bytes, t's canonical encoding (the transfer the core just read: one
-- marshalling instead of a second one through encode_transfer).
function _M.validate_and_plan(t, accts, postings, bals, with_bytes)
    local rc = put_transfer(t)
    if rc ~= 0 then return fail(rc) end
    local _, n_acct = count(accts, MAX_INVOLVED, "accounts")
    local _, n_post = count(postings, MAX_INPUTS, "consumed")
    local _, n_bal = count(bals, MAX_INVOLVED, "balances")
    if n_acct > MAX_INVOLVED or n_post > MAX_INPUTS or n_bal > MAX_INVOLVED then
        return fail(C.RL_ELIMIT)
    end
    for i = 1, n_acct do put_account(accounts[i - 1], accts[i]) end
    for i = 1, n_post do put_posting(consumed[i - 1], postings[i]) end
    for i = 1, n_bal do
        put_amount_row(balances[i - 1], BALANCE_SIZE, bals[i], "balances[%d]", i)
    end
    plan_s.deltas, plan_s.deltas_cap, plan_s.n_deltas = deltas, MAX_INVOLVED, 0
    rc = C.rl_validate_and_plan(transfer_s, accounts, n_acct, consumed, n_post, balances, n_bal,
                                plan_s)
    if rc ~= 0 then return fail(rc) end
    local plan = { transfer_id = ffi_string(plan_s.transfer_id, 32), deltas = {} }
    if with_bytes then
        rc = C.rl_transfer_encode(transfer_s, buf, buf_cap, len_out)
        if rc ~= 0 then return fail(rc) end
        plan.bytes = ffi_string(buf, len_out[0])
    end
    for i = 0, plan_s.n_deltas - 1 do
        local d = deltas[i]
        plan.deltas[i + 1] = {
            account = ffi_string(d.account, 16),
            asset = shared_asset(d.asset),
            before = from_amount(d.before),
            debit = from_amount(d.debit),
            credit = from_amount(d.credit),
            after = from_amount(d.after),
        }
    end
    return plan
end

-- The posting output i (1-based) of t creates, given t's id (LED-3).
function _M.output_posting(t, transfer_id, i)
    local o = t.outputs and t.outputs[i]
    if o == nil then misuse("output_posting: no output " .. tostring(i)) end
    return { id = { transfer_id = transfer_id, index = i - 1 }, account = o.account,
             asset = o.asset, amount = o.amount, status = "active" }
end

-- The wrappers' marshalling, for this package's other users of the core
-- (ron.ledger.engine.plan_core): one rule for putting a table into a struct. Not an API.
_M._ffi = { put_account = put_account, put_posting = put_posting, put_asset = put_asset }

return _M
