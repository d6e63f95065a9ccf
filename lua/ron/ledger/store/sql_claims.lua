-- ron.ledger.store.sql_claims: where the SQLite store keeps the engine's claims (schema 4,
-- issue 25; docs/LEDGER.md "Intents").
--
-- The engine claims an intent under the key 256 bytes 0xff ‖ intent (ron.ledger.phases
-- CLAIM_PREFIX): no caller's intent (1..255 bytes) can be that long, so the claim and the
-- outcome share one key space and one pair of primitives (put_intent, get_intent and their
-- batch forms) on every store. Stored as such the claim was a third of the intents rows and
-- two thirds of their bytes (its 303-byte key twice: the rowid table and its key index),
-- about a fifth of a SQLite ledger. SQLite keeps it instead in the table `claims`, keyed by
-- the intent alone (WITHOUT ROWID: the key once): the primitives take and answer the same
-- keys, only the row's place differs, so the engine, the memory store and PostgreSQL
-- (whose layout is unchanged) never see it. A claim key and an intent never collide there
-- either: they are rows of two tables.
--
--   claims.PREFIX                      the claim keys' 256 bytes
--   claims.intent_of(store, key)       -> the intent when key is a claim key the store keeps
--                                         in `claims` (SQLite), else nil
--   claims.split(store, keys)          -> the intents table's keys, the claims' intents
--   claims.key(intent)                 -> the claim key of an intent
local byte, find, rep, sub = string.byte, string.find, string.rep, string.sub

local _M = {}

local PREFIX = rep("\255", 256)
_M.PREFIX = PREFIX

function _M.intent_of(store, key)
    -- (the first byte first: an intent rarely starts with 0xff. The prefix is matched in
    -- place, not cut out: a 256-byte string made is one LuaJIT hashes by three of its bytes,
    -- and every such string of one length shares its bucket, issue 25)
    if store.dialect ~= "sqlite" or #key <= 256 or byte(key, 1) ~= 255 then return nil end
    local _, last = find(key, "^\255+")
    if last < 256 then return nil end
    return sub(key, 257)
end

function _M.key(intent) return PREFIX .. intent end

function _M.split(store, keys)
    local plain, held = {}, {}
    for _, k in ipairs(keys) do
        local c = _M.intent_of(store, k)
        if c then held[#held + 1] = c else plain[#plain + 1] = k end
    end
    return plain, held
end

return _M
