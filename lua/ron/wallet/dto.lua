-- ron.wallet.dto: the wallet's request bodies and error bodies (docs/WALLET.md "Requests",
-- "Problems"; WLT-1, WLT-2). The JSON is read by the host's strict decoder
-- (host/lua/wallet_dto.c, ra_wdto_decode, reached through ffi.C like the ingest DTO): one
-- flat object per route, unknown fields, duplicates, wrong types and out-of-range numbers
-- refused there. This module adds what a field means: account ids are UUID text, asset
-- codes are configured, amounts and nonces are integers 1..2^53-1.
--
--   local dto = require("ron.wallet.dto")
--   local d = dto.new()                       -- raises outside the ron-accounting host
--   local req, prob = d:decode("transfer", body)
--   -- req = { from = 16B, to = 16B, from_text =, to_text =, asset = "USD", amount = n,
--   --         nonce = n, memo = "..."|nil, canon = "<canonical request bytes>" }
--   -- prob = { status = 400, code = "unknown_field", detail =, field =, pos = }
--   local body = dto.problem_body(prob)      -- application/problem+json (RFC 9457)
--
-- canon is the request in one canonical form (route and fields in schema order): its
-- SHA-256 is the body hash the ledger stores under the request's intent, so a replay with
-- the same meaning is recognised whatever its whitespace or field order, and a replay with
-- another meaning is a conflict (WLT-4).
local ffi = require("ffi")
local B = require("ron.ledger.bigint")
local cdef = require("ron.wallet.dto_cdef") -- host/lua/wallet_dto.h (tools/gen-cdef.sh)
local tnew = require("table.new")

local C = ffi.C
local format, match, concat, byte = string.format, string.match, table.concat, string.byte
local pairs, ipairs, type, tostring, tonumber, error, pcall, setmetatable =
      pairs, ipairs, type, tostring, tonumber, error, pcall, setmetatable
local ffi_string = ffi.string

local WDTO_ABI = cdef.abi
local STRING, UINT = C.RA_WDTO_STRING, C.RA_WDTO_UINT -- (RA_WDTO_BOOL: no route has one yet)

local _M = {}

_M.MAX_INT = 9007199254740991 -- 2^53 - 1 (I-JSON, RFC 7493)
_M.MAX_BODY = 1048576         -- 1 MiB (seed 004 §7)
_M.MAX_MEMO = 256

-- The routes' schemas, fields in canonical order (WLT-1).
local UUID_LEN = 36
local SCHEMAS = {
    issue = {
        { "to", STRING, true, UUID_LEN, UUID_LEN },
        { "asset", STRING, true, 1, 16 },
        { "amount", UINT, true, 1, _M.MAX_INT },
        { "nonce", UINT, true, 1, _M.MAX_INT },
        { "kind", STRING, false, 1, 16 },  -- "top_up" (default) | "grant"
        { "memo", STRING, false, 0, _M.MAX_MEMO },
    },
    transfer = {
        { "from", STRING, true, UUID_LEN, UUID_LEN },
        { "to", STRING, true, UUID_LEN, UUID_LEN },
        { "asset", STRING, true, 1, 16 },
        { "amount", UINT, true, 1, _M.MAX_INT },
        { "nonce", UINT, true, 1, _M.MAX_INT },
        { "memo", STRING, false, 0, _M.MAX_MEMO },
    },
    burn = {
        { "from", STRING, true, UUID_LEN, UUID_LEN },
        { "asset", STRING, true, 1, 16 },
        { "amount", UINT, true, 1, _M.MAX_INT },
        { "nonce", UINT, true, 1, _M.MAX_INT },
        { "memo", STRING, false, 0, _M.MAX_MEMO },
    },
    account = {
        { "account", STRING, true, UUID_LEN, UUID_LEN },
    },
}
_M.SCHEMAS = SCHEMAS
_M.KINDS = { top_up = true, grant = true }

-- Problem codes and their HTTP status (docs/WALLET.md "Problems"; WLT-2). Stable: clients
-- branch on `code`, never on `detail`.
_M.PROBLEMS = {
    -- the decoder's (ra_wdto_reason)
    empty_body = 400, malformed_json = 400, not_object = 400, unknown_field = 400,
    duplicate_field = 400, missing_field = 400, wrong_type = 400, bad_number = 400,
    bad_string = 400,
    -- this module's
    bad_uuid = 400, bad_asset = 400, unknown_asset = 400, bad_kind = 400, same_account = 400,
    bad_memo = 400, bad_query = 400,
    -- the service's
    missing_idempotency_key = 400, bad_idempotency_key = 400,
    no_token = 401, bad_token = 401, forbidden = 403, not_found = 404, unknown_account = 404,
    method_not_allowed = 405, in_flight = 409, nonce_used = 409, account_frozen = 409,
    account_closed = 409, account_exists = 409, oversize = 413, content_type = 415,
    content_encoding = 415, idempotency_mismatch = 422, insufficient_funds = 422,
    busy = 429, internal = 500, ledger_unavailable = 503, ledger_timeout = 503,
    not_caught_up = 503, draining = 503, starting = 503, account_busy = 503,
    -- the HTTP server's answers on the wallet's paths (server_problem)
    bad_request = 400, headers_too_large = 431, connection_limit = 503,
}
_M.TITLES = {
    [400] = "Bad Request", [401] = "Unauthorized", [403] = "Forbidden", [404] = "Not Found",
    [405] = "Method Not Allowed", [409] = "Conflict", [413] = "Content Too Large",
    [415] = "Unsupported Media Type", [422] = "Unprocessable Content",
    [429] = "Too Many Requests", [431] = "Request Header Fields Too Large",
    [500] = "Internal Server Error", [503] = "Service Unavailable",
}
_M.PROBLEM_TYPE = "application/problem+json"

-- ---- text helpers (pure Lua: usable anywhere) ----

-- JSON string contents: quotes, backslashes and control bytes escaped; other bytes as they
-- are (the decoder only lets UTF-8 through).
local function esc(c) return format("\\u%04x", byte(c)) end -- (made once: issue 25)
function _M.jstr(s)
    return (s:gsub('[%c"\\]', esc))
end
local jstr = _M.jstr

local HEX = "^(%x%x%x%x%x%x%x%x)%-(%x%x%x%x)%-(%x%x%x%x)%-(%x%x%x%x)%-(%x%x%x%x%x%x%x%x%x%x%x%x)$"

-- Byte <-> lowercase hex pair, as tables gsub reads without a call per byte (a balance read
-- from the cache parses one id and prints it back: issue 25's cache-read ratio).
local BYTE_OF_HEX, HEX_OF_BYTE = {}, {}
for i = 0, 255 do
    local x, c = format("%02x", i), string.char(i)
    BYTE_OF_HEX[x], HEX_OF_BYTE[c] = c, x
end

-- Canonical UUID text (lowercase 8-4-4-4-12) -> 16 bytes, or nil. Uppercase is refused:
-- one account, one spelling (the id is also a map key and a nonce scope).
-- The texts converted last are remembered (a transfer converts two, mostly the same few
-- accounts again: the match, its five captures, their concatenation and the gsub were 2.9
-- of the handler's ~13 us, issue 25): UUID_MEMO of them, emptied when full (the texts are
-- the clients': bounded, I-7). Only a valid text enters, so a hit is what the conversion
-- would give.
_M.UUID_MEMO = 4096
local uuid_memo, n_uuid_memo = {}, 0

function _M.uuid_bytes(s)
    local b = uuid_memo[s]
    if b then return b end
    if type(s) ~= "string" or #s ~= 36 or match(s, "%u") then return nil end
    local a, b2, c, d, e = match(s, HEX)
    if not a then return nil end
    b = (a .. b2 .. c .. d .. e):gsub("%x%x", BYTE_OF_HEX)
    if n_uuid_memo >= _M.UUID_MEMO then uuid_memo, n_uuid_memo = {}, 0 end
    uuid_memo[s], n_uuid_memo = b, n_uuid_memo + 1
    return b
end

-- (the memo's size, for its spec)
function _M.uuid_memo_count() return n_uuid_memo end

function _M.uuid_text(b)
    local h = (b:gsub(".", HEX_OF_BYTE))
    return format("%s-%s-%s-%s-%s", h:sub(1, 8), h:sub(9, 12), h:sub(13, 16), h:sub(17, 20),
                  h:sub(21, 32))
end

-- An asset code: 1..16 of [A-Z0-9_], starting with a letter (ISO 4217 and credit names).
function _M.asset_ok(s)
    return type(s) == "string" and #s >= 1 and #s <= 16 and match(s, "^%u[%u%d_]*$") ~= nil
end

-- A query parameter's integer: decimal digits only (no sign, no "0x", no exponent, no
-- space), at most 16 of them, in lo..hi (hi <= MAX_INT) -> the number, or nil.
function _M.query_uint(s, lo, hi)
    if type(s) ~= "string" or #s > 16 or not match(s, "^%d+$") then return nil end
    local n = tonumber(s, 10)
    if n < lo or n > hi then return nil end
    return n
end

-- An Idempotency-Key: 1..128 visible ASCII characters (as ingest's).
function _M.key_ok(k)
    return type(k) == "string" and #k >= 1 and #k <= 128 and match(k, "^[!-~]+$") ~= nil
end

-- A problem: { status =, code =, detail =, field =?, pos =?, extra =? } -> the body bytes.
-- Deterministic (fixed member order, no time, no request id): a stored outcome renders to
-- the same bytes on every replay (WLT-4).
function _M.problem_body(p)
    local status = p.status or _M.PROBLEMS[p.code] or 500
    local parts = {
        format('{"type":"urn:ron-wallet:problem:%s","title":"%s","status":%d,"code":"%s"',
               p.code, _M.TITLES[status] or "Error", status, p.code),
    }
    if p.detail then parts[#parts + 1] = format(',"detail":"%s"', jstr(p.detail)) end
    if p.field and p.field ~= "" then parts[#parts + 1] = format(',"field":"%s"', jstr(p.field)) end
    if p.pos then parts[#parts + 1] = format(',"pos":%d', p.pos) end
    if p.extra then parts[#parts + 1] = p.extra end
    parts[#parts + 1] = "}\n"
    return concat(parts)
end

-- The HTTP server's own answers on the wallet's paths (ron.node.http's errors:
-- no route, another method, the loopback reserve's 503, and the refusals before any
-- handler) as problems: status, detail, headers (Allow, Retry-After) and the header at
-- fault (a control byte in Authorization: 401 bad_token, as an unknown token) -> the
-- answer { status, body, ctype, headers } (docs/WALLET.md §4).
local SERVER_CODE = { [400] = "bad_request", [404] = "not_found", [405] = "method_not_allowed",
                      [413] = "oversize", [431] = "headers_too_large", [503] = "connection_limit" }
function _M.server_problem(status, detail, headers, header)
    local code = SERVER_CODE[status] or (status < 500 and "bad_request" or "internal")
    if status == 400 and header == "authorization" then
        code, detail = "bad_token", "the Authorization header is not a bearer token (" ..
                       tostring(detail) .. ")"
        headers = { ["WWW-Authenticate"] = 'Bearer realm="ron-wallet", error="invalid_token"' }
    end
    local p = _M.problem(code, detail)
    return { status = p.status, body = _M.problem_body(p), ctype = _M.PROBLEM_TYPE,
             headers = headers }
end

function _M.problem(code, detail, field, pos, extra)
    local status = _M.PROBLEMS[code]
    if not status then error("ron.wallet.dto: unknown problem code " .. tostring(code), 2) end
    return { status = status, code = code, detail = detail, field = field, pos = pos,
             extra = extra }
end
local problem = _M.problem

-- Semantic checks of a decoded request (pure Lua). r holds the fields by name (strings and
-- numbers); assets = { CODE = scale } or nil (any well-formed code). Returns r completed
-- (binary ids, canon) or nil, problem.
-- A field's text key (an account id's text beside its bytes) and its canonical form's
-- prefix, made once (issue 25: a concatenation per field per request).
-- (by route, the prefix of each field in schema order: the first's is the route, a line
-- feed and its name, the others' a line feed and their name)
local TEXT_KEY, CANON_PREFIX = {}, {}
for route, schema in pairs(SCHEMAS) do
    CANON_PREFIX[route] = {}
    for i, f in ipairs(schema) do
        TEXT_KEY[f[1]] = f[1] .. "_text"
        CANON_PREFIX[route][i] = (i == 1 and route .. "\n" or "\n") .. f[1] .. "="
    end
end

-- The canonical form (below) of r for route: its parts in one scratch list (only the
-- string is made per request), joined.
local canon_parts = {}
local function canon(route, schema, r)
    local c, prefix = canon_parts, CANON_PREFIX[route]
    for i, f in ipairs(schema) do
        local v = r[TEXT_KEY[f[1]]] or r[f[1]]
        c[2 * i - 1] = prefix[i]
        c[2 * i] = v == nil and "" or type(v) == "number" and B.dec(v) or v
    end
    return concat(c, "", 1, 2 * #schema)
end

function _M.check(route, r, assets)
    local schema = SCHEMAS[route]
    if not schema then error("ron.wallet.dto: unknown route " .. tostring(route), 2) end
    for _, f in ipairs(schema) do
        local name, v = f[1], r[f[1]]
        if v ~= nil and (name == "from" or name == "to" or name == "account") then
            local b = _M.uuid_bytes(v)
            if not b then
                return nil, problem("bad_uuid", "an account id is a lowercase UUID " ..
                                    "(8-4-4-4-12 hex digits)", name)
            end
            r[TEXT_KEY[name]], r[name] = v, b
        elseif name == "asset" then
            if not _M.asset_ok(v) then
                return nil, problem("bad_asset", "an asset code is 1..16 of [A-Z0-9_] " ..
                                    "starting with a letter", name)
            end
            if assets and assets[v] == nil then
                return nil, problem("unknown_asset", "asset " .. v .. " is not configured", name)
            end
            r.scale = assets and assets[v] or 0
        elseif (name == "amount" or name == "nonce") and v ~= nil then
            if type(v) ~= "number" or v < 1 or v > _M.MAX_INT or v % 1 ~= 0 then
                return nil, problem("bad_number", name .. " must be an integer in 1.." ..
                                    B.dec(_M.MAX_INT), name)
            end
        elseif name == "kind" and v ~= nil and not _M.KINDS[v] then
            return nil, problem("bad_kind", 'kind must be "top_up" or "grant"', name)
        end
    end
    if route == "issue" and r.kind == nil then r.kind = "top_up" end
    if route == "transfer" and r.from == r.to then
        return nil, problem("same_account", "from and to are the same account", "to")
    end
    -- canonical form: route, then every field in schema order (absent: empty), one a line:
    -- "route\nname=value\n..."; integers exact (B.dec: two amounts near 2^53 are two bodies)
    r.canon = canon(route, schema, r)
    r.route = route
    return r
end

-- ---- the host decoder ----

local D = {}
D.__index = D

-- Raises outside the host (the decoder is part of it) or on an ABI mismatch.
function _M.new(opts)
    opts = opts or {}
    if not pcall(function() return C.ra_wdto_decode end) then
        error("ron.wallet.dto: the decoder is part of the ron-accounting host (run inside it)",
              2)
    end
    local fs, vs, es = ffi.new("size_t[1]"), ffi.new("size_t[1]"), ffi.new("size_t[1]")
    local abi = C.ra_wdto_abi(fs, vs, es)
    if abi ~= WDTO_ABI or fs[0] ~= ffi.sizeof("ra_wdto_field_t")
       or vs[0] ~= ffi.sizeof("ra_wdto_value_t") or es[0] ~= ffi.sizeof("ra_wdto_error_t") then
        error("ron.wallet.dto: the host's decoder ABI does not match ron.wallet.dto", 2)
    end
    local self = setmetatable({ assets = opts.assets, schemas = {}, anchors = {} }, D)
    local max = 1
    for route, schema in pairs(SCHEMAS) do
        local n = #schema
        if n > max then max = n end
        local arr = ffi.new("ra_wdto_field_t[?]", n)
        for i, f in ipairs(schema) do
            local name = f[1]
            self.anchors[#self.anchors + 1] = name
            arr[i - 1].name = name -- the Lua string is anchored in self.anchors
            arr[i - 1].type = f[2]
            arr[i - 1].required = f[3] and 1 or 0
            arr[i - 1].min = f[4] or 0
            arr[i - 1].max = f[5] or 0
        end
        self.schemas[route] = { arr = arr, n = n, list = schema }
    end
    self.out = ffi.new("ra_wdto_value_t[?]", max)
    self.scratch_cap = opts.max_body or _M.MAX_BODY
    self.scratch = ffi.new("char[?]", self.scratch_cap)
    self.err = ffi.new("ra_wdto_error_t")
    return self
end

-- body (a string) -> request table | nil, problem
function D:decode(route, body)
    local s = self.schemas[route]
    if not s then error("ron.wallet.dto: unknown route " .. tostring(route), 2) end
    local len = #body
    if len > self.scratch_cap then
        return nil, problem("oversize", format("the body is over %d bytes", self.scratch_cap))
    end
    local out, err = self.out, self.err
    local rc = C.ra_wdto_decode(body, len, s.arr, s.n, out, self.scratch, self.scratch_cap, err)
    if rc ~= 0 then
        local reason = ffi_string(C.ra_wdto_reason(rc))
        if _M.PROBLEMS[reason] == nil or reason == "usage" then
            return nil, problem("internal", "decoder: " .. reason)
        end
        local detail = err.detail ~= nil and ffi_string(err.detail) or
                       ffi_string(C.ra_wdto_message(rc))
        return nil, problem(reason, detail, ffi_string(err.field), tonumber(err.pos))
    end
    -- (sized for the fields and check's: filled without a rehash, each of which left the
    -- smaller hash part behind as garbage, issue 25)
    local r = tnew(0, 16)
    for i, f in ipairs(s.list) do
        local v = out[i - 1]
        if v.present ~= 0 then
            if f[2] == STRING then
                r[f[1]] = ffi_string(self.scratch + v.off, v.len)
            elseif f[2] == UINT then
                r[f[1]] = tonumber(v.u)
            else
                r[f[1]] = v.u ~= 0
            end
        end
    end
    return _M.check(route, r, self.assets)
end

return _M
