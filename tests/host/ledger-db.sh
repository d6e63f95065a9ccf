# shellcheck shell=sh
# shellcheck disable=SC2154 # src and work: the sourcing script's
# ledger-db.sh: sourced by the end-to-end scripts that run on either ledger store
# (ledger-rate.sh, wallet-e2e.sh). Needs $src, $work and a fail function.
#
#   ledger_db sqlite|postgres     sets db: WORK/l.db, or the postgresql:// URI of a
#                                 throwaway cluster (pg-harness.sh, torn down at exit)
#   e2e_card FILE                 the rate card both scripts rate with (bytes, tiered)
#   transfer_id_at N              the id (lower-case hex) of the ledger's Nth transfer (0-based)
#   flip_transfer_byte ID         flips one hex digit (the 60th byte) of the stored canonical
#                                 bytes of transfer ID: what verify must catch
ledger_db() {
    pgh="$src/tests/pg/pg-harness.sh"
    ledger_backend=$1
    if [ "$ledger_backend" = postgres ]; then
        line=$(sh "$pgh" start --owner $$) || fail "PostgreSQL did not start"
        pgdir=$(printf '%s' "$line" | cut -f1)
        trap 'sh "$pgh" stop "$pgdir" >/dev/null 2>&1' EXIT
        db=$(sh "$pgh" url "$pgdir") || fail "no URI"
    else
        db=$work/l.db
    fi
}

e2e_card() {
    cat >"$1" <<'CARD'
return { version = "e2e.1", currency = { code = "USD", scale = 2 }, period = "month",
         dimensions = { bytes = { per = 1000, free = 10, price = 3 } } }
CARD
}

ledger_sql() { # one statement, rows unaligned
    if [ "$ledger_backend" = postgres ]; then
        sh "$pgh" psql "$pgdir" -At -c "$1"
    else
        sqlite3 "$db" "$1"
    fi
}

transfer_id_at() {
    if [ "$ledger_backend" = postgres ]; then
        ledger_sql "SELECT encode(id, 'hex') FROM ron_ledger.transfers ORDER BY n
                    LIMIT 1 OFFSET $1"
    else
        ledger_sql "SELECT lower(hex(id)) FROM transfers ORDER BY n LIMIT 1 OFFSET $1"
    fi
}

flip_transfer_byte() {
    if [ "$ledger_backend" = postgres ]; then
        bytes=$(ledger_sql "SELECT upper(encode(bytes, 'hex')) FROM ron_ledger.transfers
                            WHERE encode(id, 'hex') = '$1'") || return 1
    else
        bytes=$(ledger_sql "SELECT hex(bytes) FROM transfers WHERE lower(hex(id)) = '$1'") ||
            return 1
    fi
    [ -n "$bytes" ] || { echo "no transfer $1" >&2; return 1; }
    pre=$(printf '%s' "$bytes" | cut -c1-118)
    digit=$(printf '%s' "$bytes" | cut -c119)
    post=$(printf '%s' "$bytes" | cut -c120-)
    case $digit in 0) new=1 ;; *) new=0 ;; esac
    if [ "$ledger_backend" = postgres ]; then
        ledger_sql "UPDATE ron_ledger.transfers SET bytes = decode('$pre$new$post', 'hex')
                    WHERE encode(id, 'hex') = '$1'" >/dev/null
    else
        ledger_sql "UPDATE transfers SET bytes = X'$pre$new$post' WHERE lower(hex(id)) = '$1'"
    fi
}
