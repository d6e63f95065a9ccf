#!/bin/sh
# The Lua path's request path in a real nginx (issue 6: "no garbage per request", the
# JIT compiles it; STYLE.md: tests that require the hot loop to JIT-compile):
#
#   hotpath.sh NGINX HOST SOURCE_DIR WORK_DIR LIBRONACCT
#
# One worker, its collector stopped. First log() is called 2 x 100000 times in a loop
# inside the worker on the current request (tests/nginx/hotpath.lua): 0 bytes, one
# looping trace, no stitch, no error, no abort (LuaJIT declining a trace of log() that
# would return into the loop is reported, not failed: see hotpath.lua). Then requests
# to /test/metered run log() exactly as the example's log_by_lua does, bracketed by two
# readings of the Lua heap (collectgarbage("count"), which grows by every byte allocated
# while nothing is collected; nothing can be collected in between unless log()
# allocates): after a warm-up run (the JIT compiles log()), their sum must stay 0, and no
# trace of ron/accounting/* may abort (trace events from init_worker_by_lua).
# The plane has no sidecar here: nothing is sealed, only recorded.
set -u
NGX=$1 HOST=$2 SRC=$3 WORK=$4 LIB=$5
NAME="nginx-lua-hotpath"
. "$SRC/tests/nginx/lib.sh"
trap cleanup EXIT
trap 'exit 1' INT TERM

setup lua
# production-like: the system clock, not the test's injected one
sed -i '/^    clock = function()/,/^    end,/d' gateway.lua
cat >extra.conf <<CONF
        location = /test/metered {
            log_by_lua_block {
                local c0 = collectgarbage("count")
                require("ron.accounting.nginx").log()
                RON_TEST.kb = RON_TEST.kb + (collectgarbage("count") - c0)
                RON_TEST.n = RON_TEST.n + 1
            }
            return 200 "hello\n";
        }
        location = /test/alloc {
            log_by_lua_block { }
            content_by_lua_block {
                ngx.say(string.format("%.0f %d", RON_TEST.kb * 1024, RON_TEST.n))
                if ngx.var.arg_reset then RON_TEST.kb, RON_TEST.n, RON_TEST.aborts = 0, 0, {} end
            }
        }
        location = /test/aborts {
            log_by_lua_block { }
            content_by_lua_block {
                for _, a in ipairs(RON_TEST.aborts) do ngx.say(a) end
                ngx.say("aborts ", #RON_TEST.aborts)
            }
        }
        location = /test/loop {
            log_by_lua_block { }
            content_by_lua_file $SRC/tests/nginx/hotpath.lua;
        }
CONF
cat >init-worker.lua <<'LUA'
collectgarbage("stop")
local util, vmdef = require "jit.util", require "jit.vmdef"
RON_TEST = { kb = 0, n = 0, aborts = {} }
jit.attach(function(what, tr, func, pc, otr, oex)
    if what ~= "abort" then return end
    local fi = util.funcinfo(func, pc)
    if tostring(fi.source):find("ron/accounting", 1, true) then
        local msg = vmdef.traceerr[otr] or tostring(otr)
        if oex ~= nil and msg:find("%%[sd]") then msg = msg:format(oex) end
        RON_TEST.aborts[#RON_TEST.aborts + 1] = msg .. " at " .. tostring(fi.loc)
    end
end, "trace")
LUA
EXPECT_WORKERS=1
CONF_SED="s|^worker_processes 2;|worker_processes 1;|"
CONF_SED2="s|^    init_by_lua_block {|    init_worker_by_lua_file $WORK/init-worker.lua;\n&|"
start_nginx

# First the loop, in a worker that has served one request: its trace is the first to
# reach log(), and inlines it whole (which traces exist before it would otherwise decide
# whether side traces of log()'s own trace get recorded into the loop).
curl -s --max-time 60 -H "X-Tenant-Id: $T1" -H "X-Subject-Id: user-1" \
    "$BASE/test/loop?n=100000" >loop.txt || fail "the loop location"
sed "s/^/  /" loop.txt >&2
grep -q "^garbage_bytes 0$" loop.txt || fail "log() in a loop allocates"
grep -q "^loops [1-9]" loop.txt || fail "the loop did not compile to a looping trace"
grep -q "^aborts 0$" loop.txt || fail "trace aborts in the loop"
grep -q "^stitches 0$" loop.txt || fail "the loop's trace stitches"
grep -q "^errors 0 *$" loop.txt || fail "log() counted errors in the loop"

# Then the log phase. Trace aborts count from the end of the warm-up on.
# load SECONDS: wrk on /test/metered, with tenant and subject headers
load() {
    wrk -t1 -c2 -d"$1"s -H "X-Tenant-Id: $T1" -H "X-Subject-Id: user-1" \
        "$BASE/test/metered" >/dev/null 2>&1 || fail "wrk"
    sleep 0.3
}
load 1 # warm-up: the JIT compiles log()
curl -s --max-time 5 "$BASE/test/alloc?reset=1" >/dev/null
load 2
# shellcheck disable=SC2046 # the counters, split into fields on purpose
set -- $(curl -s --max-time 5 "$BASE/test/alloc")
bytes=$1 n=$2
log "log() in the log phase: $bytes bytes allocated over $n requests (after a warm-up)"
[ "$n" -ge 1000 ] || fail "too few requests: $n"
[ "$bytes" = 0 ] || fail "log() allocates: $bytes bytes over $n requests"
curl -s --max-time 5 "$BASE/test/aborts" >aborts.txt
grep -q "^aborts 0$" aborts.txt || { cat aborts.txt >&2; fail "traces of ron/accounting aborted"; }

log "OK"
