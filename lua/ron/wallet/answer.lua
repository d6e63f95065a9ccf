-- ron.wallet.answer: the wallet's answers (docs/WALLET.md §4): a JSON answer, a problem
-- (application/problem+json, through ron.wallet.dto), and their sending and counting per
-- status. Part of ron.wallet.service (its facade copies .methods onto the service's class).
--
--   local A = require("ron.wallet.answer")
--   A.answer(status, body, headers)        -- a JSON answer (A.JSON: its content type)
--   A.prob(code, detail, headers, extra)   -- a problem answer (dto.problem's codes)
--   A.problem_answer(p, headers)           -- a decoded problem (dto) as an answer
--   A.ret(w, a)                            -- a handler's return values, counted
--   A.hex(s)                               -- bytes as lowercase hex (ron.ledger.hex)
local ledger = require("ron.ledger")
local dto = require("ron.wallet.dto")
local tnew = require("table.new")

local next, pairs, tonumber, tostring, unpack = next, pairs, tonumber, tostring, unpack

local M = {}
local W = {}
M.methods = W

M.hex = ledger.hex

local JSON = "application/json"
M.JSON = JSON

-- An answer's table, sized for its fields and the two a stored one gets (stored, h:
-- W:_keep_answer): no rehash on the way (issue 25).
local function new_answer(status, body, ctype, headers)
    local a = tnew(0, 6)
    a.status, a.body, a.ctype, a.headers = status, body, ctype, headers
    return a
end

local function answer(status, body, headers)
    return new_answer(status, body, JSON, headers)
end

local function problem_answer(p, headers)
    return new_answer(p.status, dto.problem_body(p), dto.PROBLEM_TYPE, headers)
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

-- A job's answer kept in the answer cache when it is the ledger's stored outcome (the only
-- kind it may keep: ron.wallet.money's `stored`), under the job's Idempotency-Key: its
-- body hash, status, content type, body, then its headers' names and values, as bytes
-- (ron.base.blobcache: no Lua object per answer, issue 25). M.cached reads one back.
function W:_keep_answer(job, a)
    if not (a.stored and job.kkey) then return end
    local h, status = a.headers, tostring(a.status)
    if h == nil or next(h) == nil then
        self.answers:put(job.kkey, job.h, status, a.ctype, a.body)
        return
    end
    local parts = { job.h, status, a.ctype, a.body }
    for k, v in pairs(h) do parts[#parts + 1], parts[#parts + 2] = k, tostring(v) end
    self.answers:put(job.kkey, unpack(parts))
end

-- The answer kept under kkey -> its body hash, status, body, content type and headers (a
-- new table), or nil.
function M.cached(self, kkey)
    local v = self.answers:get(kkey)
    if v == nil then return nil end
    local hd = {}
    for i = 5, #v, 2 do hd[v[i]] = v[i + 1] end
    return v[1], tonumber(v[2]), v[4], v[3], hd
end

local function ret(self, a)
    self:_count(a.status)
    return a.status, a.body, a.ctype, a.headers
end

M.answer, M.problem_answer, M.prob, M.ret = answer, problem_answer, prob, ret

return M
