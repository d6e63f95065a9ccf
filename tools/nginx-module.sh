#!/bin/sh
# Builds the native nginx module (nginx/) as a dynamic module of Debian's nginx, with
# Debian's nginx-dev (the nginx sources' build system and headers, /usr/share/nginx/src)
# and the configure flags Debian's nginx was built with (its conf_flags file), so the
# module's signature matches the installed nginx. Run by the CMake target nginx-module:
#
#   nginx-module.sh NGINX_SRC WORK_DIR MODULE_DIR INCLUDE_DIR LIBRONACCT_A OUT_SO
#
# WORK_DIR holds a copy of the nginx build tree; configure runs once (again when the
# module's config file or nginx-dev changes), later builds only recompile the module.
# libronacct.a is linked in statically and its symbols are kept local to the module
# (--exclude-libs): nginx dlopen()s modules RTLD_GLOBAL, and the core's ra_* must not
# interpose on a libronacct that the Lua path loads into the same process.
set -eu
src=$1 work=$2 mod=$3 inc=$4 lib=$5 out=$6

# Warnings: nginx's own set (-Wall -Wpointer-arith -Werror, auto/cc/gcc) plus -Wextra.
ccopt="-g -O2 -fPIC -fstack-protector-strong -D_FORTIFY_SOURCE=2 -Wextra"
ldopt="-Wl,-z,relro -Wl,-z,now -fPIC"

stamp="$work/.ra-configured"
want="$(cat "$src/conf_flags" "$mod/config" "$src/src/core/nginx.h" | cksum) $ccopt $inc $lib"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || [ ! -f "$work/objs/Makefile" ]; then
    rm -rf "$work"
    mkdir -p "$work"
    cp -R "$src/." "$work/"
    echo "nginx-module: configuring the nginx build tree in $work (once)" >&2
    (cd "$work" && RA_NGX_INCS="$inc" RA_NGX_LIBS="$lib -lpthread -Wl,--exclude-libs,ALL" \
        bash -c '. ./conf_flags && ./configure "${NGX_CONF_FLAGS[@]}" \
                 --with-cc-opt="$1" --with-ld-opt="$2" --add-dynamic-module="$3"' \
        sh "$ccopt" "$ldopt" "$mod" >configure.log 2>&1) || {
        tail -30 "$work/configure.log" >&2
        echo "nginx-module: configure failed (log: $work/configure.log)" >&2
        exit 1
    }
    printf '%s' "$want" >"$stamp"
fi
# The archive changes without the module's sources changing: relink every time.
rm -f "$work/objs/ngx_http_ron_accounting_module.so"
# (not the calling make's jobserver: one file to compile)
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$work" -f objs/Makefile modules >&2
cp "$work/objs/ngx_http_ron_accounting_module.so" "$out"
