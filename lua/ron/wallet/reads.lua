-- ron.wallet.reads: the reads (GET balance, GET statement): who may read, the balance from
-- the cache or the ledger (min_seq: read-your-writes, WLT-6), a statement's entries, each
-- read in its own task under commit_timeout_ms (max_reads in flight, beyond: 429). Part of
-- ron.wallet.service (its facade copies .methods onto the service's class).
local A = require("ron.wallet.answer")
local dto = require("ron.wallet.dto")

local format, concat, match = string.format, table.concat, string.match
local ipairs, tostring, pcall = ipairs, tostring, pcall

-- Every integer that names money or order (amount, nonce, seq, version, event seq) is
-- rendered through dec, never through a Lua number's 14-digit conversion (issue 24).
local dec = require("ron.ledger.bigint").dec
local I64 = require("ffi").typeof("int64_t")
local jstr = dto.jstr
local answer, prob, ret, hex = A.answer, A.prob, A.ret, A.hex

local M = {}
local W = {}
M.methods = W

local NO_PARAMS = {} -- (read only)

-- -> the query's parameters, its asset
local function query_params(q)
    -- the common query (one asset) without gmatch, which LuaJIT does not compile, and
    -- without a table
    local asset = q and match(q, "^asset=([%w_]+)$")
    if asset then return NO_PARAMS, asset end
    local t = {}
    for k, v in (q or ""):gmatch("([^&=]+)=([^&]*)") do t[k] = v end
    return t, t.asset
end

function W:_read_auth(req, id_text)
    local who, a = self:_auth(req)
    if not who then return nil, a end
    -- an account reading its own data names it as its token's entry spells it: no parse
    local id = who.account_text == id_text and who.account or dto.uuid_bytes(id_text)
    if not id then return nil, prob("bad_uuid", "the path's account id is not a UUID") end
    if not who.operator and who.account ~= id then
        return nil, prob("forbidden", "an account reads only its own data")
    end
    local q, asset = query_params(req.query)
    -- (the configured codes passed dto.asset_ok in check_config)
    if not asset or self.assets[asset] == nil then
        return nil, prob("bad_query", "asset=<a configured asset code> is required")
    end
    return id, q, asset
end

-- A balance answer's headers: the same table while the cache's seq and staleness stay (the
-- answer's reader, httpd, only reads it), made anew when either moves.
local function balance_headers(self, staleness)
    local h = self.balance_h
    local seq = self.cache.seq
    if not h or h.seq ~= seq or h.staleness ~= staleness then
        local seq_text = dec(seq)
        h = { seq = seq, staleness = staleness, seq_text = seq_text,
              headers = { ["X-Ledger-Seq"] = seq_text, ["X-Staleness-Ms"] = format("%d", staleness),
                          ["Cache-Control"] = "no-store" } }
        self.balance_h = h
    end
    return h
end

-- (id_text: the id's canonical text when the caller has it, from the path)
-- -> status, body, content type, headers (a handler's results)
function W:_balance_parts(id, asset, amount, staleness, id_text)
    local h = balance_headers(self, staleness)
    return 200, format('{"account":"%s","asset":"%s","balance":%s,"ledger_seq":%s,' ..
                       '"staleness_ms":%d}\n', id_text or dto.uuid_text(id), asset, dec(amount),
                       h.seq_text, staleness), A.JSON, h.headers
end

function W:_balance_answer(id, asset, amount, staleness, id_text)
    local status, body, _, headers = self:_balance_parts(id, asset, amount, staleness, id_text)
    return answer(status, body, headers)
end

-- The read of a miss (in a task): waits for min_seq, reads through the cache.
function W:_read_balance(job)
    if job.min_seq and self.cache.seq < job.min_seq then
        local deadline = self.clock() + self.min_seq_wait_ms
        while self.cache.seq < job.min_seq and self.clock() < deadline do
            self.T.sleep(self.poll_ms)
        end
        if self.cache.seq < job.min_seq then
            return prob("not_caught_up", format("the cache has applied ledger events up to %s, " ..
                        "not yet %s", dec(self.cache.seq), dec(job.min_seq)),
                        { ["Retry-After"] = "1" })
        end
        local amount = self.cache:get(job.id, job.asset)
        if amount then
            return self:_balance_answer(job.id, job.asset, amount, self.cache:staleness_ms() or 0)
        end
    end
    if job.min_seq then return self:_read_through(job) end
    -- Single flight: the misses of one balance share one ledger read (64 connections that
    -- missed at once made 64 store reads, queued on the offloaded SQLite store's one
    -- connection: issue 25). Only reads without min_seq join one: a read that began before
    -- a caller's min_seq was reached might not hold the writes that caller waits for.
    local key = job.id .. "\0" .. job.asset
    local flights = self.balance_flights or {} -- (bounded: one per read in flight)
    self.balance_flights = flights
    local flight = flights[key]
    if flight then
        local ch = self.T.channel(1, "wallet_balance_flight")
        flight[#flight + 1] = ch
        local a = ch:recv()
        if a then return a end
        -- (canceled: read on our own)
    end
    flight = {}
    flights[key] = flight
    local ok, a = pcall(self._read_through, self, job)
    flights[key] = nil
    if not ok then
        self.log("read error: " .. tostring(a))
        a = prob("internal", "wallet error")
    end
    for _, ch in ipairs(flight) do ch:try_send(a) end
    return a
end

-- The ledger's balance, stored in the cache unless an invalidation spoiled the read.
function W:_read_through(job)
    self.cache:begin_read(job.id)
    local amount, err = self.led:balance(job.id, { code = job.asset,
                                                   scale = self.assets[job.asset] })
    if amount == nil then
        self.cache.reading[job.id] = nil
        return prob("ledger_unavailable", tostring(err), { ["Retry-After"] = "1" })
    end
    -- (as the store gives it: a number up to 2^53, an int64_t beyond; never tonumber'd)
    self.cache:put(job.id, job.asset, amount)
    return self:_balance_answer(job.id, job.asset, amount, 0)
end

function W:_spawn_read(req, fn, job, endpoint)
    if not self.system_ready then
        return ret(self, prob("starting", "the wallet is starting", { ["Retry-After"] = "1" }))
    end
    if self.n_reads >= self.max_reads then
        self.m.busy[endpoint] = self.m.busy[endpoint] + 1
        return ret(self, prob("busy", "too many reads in flight", { ["Retry-After"] = "1" }))
    end
    self.n_reads = self.n_reads + 1
    -- The read runs in a child joined with commit_timeout_ms: a stalled ledger answers 503
    -- ledger_timeout in time; the child ends on its own (its answer is then dropped).
    self:_spawn("read", function()
        local result, done = nil, false
        local child = self:_spawn("read_call", function()
            local ok, a = pcall(fn, self, job)
            if not ok then
                self.log("read error: " .. tostring(a))
                a = prob("internal", "wallet error")
            end
            result, done = a, true
            self.n_reads = self.n_reads - 1
            return true
        end)
        child:join(self.commit_timeout_ms + (job.min_seq and self.min_seq_wait_ms or 0))
        if not done then
            self.m.io_timeouts.read = self.m.io_timeouts.read + 1
            result = prob("ledger_timeout", "the ledger did not answer in time",
                          { ["Retry-After"] = "1" })
        end
        self:_send(req, result)
        return true
    end)
    return nil
end

function W:_get_balance(req, id_text)
    local id, q, asset = self:_read_auth(req, id_text)
    if not id then return ret(self, q) end
    local min_seq
    if q.min_seq then
        min_seq = dto.query_uint(q.min_seq, 0, dto.MAX_INT)
        if not min_seq then
            return ret(self, prob("bad_query", "min_seq must be an integer in 0.." ..
                                  dec(dto.MAX_INT) .. " (decimal digits)"))
        end
    end
    if not min_seq or self.cache.seq >= min_seq then
        local amount = self.cache:get(id, asset)
        if amount then -- (as ret(self, answer): counted, the parts returned)
            self:_count(200)
            return self:_balance_parts(id, asset, amount, self.cache:staleness_ms() or 0, id_text)
        end
    end
    return self:_spawn_read(req, self._read_balance, { id = id, asset = asset, min_seq = min_seq },
                            "balance")
end

-- ---- statement ----

-- The rater's usage metadata (ron.ledger.usage, LED-R-6), when that module is present.
local usage_ok, usage = pcall(require, "ron.ledger.usage")
if not usage_ok then usage = nil end

local function kind_of(rec)
    local m = rec and rec.metadata or ""
    local k = match(m, '^{"wallet":"[%w_]+","kind":"([%w_]+)"')
    if k then return k end
    if usage and usage.decode_metadata(m) then return "usage" end
    return "other"
end

-- A transfer's metadata as a JSON value: the wallet's own (JSON text) as it is, the rater's
-- as the slice it cites (stream, seq, window, digest, rate card, amount), anything else as
-- hex (metadata are bytes: never raw in JSON).
local function metadata_json(m)
    m = m or ""
    if match(m, '^{"wallet":"[%w_]+","kind":"[%w_]+","principal":"[%w]+","nonce":%d+') then
        return m
    end
    local u = usage and usage.decode_metadata(m)
    if u then
        return format('{"slice":{"tenant":"%s","dimension":"%s","seq":%s,"window_start_s":%s,' ..
                      '"window_len_s":%s,"b3":"%s","rate_card":"%s","quantity":%s,' ..
                      '"amount":%s}}', dto.uuid_text(u.tenant), jstr(u.dimension),
                      dec(u.seq), dec(u.window_start_s), dec(u.window_len_s),
                      hex(u.b3), jstr(u.version), dec(u.quantity), dec(u.amount))
    end
    return format('{"hex":"%s"}', hex(m))
end

function W:_statement(job)
    local led, store = self.led, self.led.store
    local hist, err = led:history(job.id, { limit = job.limit })
    if not hist then return prob("ledger_unavailable", tostring(err), { ["Retry-After"] = "1" }) end
    local entries = {}
    local origin_cache = {}
    local function origin(tid)
        local o = origin_cache[tid]
        if o == nil then
            local rec = led:transfer(tid)
            o = { kind = kind_of(rec) }
            origin_cache[tid] = o
        end
        return o
    end
    for _, rec in ipairs(hist) do
        local t = rec.transfer or (led:transfer(rec.id) or {}).transfer
        if t then
            local delta = I64(0) -- exact whatever the amounts (int64_t: as the ledger's)
            local consumed = {}
            local ids = {}
            for _, inp in ipairs(t.inputs) do ids[#ids + 1] = inp end
            local ps = #ids > 0 and store:get_postings(ids) or {}
            for _, p in ipairs(ps or {}) do
                if p.account == job.id and p.asset.code == job.asset then
                    delta = delta - p.amount
                    local by = p.id.transfer_id
                    consumed[#consumed + 1] = format(
                        '{"posting":"%s:%s","amount":%s,"funded_by":"%s","funded_by_kind":"%s"}',
                        hex(by), dec(p.id.index), dec(p.amount), hex(by), origin(by).kind)
                end
            end
            for _, out in ipairs(t.outputs) do
                if out.account == job.id and out.asset.code == job.asset then
                    delta = delta + out.amount
                end
            end
            if delta ~= 0 or #consumed > 0 then
                entries[#entries + 1] = format(
                    '{"transfer_id":"%s","created_at_ms":%s,"kind":"%s","delta":%s,' ..
                    '"metadata":%s,"consumed":[%s]}', hex(rec.id), dec(rec.created_at_ms or 0),
                    kind_of(rec), dec(delta), metadata_json(rec.metadata), concat(consumed, ","))
            end
        end
    end
    return answer(200, format('{"account":"%s","asset":"%s","entries":[%s]}\n',
                              dto.uuid_text(job.id), job.asset, concat(entries, ",")))
end

function W:_get_statement(req, id_text)
    local id, q, asset = self:_read_auth(req, id_text)
    if not id then return ret(self, q) end
    local limit = self.statement_limit
    if q.limit then
        limit = dto.query_uint(q.limit, 1, 4 * self.statement_limit)
        if not limit then
            return ret(self, prob("bad_query", format("limit must be an integer in 1..%d " ..
                                                      "(decimal digits)",
                                                      4 * self.statement_limit)))
        end
    end
    return self:_spawn_read(req, self._statement, { id = id, asset = asset, limit = limit },
                            "statement")
end

return M
