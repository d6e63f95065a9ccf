-- ron.accounting.export.exporters.postgres: the PostgreSQL ledger (docs/EXPORT.md, "PostgreSQL
-- ledger"). The DATABASE enforces the export contract: one row per slice keyed by
-- (tenant, dimension, seq) holding the canonical bytes, a per-stream head moved by
-- compare-and-set inside one plpgsql function call (one transaction), so any number of
-- exporters in any number of processes racing on one stream store exactly one chain.
--
--   local postgres = require("ron.accounting.export.exporters.postgres")
--   local e = postgres.new {
--       conninfo = "host=127.0.0.1 port=5432 dbname=ledger user=ron",  -- or postgresql://
--       schema = "ron_accounting",    -- [a-z_][a-z0-9_]*, created if missing
--       connections = 2,              -- pool size (1..64): puts of different streams overlap
--       connect_timeout_ms = 5000, query_timeout_ms = 5000,
--       backoff = policy,             -- reconnect spacing (default backoff.exponential)
--       create_schema = true }        -- false: the schema must exist (a migration made it)
--   e:put(slice)  -> ok | dup | conflict | gap | retry_network | retry_remote_5xx |
--                    retry_timeout [, detail], or nil, err (a local failure)
--   e:head(tenant, dimension) -> { seq = n, b3 = hex } | nil | nil, err
--   e:put_many(slices)         -> { {status, detail} | {nil, err} per slice } (one round trip)
--   e:list_heads()             -> { { tenant =, dimension =, seq =, b3 = }, ... } | nil, err
--   e:close()
--   e:stats()     -> { puts, ok, dup, conflict, gap, retry_network, retry_remote_5xx,
--                      retry_timeout, fail, connects, connect_failures }
--   postgres.schema_sql(schema) -> the DDL (idempotent; docs/EXPORT.md shows it)
--
-- put() and head() wait for the database: call them from a task (the export runtime's
-- workers do). new() does no I/O (it may run in the main chunk): the schema is created
-- (idempotently, under an advisory lock: concurrent CREATE OR REPLACE FUNCTION in two
-- sessions would fail) the first time a put or head reaches the database.
--
-- Classification (the class of ron.base.net.postgres): network -> retry_network; timeout, and
-- SQLSTATE 57014 (statement_timeout, canceled) or 55P03 (lock_timeout) -> retry_timeout;
-- a server error of class 08 (connection), 40 (serialization, deadlock), 53 (resources),
-- 57 (operator intervention: shutdown, restart), 58 (system), XX (internal), or a server
-- refusal without SQLSTATE (starting up, too many clients) -> retry_remote_5xx; any other
-- SQLSTATE (a bug, missing privileges) -> nil, "ExporterError: ..." (a local failure, which
-- the runtime retries as well). A missing schema object (3F000, 42P01, 42883) re-runs the
-- schema creation on the next put.
local exporters = require("ron.accounting.export.exporters")
local loss = require("ron.accounting.export.loss")
local pg = require("ron.base.net.postgres")
local check = require("ron.base.check")
local task = require("ron.base.task")

local type, error, tostring, tonumber, setmetatable, format =
      type, error, tostring, tonumber, setmetatable, string.format

local _M = { DEFAULT_SCHEMA = "ron_accounting", MAX_CONNECTIONS = pg.MAX_POOL }

local OPTS = { conninfo = true, schema = true, connections = true, connect_timeout_ms = true,
               query_timeout_ms = true, backoff = true, create_schema = true }

local ZERO32_HEX = string.rep("00", 32)

-- Taken by the schema creation of every exporter (any schema): a constant advisory key.
local SCHEMA_LOCK_KEY = "7224713893450812345" -- a bigint literal (above 2^53: text)

-- The DDL. One transaction; the function is replaced (same body) by every exporter that
-- starts, serialised by the advisory lock.
function _M.schema_sql(schema)
    if not pg.valid_ident(schema) then
        error("postgres.schema_sql: schema must match [a-z_][a-z0-9_]* (at most 63 bytes)", 2)
    end
    local S = '"' .. schema .. '"'
    return (([[
BEGIN;
SELECT pg_advisory_xact_lock(@KEY@);
CREATE SCHEMA IF NOT EXISTS @S@;
CREATE TABLE IF NOT EXISTS @S@.meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO @S@.meta (key, value) VALUES ('ledger_version', '1') ON CONFLICT (key) DO NOTHING;
CREATE TABLE IF NOT EXISTS @S@.slices (
    tenant         uuid        NOT NULL,
    dimension      text        NOT NULL CHECK (dimension ~ '^[a-z][a-z0-9_]{0,31}$'),
    seq            bigint      NOT NULL CHECK (seq >= 1),
    window_start_s bigint      NOT NULL,
    window_len_s   integer     NOT NULL CHECK (window_len_s > 0),
    b3             bytea       NOT NULL CHECK (length(b3) = 32),
    prev_b3        bytea       NOT NULL CHECK (length(prev_b3) = 32),
    body           bytea       NOT NULL CHECK (length(body) BETWEEN 1 AND 1048576),
    prev_seq       bigint      GENERATED ALWAYS AS (NULLIF(seq - 1, 0)) STORED,
    stored_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, dimension, seq),
    UNIQUE (tenant, dimension, seq, b3),
    CHECK (seq > 1 OR prev_b3 = '\x@ZERO@'::bytea),
    FOREIGN KEY (tenant, dimension, prev_seq, prev_b3)
        REFERENCES @S@.slices (tenant, dimension, seq, b3)
);
CREATE TABLE IF NOT EXISTS @S@.heads (
    tenant     uuid        NOT NULL,
    dimension  text        NOT NULL,
    seq        bigint      NOT NULL CHECK (seq >= 0),
    b3         bytea       NOT NULL CHECK (length(b3) = 32),
    head_seq   bigint      GENERATED ALWAYS AS (NULLIF(seq, 0)) STORED,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, dimension),
    CHECK (seq > 0 OR b3 = '\x@ZERO@'::bytea),
    FOREIGN KEY (tenant, dimension, head_seq, b3)
        REFERENCES @S@.slices (tenant, dimension, seq, b3)
);
CREATE OR REPLACE FUNCTION @S@.ron_put(p_tenant uuid, p_dimension text, p_seq bigint,
        p_window_start_s bigint, p_window_len_s integer, p_b3 bytea, p_prev_b3 bytea,
        p_body bytea)
    RETURNS text LANGUAGE plpgsql VOLATILE AS $ron_put$
DECLARE
    h_seq bigint;
    h_b3  bytea;
    s_b3  bytea;
BEGIN
    -- The stream's head row, locked: every writer of the stream queues here. Under READ
    -- COMMITTED a locking read that waited returns the row as the writer before us
    -- committed it, and each later statement sees that writer's slice row.
    SELECT seq, b3 INTO h_seq, h_b3 FROM @S@.heads
     WHERE tenant = p_tenant AND dimension = p_dimension FOR UPDATE;
    IF NOT FOUND THEN
        -- A new stream: two first writers both insert; the second waits for the first
        -- to commit, then does nothing and locks the first one's row.
        INSERT INTO @S@.heads (tenant, dimension, seq, b3)
        VALUES (p_tenant, p_dimension, 0, '\x@ZERO@'::bytea)
        ON CONFLICT (tenant, dimension) DO NOTHING;
        SELECT seq, b3 INTO h_seq, h_b3 FROM @S@.heads
         WHERE tenant = p_tenant AND dimension = p_dimension FOR UPDATE;
    END IF;
    IF p_seq <= h_seq THEN
        SELECT b3 INTO s_b3 FROM @S@.slices
         WHERE tenant = p_tenant AND dimension = p_dimension AND seq = p_seq;
        IF s_b3 = p_b3 THEN
            RETURN 'dup';
        END IF;
        RETURN 'conflict';
    END IF;
    IF p_seq > h_seq + 1 THEN
        RETURN 'gap';
    END IF;
    IF p_prev_b3 <> h_b3 THEN
        RETURN 'conflict';
    END IF;
    INSERT INTO @S@.slices (tenant, dimension, seq, window_start_s, window_len_s, b3,
                            prev_b3, body)
    VALUES (p_tenant, p_dimension, p_seq, p_window_start_s, p_window_len_s, p_b3,
            p_prev_b3, p_body);
    UPDATE @S@.heads SET seq = p_seq, b3 = p_b3, updated_at = now()
     WHERE tenant = p_tenant AND dimension = p_dimension;
    RETURN 'ok';
END
$ron_put$;
-- A batch of puts in one round trip (put_many): ron_put for each, in the order given, in
-- one transaction. The caller orders the batch by (tenant, dimension, seq), so batches of
-- two writers lock head rows in the same order (no deadlock between them), and a stream's
-- slices keep their seq order.
CREATE OR REPLACE FUNCTION @S@.ron_put_many(p_tenant uuid[], p_dimension text[],
        p_seq bigint[], p_window_start_s bigint[], p_window_len_s integer[], p_b3 text[],
        p_prev_b3 text[], p_body text[])
    RETURNS text[] LANGUAGE plpgsql VOLATILE AS $ron_put_many$
DECLARE
    answers text[] := '{}';
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_tenant, 1), 0) LOOP
        answers := answers || @S@.ron_put(p_tenant[i], p_dimension[i], p_seq[i],
            p_window_start_s[i], p_window_len_s[i], decode(p_b3[i], 'hex'),
            decode(p_prev_b3[i], 'hex'), decode(p_body[i], 'hex'));
    END LOOP;
    RETURN answers;
END
$ron_put_many$;
-- An operator's accepted loss (docs/EXPORT.md §2, "Accepted losses"): one row per given-up
-- seq, its body a loss record (ron.accounting.export.loss, built by the caller), its b3 the
-- record's link_b3 (not a digest: verify checks the record's own form), window 0+1. The
-- caller read the head; if it moved meanwhile the rows no longer follow it: 'moved'.
CREATE OR REPLACE FUNCTION @S@.ron_accept_loss(p_tenant uuid, p_dimension text,
        p_first bigint, p_b3 text[], p_prev_b3 text[], p_body text[])
    RETURNS text LANGUAGE plpgsql VOLATILE AS $ron_accept_loss$
DECLARE
    h_seq bigint;
    h_b3  bytea;
    n     integer := coalesce(array_length(p_body, 1), 0);
BEGIN
    INSERT INTO @S@.heads (tenant, dimension, seq, b3)
    VALUES (p_tenant, p_dimension, 0, '\x@ZERO@'::bytea)
    ON CONFLICT (tenant, dimension) DO NOTHING;
    SELECT seq, b3 INTO h_seq, h_b3 FROM @S@.heads
     WHERE tenant = p_tenant AND dimension = p_dimension FOR UPDATE;
    IF n = 0 OR h_seq + 1 <> p_first OR decode(p_prev_b3[1], 'hex') <> h_b3 THEN
        RETURN 'moved';
    END IF;
    FOR i IN 1 .. n LOOP
        INSERT INTO @S@.slices (tenant, dimension, seq, window_start_s, window_len_s, b3,
                                prev_b3, body)
        VALUES (p_tenant, p_dimension, p_first + i - 1, 0, 1, decode(p_b3[i], 'hex'),
                decode(p_prev_b3[i], 'hex'), decode(p_body[i], 'hex'));
    END LOOP;
    UPDATE @S@.heads SET seq = p_first + n - 1, b3 = decode(p_b3[n], 'hex'), updated_at = now()
     WHERE tenant = p_tenant AND dimension = p_dimension;
    RETURN 'ok';
END
$ron_accept_loss$;
COMMIT;
]]):gsub("@(%u+)@", { S = S, ZERO = ZERO32_HEX, KEY = SCHEMA_LOCK_KEY }))
end

local E = {}
E.__index = E

function _M.new(opts)
    check.options("postgres.new", opts, OPTS)
    if type(opts.conninfo) ~= "string" or opts.conninfo == "" then
        error("postgres.new: conninfo must be a non-empty string", 2)
    end
    local schema = opts.schema or _M.DEFAULT_SCHEMA
    if not pg.valid_ident(schema) then
        error("postgres.new: schema must match [a-z_][a-z0-9_]* (at most 63 bytes)", 2)
    end
    local n = opts.connections or 2
    if type(n) ~= "number" or n ~= math.floor(n) or n < 1 or n > _M.MAX_CONNECTIONS then
        error(format("postgres.new: connections must be an integer in 1..%d",
                     _M.MAX_CONNECTIONS), 2)
    end
    if opts.create_schema ~= nil and type(opts.create_schema) ~= "boolean" then
        error("postgres.new: create_schema must be a boolean", 2)
    end
    local S = '"' .. schema .. '"'
    local self = setmetatable({
        schema = schema,
        create_schema = opts.create_schema ~= false,
        schema_ready = false,
        put_sql = "SELECT " .. S .. ".ron_put($1::uuid, $2::text, $3::bigint, $4::bigint, "
                  .. "$5::integer, decode($6, 'hex'), decode($7, 'hex'), $8::bytea) AS status",
        put_many_sql = "SELECT " .. S .. ".ron_put_many($1::uuid[], $2::text[], $3::bigint[], "
                       .. "$4::bigint[], $5::integer[], $6::text[], $7::text[], $8::text[])"
                       .. "::text AS statuses",
        loss_sql = "SELECT " .. S .. ".ron_accept_loss($1::uuid, $2::text, $3::bigint, "
                   .. "$4::text[], $5::text[], $6::text[]) AS status",
        head_sql = "SELECT seq, encode(b3, 'hex') AS b3 FROM " .. S .. ".heads "
                   .. "WHERE tenant = $1::uuid AND dimension = $2::text",
        heads_sql = "SELECT tenant::text AS tenant, dimension, seq, encode(b3, 'hex') AS b3 "
                    .. "FROM " .. S .. ".heads WHERE seq > 0 ORDER BY tenant, dimension",
        counts = { puts = 0, ok = 0, dup = 0, conflict = 0, gap = 0, retry_network = 0,
                   retry_remote_5xx = 0, retry_timeout = 0, fail = 0 },
    }, E)
    self.pool = pg.pool { conninfo = opts.conninfo, size = n,
                          connect_timeout_ms = opts.connect_timeout_ms,
                          query_timeout_ms = opts.query_timeout_ms, backoff = opts.backoff }
    return self
end

local RETRY_5XX = { ["08"] = true, ["40"] = true, ["53"] = true, ["57"] = true, ["58"] = true,
                    XX = true }
local MISSING = { ["3F000"] = true, ["42P01"] = true, ["42883"] = true }

-- A failure of ron.base.net.postgres onto the export contract.
function E:classify(err, sqlstate, class)
    if class == "network" then return "retry_network", err end
    if class == "timeout" then return "retry_timeout", err end
    if class == "server" then
        if sqlstate == "57014" or sqlstate == "55P03" then return "retry_timeout", err end
        if not sqlstate or RETRY_5XX[sqlstate:sub(1, 2)] then return "retry_remote_5xx", err end
        if MISSING[sqlstate] then self.schema_ready = false end
        return nil, format("ExporterError: PostgreSQL %s: %s", sqlstate, tostring(err))
    end
    return nil, err -- closed, canceled, client
end

-- Creates the schema once: the first task runs the DDL, the others (every worker starts
-- with a put) wait for it on a one-token channel instead of replacing the function too.
function E:ensure_schema()
    if self.schema_ready or not self.create_schema then return true end
    local sched = task.current()
    if self.schema_task ~= sched then -- made in the scheduler that runs the caller
        self.schema_task = sched
        self.schema_lock = sched.channel(1, "pg_schema")
        self.schema_lock:try_send(true)
    end
    local lock = self.schema_lock
    local tok, werr = lock:recv()
    if not tok then return nil, "Canceled: " .. tostring(werr), nil, "canceled" end
    if self.schema_ready then
        lock:try_send(true)
        return true
    end
    local ok, rows, err, st, cls = pcall(self.pool.exec, self.pool, _M.schema_sql(self.schema))
    lock:try_send(true)
    if not ok then error(rows, 0) end
    if not rows then return nil, err, st, cls end
    self.schema_ready = true
    return true
end

local function count(self, status)
    local c = self.counts
    c[status] = (c[status] or 0) + 1
end

local function num_text(v) -- seq may be a uint64_t cdata from 2^53 on
    if type(v) == "number" then return format("%.0f", v) end
    return (tostring(v):gsub("U?LL$", ""))
end

function E:put(s)
    if type(s) ~= "table" or type(s.encode) ~= "function" or type(s.id) ~= "table" then
        error("postgres: put expects a slice", 2)
    end
    self.counts.puts = self.counts.puts + 1
    local ok, err, st, cls = self:ensure_schema()
    if not ok then
        local status, detail = self:classify(err, st, cls)
        count(self, status or "fail")
        return status, detail
    end
    local rows
    rows, err, st, cls = self.pool:query(self.put_sql, {
        s.tenant, s.dimension, num_text(s.id.seq), num_text(s.id.window_start_s),
        num_text(s.id.window_len_s), s.b3, s.prev_b3,
        pg.bytea(s:encode()),
    })
    if not rows then
        local status, detail = self:classify(err, st, cls)
        count(self, status or "fail")
        return status, detail
    end
    local status = rows[1] and rows[1].status
    if status ~= "ok" and status ~= "dup" and status ~= "conflict" and status ~= "gap" then
        count(self, "fail")
        return nil, "ExporterError: ron_put answered " .. tostring(status)
    end
    count(self, status)
    if status == "ok" or status == "dup" then return status end
    return status, format("%s/%s seq %s: %s (PostgreSQL schema %s)", s.tenant, s.dimension,
                          num_text(s.id.seq), status, self.schema)
end

local function hex(b)
    return (b:gsub(".", function(c) return format("%02x", c:byte()) end))
end

-- put_many(slices) -> { {status, detail} | {nil, err} per slice }, in the order given
-- (the runtime batches the puts of all streams through it: one round trip, one
-- transaction; ron_put_many). A failure of the call as a whole (the connection, the
-- server) is every slice's answer, as put() would have given it.
function E:put_many(slices)
    local n = #slices
    if n == 0 then return {} end
    local order = {}
    for i = 1, n do order[i] = i end
    table.sort(order, function(a, b)
        local x, y = slices[a], slices[b]
        if x.tenant ~= y.tenant then return x.tenant < y.tenant end
        if x.dimension ~= y.dimension then return x.dimension < y.dimension end
        if x.id.seq ~= y.id.seq then return x.id.seq < y.id.seq end
        return a < b -- stable: a replay of the same slice answers after the first
    end)
    local cols = { {}, {}, {}, {}, {}, {}, {}, {} }
    for k, i in ipairs(order) do
        local s = slices[i]
        cols[1][k], cols[2][k] = s.tenant, s.dimension
        cols[3][k], cols[4][k] = num_text(s.id.seq), num_text(s.id.window_start_s)
        cols[5][k], cols[6][k], cols[7][k] = num_text(s.id.window_len_s), s.b3, s.prev_b3
        cols[8][k] = hex(s:encode())
    end
    local params = {}
    for c = 1, 8 do params[c] = "{" .. table.concat(cols[c], ",") .. "}" end
    self.counts.puts = self.counts.puts + n
    local out = {}
    local ok, err, st, cls = self:ensure_schema()
    local rows
    if ok then rows, err, st, cls = self.pool:query(self.put_many_sql, params) end
    if not rows then
        local status, detail = self:classify(err, st, cls)
        for i = 1, n do
            count(self, status or "fail")
            out[i] = { status, detail }
        end
        return out
    end
    local answers = {}
    for a in tostring(rows[1] and rows[1].statuses or ""):gmatch("[%a_]+") do
        answers[#answers + 1] = a
    end
    if #answers ~= n then return nil, "ExporterError: ron_put_many answered "
                                      .. tostring(rows[1] and rows[1].statuses) end
    for k, i in ipairs(order) do
        local status, s = answers[k], slices[i]
        count(self, status)
        if status == "ok" or status == "dup" then
            out[i] = { status }
        else
            out[i] = { status, format("%s/%s seq %s: %s (PostgreSQL schema %s)", s.tenant,
                                      s.dimension, num_text(s.id.seq), status, self.schema) }
        end
    end
    return out
end

-- accept_loss{ tenant, dimension, through_seq, link_b3, reason, now_s } -> { from, to } |
-- nil, err: the file ledger's capability (exporters/file.lua), the same records as rows.
function E:accept_loss(o)
    local ok, err = loss.check(o)
    if not ok then return nil, err end
    local h
    h, err = self:head(o.tenant, o.dimension)
    if err then return nil, err end
    local recs
    recs, err = loss.records(o, h and h.seq or 0,
                             h and (h.b3:gsub("%x%x", function(x)
                                 return string.char(tonumber(x, 16)) end))
                               or string.rep("\0", 32))
    if not recs then return nil, err end
    local b3s, prevs, bodies = {}, {}, {}
    for i, r in ipairs(recs) do
        b3s[i], prevs[i], bodies[i] = hex(r.link), hex(r.prev), hex(r.bytes)
    end
    local rows, st, cls
    rows, err, st, cls = self.pool:query(self.loss_sql, {
        o.tenant, o.dimension, num_text(recs[1].seq), "{" .. table.concat(b3s, ",") .. "}",
        "{" .. table.concat(prevs, ",") .. "}", "{" .. table.concat(bodies, ",") .. "}" })
    if not rows then
        local status, detail = self:classify(err, st, cls)
        return nil, status and (status .. ": " .. tostring(detail)) or detail
    end
    if not rows[1] or rows[1].status ~= "ok" then
        return nil, "Busy: the stream's head moved while the loss was being accepted: try again"
    end
    return { from = recs[1].seq, to = recs[#recs].seq }
end

function E:head(tenant, dimension)
    if type(tenant) ~= "string" or type(dimension) ~= "string" then
        error("postgres: head expects (tenant, dimension)", 2)
    end
    local ok, err = self:ensure_schema()
    if not ok then return nil, err end
    local rows, st, cls
    rows, err, st, cls = self.pool:query(self.head_sql, { tenant, dimension })
    if not rows then
        local status, detail = self:classify(err, st, cls)
        return nil, status and (status .. ": " .. tostring(detail)) or detail
    end
    local r = rows[1]
    if not r or tonumber(r.seq) == 0 then return nil end
    return { seq = tonumber(r.seq), b3 = r.b3 }
end

-- Every stream's head (a node that lost its own seeds its meter with them):
-- { { tenant =, dimension =, seq =, b3 = hex }, ... } | nil, err
function E:list_heads()
    local ok, err = self:ensure_schema()
    if not ok then return nil, err end
    local rows, st, cls
    rows, err, st, cls = self.pool:query(self.heads_sql, {})
    if not rows then
        local status, detail = self:classify(err, st, cls)
        return nil, status and (status .. ": " .. tostring(detail)) or detail
    end
    local out = {}
    for i, r in ipairs(rows) do
        out[i] = { tenant = r.tenant, dimension = r.dimension, seq = tonumber(r.seq), b3 = r.b3 }
    end
    return out
end

function E:close()
    self.pool:close()
end

function E:stats()
    local out = exporters.stats(self)
    local ps = self.pool:stats()
    out.connects, out.connect_failures = ps.connects, ps.connect_failures
    return out
end

return _M
