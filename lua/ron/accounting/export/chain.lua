-- ron.accounting.export.chain: the chain-admission rule of the export contract (PRODUCT.md
-- §5, docs/EXPORT.md §1), written once: where a slice stands against its stream's head. A
-- ledger accepts, per stream, exactly one ordered chain: seq = head + 1 and prev_b3 = the
-- head's b3 (32 zero bytes before seq 1). The twin of host/cli/chain.c (ra_host_chain_link,
-- what `ron-accounting verify` applies to a WAL or a file ledger); the file ledger, the
-- ledger's exporter (ron.ledger.exporter) and, through their answers, the HTTP receiver
-- decide with it. b3s are raw 32-byte strings.
--
--   chain.link(head_seq, head_b3, seq, prev_b3) -> "ok" | "back" | "gap" | "first" | "prev"
--       (ra_host_chain_link: back = seq <= head, gap = seq > head + 1, first = seq 1 whose
--       prev_b3 is not zero, prev = prev_b3 not the head's b3)
--   chain.admit(head_seq, head_b3, seq, prev_b3, b3) -> verdict, detail
--       "ok"        append it
--       "dup"       it is the head
--       "below"     seq <= head, another b3 than the head's or below it: dup when the slice
--                   stored at seq has this b3, conflict otherwise (chain.stored decides,
--                   once the caller has looked it up)
--       "gap"       seq > head + 1, or a seq beyond 2^53 (a Lua number that is not exact)
--       "conflict"  seq = head + 1 that does not link to the head
--   chain.stored(seq, stored_b3, b3) -> "dup" | "conflict", detail
local format, byte, rep, type = string.format, string.byte, string.rep, type

local _M = { ZERO = rep("\0", 32) }

local function hex(s)
    return (s:gsub(".", function(c) return format("%02x", byte(c)) end))
end

function _M.link(head_seq, head_b3, seq, prev_b3)
    if seq <= head_seq then return "back" end
    if seq ~= head_seq + 1 then return "gap" end
    if prev_b3 == (head_seq == 0 and _M.ZERO or head_b3) then return "ok" end
    return head_seq == 0 and "first" or "prev"
end

local DETAIL = {
    first = function() return "seq 1 must have a zero prev_b3" end,
    prev = function(head_seq, head_b3)
        return format("prev_b3 is not the b3 %s of seq %d", hex(head_b3), head_seq)
    end,
}

function _M.admit(head_seq, head_b3, seq, prev_b3, b3)
    if type(seq) ~= "number" then return "gap", "seq beyond 2^53" end
    local l = _M.link(head_seq, head_b3, seq, prev_b3)
    if l == "ok" then return "ok" end
    if l == "back" then
        if seq == head_seq and b3 == head_b3 then return _M.stored(seq, head_b3, b3) end
        return "below"
    end
    if l == "gap" then return "gap", format("head is seq %d", head_seq) end
    return "conflict", DETAIL[l](head_seq, head_b3)
end

function _M.stored(seq, stored_b3, b3)
    if stored_b3 == b3 then return "dup", format("seq %d already stored", seq) end
    return "conflict", format("seq %d is stored with b3 %s", seq, hex(stored_b3))
end

return _M
