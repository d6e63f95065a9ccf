#!/bin/sh
# Prints lua/ron/accounting/binding/cdef.lua: the RA_CDEF region of include/ron/accounting.h as an
# ffi.cdef, so the Lua binding declares exactly what the header declares (STYLE.md rule 2).
#
#   sh tools/gen-cdef.sh > lua/ron/accounting/binding/cdef.lua     (what `make cdef` runs)
#   sh tools/gen-cdef.sh audit > lua/ron/audit/cdef.lua             (libronaudit: audit.h,
#                                                                   RAU_CDEF_*, rau_)
#   sh tools/gen-cdef.sh ledger > lua/ron/ledger/cdef.lua           (libronledger: ledger.h,
#                                                                   RL_CDEF_*, rl_; what
#                                                                   `make cdef-ledger` runs)
#   sh tools/gen-cdef.sh ingest-dto > lua/ron/accounting/binding/ingest_cdef.lua
#   sh tools/gen-cdef.sh wallet-dto > lua/ron/wallet/dto_cdef.lua
#                                     (the host's request decoders, host/lua/*_dto.h: their
#                                     ABI number instead of a version; `make cdef`)
#
# How: the whole header goes through the C preprocessor with -DRA_CDEF (the X-macro enum
# expands, RA_EXTERN and the system includes vanish; the macros defined above the region
# stay available), with the two marker comments replaced by tokens that survive
# preprocessing; awk keeps what lies between them. The result is then normalised (one
# declaration per line, one enumerator per line, 4-space indentation) so that it does not
# depend on which preprocessor ran or how it spaces its output: the freshness tests
# (spec/ron/accounting/binding/cdef_spec.lua, ctest lua-cdef-current) compare bytes.
#
# Environment: CC (default cc) supplies the preprocessor as "$CC -E".
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cc=${CC:-cc}
abi='' needs=''
# Which header: accounting (the default), audit or ledger. checks: what fails when the
# generated file and the header disagree.
case "${1:-accounting}" in
accounting)
    header="$root/include/ron/accounting.h" mark=RA fn=ra out=lua/ron/accounting/binding/cdef.lua
    guard=ra_meter_t make="make cdef"
    checks="spec/ron/accounting/binding/cdef_spec.lua and ctest lua-cdef-current fail" ;;
audit)
    header="$root/include/ron/audit.h" mark=RAU fn=rau out=lua/ron/audit/cdef.lua
    guard=rau_log_t make="sh tools/gen-cdef.sh audit > $out"
    checks="spec/ron/audit/cdef_spec.lua and ctest lua-cdef-current fail" ;;
ledger)
    header="$root/include/ron/ledger.h" mark=RL fn=rl out=lua/ron/ledger/cdef.lua
    guard=rl_transfer_t make="make cdef-ledger" checks="ctest lua-ledger-cdef-current fails" ;;
ingest-dto)
    header="$root/host/lua/ingest_dto.h" mark=RA_INGEST fn=ra_ingest
    out=lua/ron/accounting/binding/ingest_cdef.lua guard=ra_ingest_record_t make="make cdef"
    checks="ctest lua-ingest-dto-cdef-current fails" abi=1
    needs='require("ron.accounting.binding.cdef") -- ra_tenant_t' ;;
wallet-dto)
    header="$root/host/lua/wallet_dto.h" mark=RA_WDTO fn=ra_wdto out=lua/ron/wallet/dto_cdef.lua
    guard=ra_wdto_field_t make="make cdef" checks="ctest lua-wallet-dto-cdef-current fails"
    abi=1 ;;
*) echo "gen-cdef: unknown header ${1}" >&2; exit 2 ;;
esac
hname=${header#"$root"/}

[ -r "$header" ] || { echo "gen-cdef: cannot read $header" >&2; exit 1; }
grep -q "^/\\* ${mark}_CDEF_BEGIN \\*/\$" "$header" && grep -q "^/\\* ${mark}_CDEF_END \\*/\$" "$header" || {
    echo "gen-cdef: $header lacks the /* ${mark}_CDEF_BEGIN */ and /* ${mark}_CDEF_END */ lines" >&2
    exit 1
}

# A library's version string, or a host decoder's ABI number (an enumerator).
if [ -n "${abi:-}" ]; then
    version=$(sed -n "s/^ *${mark}_ABI = \([0-9][0-9]*\).*/\1/p" "$header")
    [ -n "$version" ] || { echo "gen-cdef: no ${mark}_ABI = N in $header" >&2; exit 1; }
    vline="    -- ${mark}_ABI of the header this was generated from (its ABI check compares it).
    abi = $version,"
else
    version=$(sed -n "s/^#define ${mark}_VERSION_STRING \"\(.*\)\"\$/\1/p" "$header")
    [ -n "$version" ] || { echo "gen-cdef: no ${mark}_VERSION_STRING in $header" >&2; exit 1; }
    vline="    -- ${mark}_VERSION_STRING of the header this was generated from.
    version = \"$version\","
fi

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT INT TERM

# LC_ALL=C: byte semantics for sed/awk and untranslated compiler messages.
LC_ALL=C sed -e "s|^/\\* ${mark}_CDEF_BEGIN \\*/\$|RA__GEN_CDEF_BEGIN__|" \
             -e "s|^/\\* ${mark}_CDEF_END \\*/\$|RA__GEN_CDEF_END__|" "$header" |
    LC_ALL=C $cc -E -P -D${mark}_CDEF -x c - >"$tmp" || {
    echo "gen-cdef: the preprocessor ($cc -E) failed on $header" >&2
    exit 1
}

body=$(LC_ALL=C awk '
    /^[ \t]*RA__GEN_CDEF_END__[ \t]*$/   { inside = 0; ended = 1; next }
    /^[ \t]*RA__GEN_CDEF_BEGIN__[ \t]*$/ { inside = 1; began = 1; next }
    !inside { next }
    {
        gsub(/[ \t]+/, " "); sub(/^ /, ""); sub(/ $/, "")
        if ($0 == "") next
        # A declaration the header wraps over several lines becomes one line.
        line = (pending == "") ? $0 : pending " " $0
        if (gsub(/\(/, "(", line) > gsub(/\)/, ")", line)) { pending = line; next }
        pending = ""
        gsub(/\( /, "(", line); gsub(/ \)/, ")", line)
        # The X-macro expansion puts every error code on one line: one per line.
        n = split(line, parts, /, /)
        if (n > 1 && line ~ /^[A-Za-z_][A-Za-z0-9_]* = -?[0-9]+, /) {
            for (i = 1; i <= n; i++) emit(parts[i] (i < n ? "," : ""))
        } else {
            emit(line)
        }
    }
    function emit(s,    k) {
        if (s ~ /^}/) depth--
        for (k = 0; k < depth; k++) printf "    "
        print s
        if (s ~ /{$/) depth++
    }
    END {
        if (!began || !ended) { print "gen-cdef: markers lost in preprocessing" > "/dev/stderr"; exit 1 }
        if (pending != "" || depth != 0) { print "gen-cdef: unbalanced declaration" > "/dev/stderr"; exit 1 }
    }
' "$tmp")

# Every function the region declares, for the binding's load-time symbol check.
functions=$(printf '%s\n' "$body" | LC_ALL=C sed -n "s/^[^(]*[ *]\(${fn}_[a-z0-9_]*\)(.*);\$/\1/p")
[ -n "$functions" ] || { echo "gen-cdef: no functions found" >&2; exit 1; }

cat <<EOF
-- Generated by tools/gen-cdef.sh from $hname (the region between
-- ${mark}_CDEF_BEGIN and ${mark}_CDEF_END, preprocessed with -D${mark}_CDEF). Do not edit: run
-- \`$make\`. $checks when
-- this file and the header disagree.
local ffi = require("ffi")
${needs:+$needs
}
-- Declared once per Lua state: a second load (package.loaded cleared, nginx with
-- lua_code_cache off) would otherwise fail on "attempt to redefine" (lua-resty-core
-- guards its shared types the same way).
if not pcall(ffi.typeof, "$guard") then
ffi.cdef[[
$body
]]
end

return {
$vline
    -- Every function declared above: the loader checks that the library exports them all.
    functions = {
EOF
printf '%s\n' "$functions" | LC_ALL=C awk '{ printf "        \"%s\",\n", $0 }'
cat <<EOF
    },
}
EOF
