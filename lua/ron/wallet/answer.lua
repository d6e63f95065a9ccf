-- ron.wallet.answer: the wallet's answers (docs/WALLET.md §4): a JSON answer, a problem
-- (application/problem+json, through ron.wallet.dto), and their sending and counting per
-- status. Part of ron.wallet.service (its facade copies .methods onto the service's class).
--
--   local A = require("ron.wallet.answer")
--   A.answer(status, body, headers)        -- a JSON answer (A.JSON: its content type)
--   A.prob(code, detail, headers, extra)   -- a problem answer (dto.problem's codes)
--   A.problem_answer(p, headers)           -- a decoded problem (dto) as an answer
--   A.ret(w, a)                            -- a handler's return values, counted
--   A.hex(s)                               -- bytes as lowercase hex
local dto = require("ron.wallet.dto")

local format, byte, concat = string.format, string.byte, table.concat
local pairs = pairs

local M = {}
local W = {}
M.methods = W

-- (one format of all the bytes, not gsub with a callback: once per answer, its closure and
-- a callback per byte called from C aborted every trace through it, and a loop over the
-- bytes made traces of its own, issue 25; ids are 16 or 32 bytes, longer strings loop)
local HEX_MAX = 64
local HEX_FMT = {}
for n = 0, HEX_MAX do HEX_FMT[n] = ("%02x"):rep(n) end
function M.hex(s)
    local n = #s
    if n <= HEX_MAX then return format(HEX_FMT[n], byte(s, 1, n)) end
    local t = {}
    for i = 1, n do t[i] = format("%02x", byte(s, i)) end
    return concat(t)
end

local JSON = "application/json"
M.JSON = JSON

local function answer(status, body, headers)
    return { status = status, body = body, ctype = JSON, headers = headers }
end

local function problem_answer(p, headers)
    return { status = p.status, body = dto.problem_body(p), ctype = dto.PROBLEM_TYPE,
             headers = headers }
end

local function prob(code, detail, headers, extra)
    return problem_answer(dto.problem(code, detail, nil, nil, extra), headers)
end
function W:_prob(...) return prob(...) end

function W:_count(status)
    self.m.requests[status] = (self.m.requests[status] or 0) + 1
end

-- Sends a (possibly async) answer.
function W:_send(req, a, replayed)
    self:_count(a.status)
    local h = a.headers
    if replayed then
        h = {}
        for k, v in pairs(a.headers or {}) do h[k] = v end
        h["Idempotent-Replayed"] = "true"
    end
    return req:respond(a.status, a.body, a.ctype, h)
end

local function ret(self, a)
    self:_count(a.status)
    return a.status, a.body, a.ctype, a.headers
end

M.answer, M.problem_answer, M.prob, M.ret = answer, problem_answer, prob, ret

return M
