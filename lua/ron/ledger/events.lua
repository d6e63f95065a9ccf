-- ron.ledger.events: the kinds of the ledger's event feed, their ids and their data, written
-- once for the engine that appends them, the store's upgrade that backfills them, `ledger
-- verify` that checks them against the rows they name, and the feed's readers (the wallet's
-- cache, the audit trail's feed). docs/LEDGER-FORMAT.md §8 "Events".
--
--   local E = require("ron.ledger.events")
--   E.TRANSFER, E.ACCOUNT, E.REJECTION, E.UPGRADE          -- kinds
--   E.account_id(bytes)        -- the event id of an account version: its id and version
--   E.rejection_id(intent)     -- the event id of an intent's stored rejection
--   E.transfer_data(x), E.rejection_data(x), E.decode(data) -- the engine's event data
--   E.names_transfer(kind)     -- does the event's id name a transfer (transfer, shortfall)
--
-- Every id is 32 bytes, like a transfer id, so a reader that looks an event's id up as a
-- transfer finds nothing instead of misusing the store.
local codec = require("ron.ledger.codec")

local pcall, rep, type = pcall, string.rep, type

local _M = {
    TRANSFER = "transfer",        -- a committed transfer; id = the transfer id
    ACCOUNT = "account",          -- an account version; data = its canonical bytes
    REJECTION = "rejection",      -- an intent's stored rejection; data = the outcome
    UPGRADE = "ledger.upgrade",   -- the store's upgrade to schema 3 (store/upgrade.lua)
    SHORTFALL = "usage.shortfall", -- the rater: a wallet did not cover a charge
    LOSS = "usage.loss",          -- the rater: an accepted loss record
    CHECKPOINT = "audit.checkpoint", -- ron.ledger.attest
}

-- The kinds whose id is a transfer's id.
local TRANSFER_IDS = { [_M.TRANSFER] = true, [_M.SHORTFALL] = true }
function _M.names_transfer(kind) return TRANSFER_IDS[kind] == true end

-- The kinds that move no money: a reader of the feed that keeps balances skips them (an
-- account event changes no balance; its account's next transfer is an event of its own).
_M.NO_MONEY = { [_M.ACCOUNT] = true, [_M.REJECTION] = true, [_M.UPGRADE] = true,
                [_M.LOSS] = true, [_M.CHECKPOINT] = true }

-- An account version's event id: its canonical bytes' account id and version (bytes 3..26,
-- docs/LEDGER-FORMAT.md §3) and 8 zero bytes: one event per (account, version), and the id
-- says which without a lookup.
local ZERO8 = rep("\0", 8)
function _M.account_id(bytes) return bytes:sub(3, 26) .. ZERO8 end

-- An intent's rejection event id: SHA-256 of a domain tag and the intent (an intent holds
-- one outcome, so one rejection event at most).
function _M.rejection_id(intent)
    return codec.sha256("ron-ledger rejection v1\n" .. intent)
end

-- The upgrade marker's id (one per book).
_M.UPGRADE_ID = codec.sha256("ron-ledger upgrade v3")
_M.UPGRADE_DATA = "schema 3"

-- A transfer event's data: what the transfer's canonical bytes do not hold and its rows
-- must agree with. x = { intent, kind ("commit" | "reverse"), target?, body_hash,
-- created_at_ms, keys? } (keys: other intents-table keys naming the same request, e.g. the
-- wallet's Idempotency-Key row).
-- (its fields in the codec's order: one per committed transfer, encoded without a table of
-- them and a sort of their names, issue 25)
local TRANSFER_FIELDS = { "body_hash", "created_at_ms", "intent", "keys", "kind", "target" }
function _M.transfer_data(x)
    return codec.encode_fields(TRANSFER_FIELDS, x)
end

-- A rejection event's data: the stored outcome, field for field (code, message, body_hash),
-- its intent and the keys naming the same request.
function _M.rejection_data(x)
    return codec.encode { intent = x.intent, code = x.code, message = x.message,
                          body_hash = x.body_hash, keys = x.keys }
end

-- The engine's event data as a table, or nil when it does not decode (a hostile store).
function _M.decode(data)
    if type(data) ~= "string" then return nil end
    local ok, v = pcall(codec.decode, data)
    if ok and type(v) == "table" then return v end
    return nil
end

return _M
