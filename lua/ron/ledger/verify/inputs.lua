-- ron.ledger.verify.inputs: what `ledger verify` cannot check, each with its reason
-- (PRODUCT.md §9: every row of every table is either derived from what is signed or hashed
-- and checked against it, or listed as an input verify cannot check, with the reason).
-- docs/LEDGER.md "What verify proves" holds the same list (spec/ron/ledger/verify_mutation_spec
-- reads both and requires them equal), and the mutation suite accepts a mutation that
-- verify does not name only when an entry here covers its table, column and operation.
--
--   id      the entry's name (docs and specs cite it)
--   table   the table; column: the column ("*" a whole row); rows: which rows
--   ops     the mutations it covers: flip (a value changed), delete, insert
--   kind    which rows, as the mutation suite classifies them ("any": every row)
local _M = {
    { id = "meta-flush", kind = "flush",
      table = "ledger_meta", column = "value", rows = "key `flush`",
      ops = "flip delete",
      why = "random bytes the SQLite store rewrites at every flush (LED-50): a durability "
            .. "mark with no content" },
    { id = "book-meta", kind = "any",
      table = "books", column = "meta", rows = "every row", ops = "flip",
      why = "the operator's free text (`ledger init`, the exporter); nothing reads it" },
    { id = "reservation", kind = "inactive", table = "postings", column = "reservation",
      rows = "Inactive postings", ops = "flip",
      why = "the id of the saga that reserved the posting before consuming it, a random "
            .. "nonce no event records; nothing reads it once the posting is spent" },
    { id = "head-version", kind = "any", table = "heads", column = "version", rows = "every row",
      ops = "flip",
      why = "the lease's acquisition counter (LED-20): no event records acquisitions, and it "
            .. "decides nothing while the lease is free" },
    { id = "claim-message", kind = "claim", table = "intents", column = "message",
      rows = "claims (key 256 bytes 0xff, then the intent)", ops = "flip",
      why = "the saga id that holds the claim, a random nonce no event records; it decides "
            .. "only who drives the intent while it is in flight" },
    { id = "unnamed-key", kind = "unnamed-key", table = "intents", column = "*",
      rows = "status `claimed` rows no event names (a wallet Idempotency-Key whose request "
             .. "reached no outcome: a 503 not retried, a `nonce_used` answer)",
      ops = "flip delete insert",
      why = "no transfer and no rejection names the key; it decides only that key's replays "
            .. "(422 or a new try), never money" },
    { id = "key-message", kind = "named-key", table = "intents", column = "message",
      rows = "status `claimed` rows an event names (a wallet Idempotency-Key)", ops = "flip",
      why = "the nonce text the wallet writes beside the body hash; nothing reads it back" },
    { id = "unindexed", kind = "any",
      table = "transfer_accounts", column = "*", rows = "a missing row",
      ops = "delete",
      why = "which accounts get no history rows (LED-58: `unindexed`) is an engine's "
            .. "configuration, not stored; every present row must name a transfer that pins "
            .. "its account" },
    { id = "transfer-n", kind = "any",
      table = "transfers", column = "n", rows = "every row", ops = "flip",
      why = "the row's insertion number: history() pages by it, verify replays in the feed's "
            .. "order; a transfer_accounts row that names no transfer's n is found" },
    { id = "before-upgrade", kind = "before-upgrade", table = "transfers", column = "created_at_ms",
      rows = "transfers whose event comes before the feed's `ledger.upgrade` event",
      ops = "flip",
      why = "events written before schema 3 carry no created_at_ms (nor body hash: "
            .. "`before-upgrade-hash`); with --audit the trail's record still dates them" },
    { id = "before-upgrade-hash", kind = "before-upgrade", table = "intents", column = "body_hash",
      rows = "outcomes of transfers whose event comes before the `ledger.upgrade` event",
      ops = "flip",
      why = "events written before schema 3 carry no body hash; the upgrade's rows (account "
            .. "versions, rejections) are taken as it found them" },
    { id = "zero-balance", kind = "zero", table = "balances", column = "*",
      rows = "rows whose amount is 0", ops = "delete",
      why = "a shard whose postings are all spent: the projection's trigger makes the row "
            .. "again on the shard's next posting, and a missing row sums as 0" },
    { id = "book-row", kind = "any", table = "books", column = "*", rows = "this book's row",
      ops = "delete",
      why = "a store made by the wallet has none (only `ledger init` and the exporter create "
            .. "it); nothing reads it" },
    { id = "stream-head-behind", kind = "any", table = "usage_streams", column = "*",
      rows = "a head at an earlier link of its stream's chain, or none", ops = "delete",
      why = "the exporter moves a head after its batch's commits: a crash or a shutdown "
            .. "between leaves it behind, and the next put of those slices answers dup and "
            .. "moves it (one ahead of the chain, or off it, is found)" },
    { id = "sqlite-sequence", kind = "any", table = "sqlite_sequence", column = "seq",
      rows = "SQLite's row for `transfers`", ops = "flip delete insert",
      why = "SQLite's next insertion number for transfers (AUTOINCREMENT); a number taken "
            .. "twice fails the insert, it decides nothing else" },
    { id = "leases", kind = "any", table = "leases", column = "*", rows = "every row",
      ops = "flip delete insert",
      why = "the nodes' operational state (LED-71): who may write now, no money and nothing "
            .. "a transfer or an event derives from; a forged lease can stall a node's writes "
            .. "(a refused guard), never change what was committed" },
}

-- The entry covering (table, column, op) of a row of that kind, or nil (column "*": a
-- whole row, deleted or inserted).
function _M.covers(tbl, column, op, kind)
    for _, e in ipairs(_M) do
        if e.table == tbl and (e.column == column or e.column == "*" or column == "*")
           and (e.kind == "any" or e.kind == kind)
           and (" " .. e.ops .. " "):find(" " .. op .. " ", 1, true) then
            return e
        end
    end
    return nil
end

return _M
