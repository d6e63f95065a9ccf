-- ron.audit: the audit trail from Lua (docs/AUDIT.md), an FFI binding of include/ron/audit.h.
--
--   local audit = require("ron.audit")
--   local log = assert(audit.open{ writer_id = "gw-1", stream = "rejects", dir = "/var/...",
--                                  key_path = "signer.key", checkpoint_every = 1000,
--                                  queue_cap = 4096 })
--   local ok, err = log:emit("reject", { tenant = t, reason = "capacity" }, ts_ms)
--   log:drain()        -- append what is queued, then make it durable (one fdatasync)
--
-- emit() never blocks and never writes: it encodes the event once (a record that could not
-- be encoded is refused here, to the caller, not later) and puts its canonical bytes in a
-- bounded queue of packed chunks (len u32 | bytes, rau_log_append_packed's input: the
-- writer sets seq and prev when it appends, one C call per chunk). A full
-- queue sheds the event: nil, "Busy: ...", counted in audit_drop_total{reason=
-- "audit_backpressure"} (AUD-I-17). Loss is evidence: after drain() has emptied the queue,
-- one Gap record {dropped, from_ts_ms, to_ts_ms, reason} is appended, so the chain itself
-- says how many events were shed and when (AUD-I-18).
--
-- Misuse (wrong types, floats, unknown config keys) raises; runtime failure returns
-- nil, "Name: message".
local ffi = require("ffi")
local bit = require("bit")
local C = require("ron.audit.lib")
local FAM = require("ron.audit.families")
local metrics = require("ron.base.metrics")

local band, rshift = bit.band, bit.rshift

local error = error
local floor = math.floor
local format = string.format
local concat, gmatch, sub = table.concat, string.gmatch, string.sub
local pairs = pairs
local tonumber = tonumber
local type = type

local _M = { version = "0.1.0" }

local ATTR_MAX = 32
local attrs_buf = ffi.new("rau_attr_t[?]", ATTR_MAX)
local ev_buf = ffi.new("rau_event_t[1]")
local stats_buf = ffi.new("rau_log_stats_t[1]")
local open_info_buf = ffi.new("rau_log_open_info_t[1]")
local scratch = ffi.new("uint8_t[?]", 4096)
local len_out = ffi.new("size_t[1]")
local log_out = ffi.new("rau_log_t*[1]")
local batch_out = ffi.new("rau_batch_result_t[1]")
local errbuf = ffi.new("char[?]", 512)

local function err_text(rc, detail)
    local name = ffi.string(C.rau_err_name(rc))
    return name .. ": " .. (detail or ffi.string(C.rau_strerror(rc)))
end
_M.err_text = err_text

-- Fills ev_buf from (kind, attrs, ts_ms). The Lua strings stay referenced by the caller's
-- table (and kind) for as long as the C call runs.
local function fill_event(kind, attrs, ts_ms)
    if type(kind) ~= "string" then error("ron.audit: kind must be a string", 3) end
    if type(ts_ms) ~= "number" or ts_ms < 0 or floor(ts_ms) ~= ts_ms then
        error("ron.audit: ts_ms must be a non-negative integer (milliseconds)", 3)
    end
    local n = 0
    if attrs ~= nil then
        if type(attrs) ~= "table" then error("ron.audit: attrs must be a table", 3) end
        for k, v in pairs(attrs) do
            if type(k) ~= "string" then error("ron.audit: attribute keys are strings", 3) end
            if n == ATTR_MAX then return nil, "SizeExceeded: more than 32 attributes" end
            local a = attrs_buf[n]
            a.key, a.key_len = k, #k
            -- (only the fields of the attribute's type are set: rau_record_encode reads str
            -- and str_len for a string, num for an int or a bool, nothing else)
            local tv = type(v)
            if tv == "string" then
                a.type, a.str, a.str_len = C.RAU_ATTR_STR, v, #v
            elseif tv == "boolean" then
                a.type, a.num = C.RAU_ATTR_BOOL, v and 1 or 0
            elseif tv == "number" then
                -- AUD-I-5: no floats; integers exact in a double only.
                if floor(v) ~= v or v >= 2 ^ 53 or v <= -2 ^ 53 then
                    error(format("ron.audit: attribute %q is not an integer (no floats)", k), 3)
                end
                a.type, a.num = C.RAU_ATTR_INT, v
            elseif tv == "cdata" and ffi.istype("int64_t", v) then
                a.type, a.num = C.RAU_ATTR_INT, v
            else
                error(format("ron.audit: attribute %q has type %s", k, tv), 3)
            end
            n = n + 1
        end
    end
    local e = ev_buf[0]
    e.kind, e.kind_len, e.ts_ms, e.attrs, e.attr_count = kind, #kind, ts_ms, attrs_buf, n
    return ev_buf
end

-- The canonical bytes of one record (docs/AUDIT-FORMAT.md): for tests and tools.
function _M.encode(writer_id, stream, seq, prev, kind, attrs, ts_ms)
    local ev, err = fill_event(kind, attrs, ts_ms)
    if not ev then return nil, err end
    local rc = C.rau_record_encode(writer_id, stream, seq, prev, ev, scratch, 4096, len_out)
    if rc ~= 0 then return nil, err_text(rc) end
    return ffi.string(scratch, len_out[0])
end

local function hex(p, n)
    local s = ffi.string(p, n)
    return (s:gsub(".", function(c) return format("%02x", c:byte()) end))
end
_M.hex = hex

local CONFIG = {
    writer_id = "string", stream = "string", dir = "string", amnesia = "boolean",
    key_path = "string", checkpoint_every = "number", rotate_bytes = "number",
    batch_bytes = "number", dedupe_window = "number", queue_cap = "number",
    checkpoint_interval_ms = "number",
}
-- The rau_log_config_t fields, in the order _M.open_ptr takes them.
local OPEN_ARGS = { "writer_id", "stream", "dir", "key_path", "amnesia", "checkpoint_every",
                    "rotate_bytes", "batch_bytes", "dedupe_window", "checkpoint_interval_ms" }

local Log = {}
Log.__index = Log

-- A chunk: packed events (len u32 big-endian | canonical bytes made with seq 1 and no prev),
-- at most chunk_max events and chunk_bytes bytes. RESERVE: room for the largest record.
-- SPARE chunks are kept for reuse (no garbage per batch).
local CHUNK_BYTES, RESERVE, CHUNK_MAX, SPARE = 256 * 1024, 4096 + 4, 2 ^ 31, 4

-- Opens a log from the OPEN_ARGS values: the handle as a number (uintptr_t) | nil, err. The
-- open (recovery: the dedupe window hashed, the tail rewritten and synced) blocks; the
-- host's reopen of a failed log runs it on the threadpool (AUD-I-42), after closing the
-- failed handle `old` (a number, or nil) there too.
function _M.open_ptr(old, writer_id, stream, dir, key_path, amnesia, every, rotate, batch,
                     window, interval_ms)
    if old then C.rau_log_close(ffi.cast("rau_log_t *", old)) end
    local c = ffi.new("rau_log_config_t[1]")
    C.rau_log_config_init(c)
    -- (the strings are the caller's arguments: alive for the duration of the call)
    c[0].writer_id, c[0].stream, c[0].dir, c[0].key_path = writer_id, stream, dir, key_path
    c[0].amnesia = amnesia and 1 or 0
    if every then c[0].checkpoint_every = every end
    if rotate then c[0].rotate_bytes = rotate end
    if batch then c[0].batch_bytes = batch end
    if window then c[0].dedupe_window = window end
    if interval_ms then c[0].checkpoint_interval_ms = interval_ms end
    local rc = C.rau_log_open(c, log_out, errbuf, 512)
    if rc ~= 0 then return nil, err_text(rc, ffi.string(errbuf)) end
    return tonumber(ffi.cast("uintptr_t", log_out[0]))
end

-- The OPEN_ARGS of a config table packed in ONE string, its open_spec: the threadpool's
-- reopen passes it across VMs, and a pool body gets at most ron.base.offload.MAX_ARGS
-- arguments (ten values, one by one, lost the last three there: a recovered log had
-- forgotten its batch_bytes, dedupe_window and checkpoint_interval_ms). Each value is a tag
-- and its text ("s" string, "n" number, "t"/"f" boolean, "-" nil), NUL-separated (no path
-- or name of a C config holds a NUL).
function _M.open_spec(cfg)
    local parts = {}
    for i, k in ipairs(OPEN_ARGS) do
        local v = cfg[k]
        local t = type(v)
        parts[i] = t == "string" and "s" .. v or t == "number" and "n" .. format("%.17g", v)
                   or t == "boolean" and (v and "t" or "f") or "-"
    end
    return concat(parts, "\0")
end

-- The values of an open_spec, in the order of OPEN_ARGS (a list of #OPEN_ARGS, nil holes).
function _M.spec_args(spec)
    local a, i = {}, 0
    for part in gmatch(spec .. "\0", "([^%z]*)%z") do
        i = i + 1
        local tag, rest = sub(part, 1, 1), sub(part, 2)
        if tag == "s" then
            a[i] = rest
        elseif tag == "n" then
            a[i] = tonumber(rest)
        elseif tag == "t" or tag == "f" then
            a[i] = tag == "t"
        end
    end
    return a
end

-- Opens a log from an open_spec (the reopen's body, ron.audit.offload_work): as open_ptr.
function _M.open_spec_ptr(old, spec)
    return _M.open_ptr(old, unpack(_M.spec_args(spec), 1, #OPEN_ARGS))
end

local function handle(ptr)
    return ffi.gc(ffi.cast("rau_log_t *", ptr), C.rau_log_close)
end

function _M.open(cfg)
    if type(cfg) ~= "table" then error("ron.audit.open: config table expected", 2) end
    for k, v in pairs(cfg) do
        if not CONFIG[k] then error("ron.audit.open: unknown key " .. tostring(k), 2) end
        if type(v) ~= CONFIG[k] then
            error("ron.audit.open: " .. k .. " must be a " .. CONFIG[k], 2)
        end
    end
    local ptr, err = _M.open_spec_ptr(nil, _M.open_spec(cfg)) -- (the reopen's path too)
    if not ptr then return nil, err end
    local cap = cfg.queue_cap or 4096
    if cap < 1 or floor(cap) ~= cap then error("ron.audit.open: queue_cap must be >= 1", 2) end
    local copy = {}
    for k, v in pairs(cfg) do copy[k] = v end
    return setmetatable({
        h = handle(ptr), cfg = copy,
        writer_id = cfg.writer_id, stream = cfg.stream,
        -- the queue: packed chunks chunks[c_head..c_tail], queued events in all
        chunks = {}, c_head = 1, c_tail = 0, queued = 0, cap = cap, spare = {},
        chunk_max = CHUNK_MAX, chunk_bytes = CHUNK_BYTES, -- set_chunk
        drops = { audit_backpressure = 0 },
        gaps = {}, n_gaps = 0,                  -- reason -> {dropped, from, to, reason}
        appended_total = 0, duplicates_total = 0,
        -- events queued and taken out of the queue (appended or shed), ever: the host's
        -- wait_durable waits until what was queued before it is taken, then synced
        enqueued_total = 0, taken_total = 0, settled_total = 0,
    }, Log)
end

function Log:depth() return self.queued end

-- At most max events per chunk (the host's batch: events per group commit); the chunk's
-- bytes follow (256 bytes an event: a reject is ~200; a chunk of larger ones closes when
-- full, with fewer events).
function Log:set_chunk(max)
    if type(max) ~= "number" or max < 1 or floor(max) ~= max then
        error("ron.audit: set_chunk expects an integer >= 1", 2)
    end
    self.chunk_max = max
    self.chunk_bytes = math.min(math.max(max * 256 + RESERVE, 65536), 4 * 1024 * 1024)
    self.spare = {}
end

-- The chunk the next event goes into (a new one when the tail is full).
local function tail_chunk(self)
    local c = self.chunks[self.c_tail]
    if c and c.n < self.chunk_max and c.cap - c.len >= RESERVE then return c end
    c = self.spare[#self.spare]
    if c then
        self.spare[#self.spare] = nil
        c.len, c.n, c.ts, c.what, c.gaps = 0, 0, {}, {}, nil
    else
        c = { buf = ffi.new("uint8_t[?]", self.chunk_bytes), len = 0, n = 0, ts = {}, what = {},
              cap = self.chunk_bytes }
    end
    self.c_tail = self.c_tail + 1
    self.chunks[self.c_tail] = c
    return c
end

-- Encodes ev into chunk c (packed: len u32 BE | bytes). -> true | nil, err
local function pack(self, c, ev)
    local rc = C.rau_record_encode(self.writer_id, self.stream, 1, nil, ev, c.buf + c.len + 4,
                                   4096, len_out)
    if rc ~= 0 then return nil, err_text(rc) end
    local n, p = tonumber(len_out[0]), c.buf + c.len
    p[0], p[1], p[2], p[3] = rshift(n, 24), band(rshift(n, 16), 255), band(rshift(n, 8), 255),
                             band(n, 255)
    c.len = c.len + 4 + n
    c.n = c.n + 1
    return true
end

-- What a shed event was, for its Gap record's `kinds`: its kind, and its source when it
-- names one as a short word (a reject's: "reject.ingest", "reject.http"; the daemon's
-- sources are its own names, and a source that is not one such word is left out, so a
-- gap record stays small whatever an emitter puts there).
local function what_of(kind, attrs)
    local src = type(attrs) == "table" and attrs.source
    if type(src) == "string" and #src <= 32 and src:find("^[%w_%-]+$") then
        return kind .. "." .. src
    end
    return kind
end
_M.what_of = what_of

local KINDS_MAX = 16 -- (I-7) distinct kinds a Gap record names; past them, "other"

-- Counts one shed event under reason and folds it into that reason's pending Gap record
-- (AUD-I-18), by what it was (what_of; nil: "unknown"). The host uses it for its own shed
-- reasons (a stalled disk, a deadline, a failed log). last_shed_ms: the newest shed event's
-- time (the daemon's readiness, AUD-I-42).
function Log:shed(reason, ts_ms, what)
    self.drops[reason] = (self.drops[reason] or 0) + 1
    if ts_ms > (self.last_shed_ms or 0) then self.last_shed_ms = ts_ms end
    local g = self.gaps[reason]
    if not g then
        g = { dropped = 0, from = ts_ms, to = ts_ms, reason = reason, kinds = {}, n_kinds = 0 }
        self.gaps[reason] = g
        self.n_gaps = self.n_gaps + 1
    end
    g.dropped = g.dropped + 1
    if ts_ms < g.from then g.from = ts_ms end
    if ts_ms > g.to then g.to = ts_ms end
    what = what or "unknown"
    if not g.kinds[what] then
        if g.n_kinds >= KINDS_MAX then what = "other" end
        if not g.kinds[what] then g.n_kinds = g.n_kinds + 1 end
    end
    g.kinds[what] = (g.kinds[what] or 0) + 1
end

-- A Gap record's `kinds`: "what:count,..." sorted by what (their counts sum to dropped).
local function kinds_text(kinds)
    local names = {}
    for w in pairs(kinds) do names[#names + 1] = w end
    table.sort(names)
    for i, w in ipairs(names) do names[i] = w .. ":" .. kinds[w] end
    return table.concat(names, ",")
end

-- Checks an event (nil, err when it could not be encoded) without queueing it.
function Log:check(kind, attrs, ts_ms)
    local ev, err = fill_event(kind, attrs, ts_ms)
    if not ev then return nil, err end
    local rc = C.rau_record_encode(self.writer_id, self.stream, 1, nil, ev, scratch, 4096, len_out)
    if rc ~= 0 then return nil, err_text(rc) end
    return true
end

-- AUD-I-17: bounded queue, shed on full with a typed error and a counter.
function Log:emit(kind, attrs, ts_ms)
    if not self.h then return nil, "Closed: log closed" end
    if self.queued >= self.cap then
        local ok, err = self:check(kind, attrs, ts_ms)
        if not ok then return nil, err end
        self:shed("audit_backpressure", ts_ms, what_of(kind, attrs))
        return nil, "Busy: audit queue full (" .. self.cap .. "), event shed"
    end
    local ev, err = fill_event(kind, attrs, ts_ms)
    if not ev then return nil, err end
    local c = tail_chunk(self)
    local ok
    ok, err = pack(self, c, ev)
    if not ok then return nil, err end
    c.ts[c.n], c.what[c.n] = ts_ms, what_of(kind, attrs)
    self.queued = self.queued + 1
    self.enqueued_total = self.enqueued_total + 1
    return true
end

-- The queue's first chunk, taken out of the queue (nil when the queue is empty and no Gap
-- record waits). When the queue is empty after it, the pending Gap records (one per shed
-- reason, in reason order) are packed at its end (AUD-I-18). The caller appends it with
-- apply() (here, or on the threadpool: offload.audit_sync) and then gives it back with
-- release().
function Log:take()
    local c
    if self.c_head <= self.c_tail then
        c = self.chunks[self.c_head]
        self.chunks[self.c_head] = nil
        self.c_head = self.c_head + 1
        self.queued = self.queued - c.n
        self.taken_total = self.taken_total + c.n
    end
    if self.queued == 0 and self.n_gaps > 0 then
        if not c then
            c = tail_chunk(self)
            self.chunks[self.c_tail] = nil
            self.c_tail = self.c_tail - 1
        end
        local reasons = {}
        for r in pairs(self.gaps) do reasons[#reasons + 1] = r end
        table.sort(reasons)
        -- head_seq: the chain's head when the gap is packed. Nothing of this log is being
        -- appended now (a chunk is taken after the previous one is in), so it grows between
        -- two gaps of one reason, across reopens too: two gaps with the same counts in the
        -- same milliseconds stay two records instead of folding into one (AUD-I-6 dedupe;
        -- a queue of one under 8 connections lost 5 shed events that way, AUD-I-18).
        local head = self.h and self:stats().head_seq or 0
        for _, r in ipairs(reasons) do
            if c.cap - c.len < RESERVE then break end -- the rest: with the next chunk
            local g = self.gaps[r]
            local ev = fill_event("gap", { dropped = g.dropped, from_ts_ms = g.from,
                                           to_ts_ms = g.to, reason = g.reason,
                                           head_seq = head, kinds = kinds_text(g.kinds) }, g.to)
            assert(pack(self, c, ev))
            c.gaps = (c.gaps or 0) + 1
            self.gaps[r] = nil
            self.n_gaps = self.n_gaps - 1
        end
    end
    return c
end

-- Appends a taken chunk at the chain head on this thread (one rau_log_append_packed call).
-- -> true | nil, err
function Log:apply(c)
    if not self.h then return nil, "Closed: log closed" end
    local rc = C.rau_log_append_packed(self.h, c.buf, c.len, batch_out)
    self:count(tonumber(batch_out[0].appended), tonumber(batch_out[0].duplicates))
    if rc ~= 0 then return nil, err_text(rc) end
    self:settle(c)
    return true
end

-- A taken chunk's events are in the chain (appended, or folded as duplicates): what
-- wait_durable counts, since taken_total moves before the chunk's append is done.
function Log:settle(c)
    self.settled_total = self.settled_total + c.n - (c.gaps or 0)
end

-- Counts a batch's outcome (appended records, duplicates): apply() and the threadpool's.
function Log:count(appended, duplicates)
    self.appended_total = self.appended_total + appended
    self.duplicates_total = self.duplicates_total + duplicates
end

-- Gives a chunk back for reuse once nothing reads it any more.
function Log:release(c)
    if c and c.cap == self.chunk_bytes and #self.spare < SPARE then
        self.spare[#self.spare + 1] = c
    end
end

-- Sheds every queued event as reason (counted, folded into that reason's Gap record).
function Log:shed_queued(reason)
    while self.c_head <= self.c_tail do
        local c = self.chunks[self.c_head]
        self.chunks[self.c_head] = nil
        self.c_head = self.c_head + 1
        for i = 1, c.n do self:shed(reason, c.ts[i], c.what[i]) end
        self.queued = self.queued - c.n
        self.taken_total = self.taken_total + c.n
        self.settled_total = self.settled_total + c.n -- shed: never appended, not awaited
    end
end

-- Appends the queued events (chunk by chunk; max: stop once at least max events were taken)
-- at the chain head, buffered, and the Gap records once the queue is empty (AUD-I-18). No
-- I/O unless the group-commit buffer fills. Returns the number of events taken from the
-- queue.
function Log:append_queued(max)
    if not self.h then return nil, "Closed: log closed" end
    local n = 0
    while (self.queued > 0 or self.n_gaps > 0) and (not max or n < max or self.queued == 0) do
        local c = self:take()
        if not c then break end
        n = n + c.n - (c.gaps or 0)
        local ok, err = self:apply(c)
        self:release(c)
        if not ok then return nil, err end
    end
    return n
end

-- Group commit of what was appended: one write, one fdatasync (AUD-I-12).
function Log:sync()
    if not self.h then return nil, "Closed: log closed" end
    local rc = C.rau_log_sync(self.h)
    if rc ~= 0 then return nil, err_text(rc) end
    return true
end

-- append_queued(max), then sync(): the whole drain on the caller's thread.
function Log:drain(max)
    local n, err = self:append_queued(max)
    if not n then return nil, err end
    local ok
    ok, err = self:sync()
    if not ok then return nil, err end
    return n
end

-- The handle as a number (uintptr_t), for a sync on the libuv threadpool
-- (ron.audit.offload.audit_sync); the log must stay open meanwhile.
function Log:ptr()
    return self.h and tonumber(ffi.cast("uintptr_t", self.h)) or nil
end

-- The last signed checkpoint of the chain: { origin, size, root (64 hex digits), note } or
-- nil when there is none yet. The ledger carries it in its events (docs/AUDIT.md).
local cp_size, cp_root = ffi.new("uint64_t[1]"), ffi.new("uint8_t[32]")
local cp_note = ffi.new("char[?]", 1024)
-- How the open went (AUD-I-37): { head_used = true | false, decoded = records decoded with
-- every check, hashed = records only hashed (the dedupe window), why = why the head file was
-- not used ("" when it was, or when the log was empty) }; nil after close.
function Log:open_info()
    if not self.h then return nil end
    C.rau_log_open_info(self.h, open_info_buf)
    local o = open_info_buf[0]
    return { head_used = o.head_used ~= 0, decoded = tonumber(o.decoded),
             hashed = tonumber(o.hashed), why = ffi.string(o.why) }
end

function Log:latest_checkpoint()
    if not self.h then return nil, "Closed: log closed" end
    local rc = C.rau_log_latest_checkpoint(self.h, cp_size, cp_root, cp_note, 1024, len_out)
    if rc == C.RAU_ENOTFOUND then return nil end
    if rc ~= 0 then return nil, err_text(rc) end
    local note = ffi.string(cp_note, len_out[0])
    return { origin = note:match("^([^\n]*)"), size = tonumber(cp_size[0]),
             root = hex(cp_root, 32), note = note }
end

-- Why the log's last failing system call failed (AUD-I-14): errno (0: none) and the text
-- "write <file>: No space left on device (ENOSPC)" (rau_log_failure).
function Log:failure()
    if not self.h then return 0, "" end
    local e = C.rau_log_failure(self.h, errbuf, 512)
    return tonumber(e), ffi.string(errbuf)
end

-- Lets go of the handle for the threadpool's reopen (AUD-I-42): its number, or nil when
-- there is none; until attach(), stats() answers the figures it had and emit() refuses.
function Log:detach()
    local h = self.h
    if not h then return nil end
    local final = ffi.new("rau_log_stats_t")
    C.rau_log_stats(h, final)
    self.final, self.h = final, nil
    ffi.gc(h, nil)
    return tonumber(ffi.cast("uintptr_t", h))
end

-- Takes the handle a reopen made (a number from open_ptr).
function Log:attach(ptr)
    self.h = handle(ptr)
end

function Log:checkpoint()
    local rc = C.rau_log_checkpoint(self.h)
    if rc ~= 0 then return nil, err_text(rc) end
    return true
end

function Log:stats()
    -- after close: the figures the log had when it closed (the handle is gone)
    if self.h then
        C.rau_log_stats(self.h, stats_buf)
    else
        stats_buf[0] = self.final
    end
    local s = stats_buf[0]
    return {
        head_seq = tonumber(s.head_seq), durable_seq = tonumber(s.durable_seq),
        syncs = tonumber(s.syncs), duplicates = tonumber(s.duplicates),
        checkpoints = tonumber(s.checkpoints), head_hash = hex(s.head_hash, 32),
        queue_depth = self:depth(), drops = self.drops,
    }
end

-- The queue's families (the shed counts by reason, the events queued), into out: this log's
-- /metrics, and ron.audit.host's (a sharded host: the chains' sums).
function _M.render_queue(out, drops, depth)
    FAM.drops:render_map(out, drops)
    FAM.queue_depth:render(out, { { "audit_work", depth } })
    return out
end

-- Prometheus text for the host's /metrics.
function Log:metrics()
    return metrics.text(_M.render_queue({}, self.drops, self:depth()))
end

function Log:close()
    if not self.h then return true end
    local h = self.h
    local final = ffi.new("rau_log_stats_t")
    C.rau_log_stats(h, final) -- (what stats() answers once closed)
    self.final = final
    self.h = nil
    ffi.gc(h, nil)
    local rc = C.rau_log_close(h)
    if rc ~= 0 then return nil, err_text(rc) end
    return true
end

-- A signer key file as an open would load it: true | nil, "Name: why" (never its contents:
-- AUD-I-11); a witness's cosignature key is refused.
local signer_out = ffi.new("rau_signer_t *[1]")
function _M.check_key(path)
    local rc = C.rau_signer_load(path, signer_out)
    if rc ~= 0 then return nil, err_text(rc) end
    local cosigner = C.rau_signer_is_cosigner(signer_out[0]) == 1
    C.rau_signer_free(signer_out[0])
    if cosigner then return nil, "BadKey: a witness's cosignature key signs no checkpoint" end
    return true
end

-- Verifies a log directory (AUD-I-15): true, records or nil, problems ({where, what}...).
function _M.verify(dir, vkey)
    local problems = {}
    local cb = ffi.cast("rau_report_fn", function(_, where, what)
        problems[#problems + 1] = { where = ffi.string(where), what = ffi.string(what) }
    end)
    local recs = ffi.new("uint64_t[1]")
    local rc = C.rau_verify_dir(dir, vkey, cb, nil, recs)
    cb:free()
    if rc < 0 then return nil, { { where = dir, what = err_text(rc) } } end
    if #problems > 0 then return nil, problems end
    return true, tonumber(recs[0])
end

return _M
