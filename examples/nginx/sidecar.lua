-- sidecar.lua: the gateway's sidecar, the one sealer of the nginx counter plane.
--
--   ron-accounting run examples/nginx/sidecar.lua [--config FILE] [daemon OPTIONS]
--
-- It is the daemon (ron.node, docs/ops/daemon.md) with the gateway's
-- settings file as its default configuration (/etc/ron-accounting/gateway.lua), and one
-- check before it starts: the plane's directory exists (created 0700 when missing) and no
-- one but its owner (root) can write it, since whoever can replace the plane file can
-- forge counts. Then it attaches to the plane that nginx's master mapped, seals every
-- window as it ends, keeps each slice in its WAL until the ledger ACKs it and exports in
-- order per (tenant, dimension) stream. Run it as the user nginx's master runs as (root):
-- the plane file is 0600 and the core refuses another user's plane. Restart it at will:
-- nginx keeps counting into the plane while it is away, and windows that ended meanwhile
-- are sealed, each on its own, when it returns. docs/ops/nginx.md
-- has the details.
local daemon = require("ron.node")
local uv = require("luv")

local DEFAULT_CONFIG = "/etc/ron-accounting/gateway.lua"

local args = {}
local has_config = false
for i = 1, #arg do
    args[i] = arg[i]
    if arg[i] == "--config" then has_config = true end
end
local function die(code, fmt, ...)
    io.stderr:write("ron-accounting sidecar: ", string.format(fmt, ...), "\n")
    os.exit(code)
end
if not has_config then
    if not uv.fs_stat(DEFAULT_CONFIG) then
        die(2, "no --config FILE and no %s (examples/nginx/gateway.lua is one)", DEFAULT_CONFIG)
    end
    table.insert(args, 1, DEFAULT_CONFIG)
    table.insert(args, 1, "--config")
end

local cfg = daemon.configure_or_exit(args, "ron-accounting sidecar")

-- The plane's directory: created 0700 when missing; refused when group or others may
-- write it without the sticky bit (they could replace the plane between two starts).
local plane = daemon.paths(cfg).plane
local dir = plane:match("^(.*)/[^/]*$") or "."
if dir == "" then dir = "/" end
if not cfg.check then
    local st = uv.fs_stat(dir)
    if not st then
        local ok, merr = daemon.mkdir_p(dir)
        if not ok then die(1, "cannot create %s: %s", dir, tostring(merr)) end
        st = uv.fs_stat(dir)
    end
    local STICKY, GROUP_OTHER_W = 512, 18 -- 01000, 0022
    if st.type ~= "directory" then die(1, "%s is not a directory", dir) end
    if bit.band(st.mode, GROUP_OTHER_W) ~= 0 and bit.band(st.mode, STICKY) == 0 then
        die(1, "%s is writable by group or others (mode %04o): keep the plane in a "
            .. "directory only its owner can write (e.g. /run/ron-accounting, 0700)",
            dir, bit.band(st.mode, 4095))
    end
end

local d, serr = daemon.start(cfg)
if not d then die(1, "cannot start: %s", tostring(serr)) end
