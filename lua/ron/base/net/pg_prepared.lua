-- ron.base.net.pg_prepared: a connection's named prepared statements for a pipeline
-- (ron.base.net.postgres, db:pipeline(list, { prepare = true }); issue 25: the server parsed
-- and planned every statement of every phase again, about as long as it ran them).
--
-- An entry { sql, params, prep = true } is a statement whose text repeats: the second time a
-- connection sees the text it is sent as a prepare of its own (pq.c { sql, prepare = name },
-- PQsendPrepare) and run by name ({ sql, params, name = name }, PQsendQueryPrepared); after
-- that, by name only. The server then parses once per connection and, after its first
-- executions, keeps a generic plan. Named statements live as long as the session, whatever
-- the transactions do (a rolled-back pipeline keeps them); one whose prepare did not run (an
-- earlier statement of its transaction failed: aborted) is not remembered, and its name is
-- never handed out again. A reconnect is a new session: nothing remembered. Bounded: at most
-- MAX names per connection (then plainly), texts seen once at most MAX_SEEN (then
-- forgotten). "26000" (no such prepared statement: a session reset behind our back) forgets
-- the connection's names.
local ipairs, pairs, type = ipairs, pairs, type

local _M = { MAX = 256, MAX_SEEN = 1024 }

local function state_of(db, raw)
    local st = db.prepared
    if not st or st.raw ~= raw then
        st = { raw = raw, names = {}, n = 0, seen = {}, n_seen = 0 }
        db.prepared = st
    end
    return st
end

-- list with its preparable entries rewritten for connection raw of db: -> the list to send,
-- map (map[i] = the sent entry of list[i]) and fresh ({ [k] = text }: the prepares sent).
function _M.rewrite(db, raw, list)
    local st = state_of(db, raw)
    local out, map, fresh = {}, {}, {}
    for i, e in ipairs(list) do
        local text = type(e) == "table" and e.prep and e[1]
        local name = text and st.names[text]
        if text and not name and st.n < _M.MAX then
            if st.seen[text] then
                st.n = st.n + 1
                name = "ron_p" .. st.n
                out[#out + 1] = { text, prepare = name }
                fresh[#out] = { text = text, name = name }
            else
                if st.n_seen >= _M.MAX_SEEN then st.seen, st.n_seen = {}, 0 end
                st.seen[text], st.n_seen = true, st.n_seen + 1
            end
        end
        out[#out + 1] = name and { text, e[2], name = name } or e
        map[i] = #out
    end
    return out, map, fresh
end

-- The answer to the caller's list from the answer to the sent one; the prepares that ran
-- remembered.
function _M.answer(db, raw, rows, map, fresh)
    local st = state_of(db, raw)
    for k, f in pairs(fresh) do
        local r = rows[k]
        if r and not r.error and not r.aborted then st.names[f.text] = f.name end
    end
    local out = {}
    for i, k in ipairs(map) do
        local r = rows[k]
        if r and r.sqlstate == "26000" then db.prepared = nil end
        out[i] = r
    end
    return out
end

return _M
