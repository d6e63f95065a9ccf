-- ron.ledger.verify.schema: the store's schema is the one this code creates (docs/LEDGER.md
-- "What verify proves"): its keys are what make a row unique (one posting per id, one event
-- per seq, one outcome per intent), so verify reads each table by its key and trusts no
-- duplicate away only once the keys are checked. SQLite: every table, index and trigger of
-- sqlite_master is the DDL's text (ron.ledger.store.schema), nothing else but SQLite's own;
-- PostgreSQL: every primary key and unique constraint and the projection's two triggers.
local schema = require("ron.ledger.store.schema")
local scan = require("ron.ledger.store.scan")

local concat, ipairs, pairs, sort, tostring = table.concat, ipairs, pairs, table.sort, tostring

local _M = {}

local function norm(text)
    return (tostring(text):gsub("IF NOT EXISTS ", ""):gsub("%s+", " "):gsub("^ ", ""))
end

local function sqlite(ctx)
    local want = {}
    for _, stmt in ipairs(schema.ddl("sqlite", "")) do
        local kind, name = stmt:match("^CREATE (%u+) IF NOT EXISTS ([%w_]+)")
        if kind then want[name] = { kind = kind:lower(), sql = norm(stmt) } end
    end
    local rows, err = ctx.store.drv:read("SELECT type, name, sql FROM sqlite_master", { n = 0 })
    if not rows then return ctx.problem("schema", "cannot read: %s", tostring(err)) end
    local seen = {}
    for _, r in ipairs(rows) do
        local kind, name, text = r[1], r[2], r[3]
        local w = want[name]
        seen[name] = true
        if w then
            if w.kind ~= kind or w.sql ~= norm(text) then
                ctx.problem("schema " .. name, "is not the %s this code creates: %s", w.kind,
                            norm(text))
            end
        elseif not tostring(name):match("^sqlite_") then
            ctx.problem("schema " .. tostring(name), "a %s this code does not create",
                        tostring(kind))
        end
    end
    for name, w in pairs(want) do
        if not seen[name] then ctx.problem("schema " .. name, "the %s is missing", w.kind) end
    end
end

-- PostgreSQL: the keys (primary: each table's scan key; unique: transfers' id, events'
-- (book, transfer_id, kind)) and the projection's triggers.
local UNIQUE = { transfers = { "UNIQUE (id)" }, events = { "UNIQUE (book, transfer_id, kind)" } }
local TRIGGERS = { "postings.postings_balance_ins_s", "postings.postings_balance_upd_s" }

local function postgres(ctx)
    local db, nsp = ctx.store.drv.db, ctx.store.schema
    local want = {}
    for name, t in pairs(scan.TABLES) do
        local w = { "PRIMARY KEY (" .. concat(t.key, ", ") .. ")" }
        for _, u in ipairs(UNIQUE[name] or {}) do w[#w + 1] = u end
        sort(w)
        want[name] = concat(w, "; ")
    end
    local rows, err = db:query("SELECT c.relname, pg_get_constraintdef(k.oid) FROM "
        .. "pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON "
        .. "n.oid = c.relnamespace WHERE n.nspname = '" .. nsp .. "' AND k.contype IN "
        .. "('p', 'u') ORDER BY 1, 2")
    if not rows then return ctx.problem("schema", "cannot read: %s", tostring(err)) end
    local got = {}
    for i = 1, rows.n or #rows do
        local t, def = rows[i][1], rows[i][2]
        got[t] = got[t] and (got[t] .. "; " .. def) or def
    end
    for name, w in pairs(want) do
        if got[name] ~= w then
            ctx.problem("schema " .. name, "its keys are %s, this code creates %s",
                        tostring(got[name] or "none"), w)
        end
    end
    rows, err = db:query("SELECT c.relname || '.' || t.tgname FROM pg_trigger t JOIN pg_class "
        .. "c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
        .. "n.nspname = '" .. nsp .. "' AND NOT t.tgisinternal ORDER BY 1")
    if not rows then return ctx.problem("schema", "cannot read: %s", tostring(err)) end
    local have = {}
    for i = 1, rows.n or #rows do have[#have + 1] = rows[i][1] end
    if concat(have, ", ") ~= concat(TRIGGERS, ", ") then
        ctx.problem("schema postings", "its triggers are %s, this code creates %s",
                    concat(have, ", "), concat(TRIGGERS, ", "))
    end
end

function _M.check(ctx)
    local st = ctx.store
    if st.dialect == "sqlite" and st.drv and st.drv.read then return sqlite(ctx) end
    if st.dialect == "postgres" and st.drv and st.drv.db then return postgres(ctx) end
    -- (the memory store, an offloaded SQLite store: no schema of their own to read here)
end

return _M
