-- gateway.lua: the settings shared by the sidecar and nginx (examples/nginx/README.md).
--
-- The sidecar reads them as its configuration file (ron-accounting run sidecar.lua
-- --config /etc/ron-accounting/gateway.lua: every key of docs/reference/config.md). nginx
-- reads the plane settings from the same file (the Lua path: init { config = ... }); the
-- native module's ron_accounting_plane directive repeats them. The plane refuses any
-- process whose window_len_s, shards, capacity_rows, dimensions or profile differ.
return {
    -- The counter plane: on a memory file system, in a directory only root can enter.
    plane = "/run/ron-accounting/plane",
    -- WAL and file ledger: on a real disk (never tmpfs: the WAL must survive a reboot).
    var_dir = "/var/lib/ron-accounting",
    window_len_s = 300,
    capacity_rows = 200000,
    -- /metrics /healthz /readyz of the sidecar
    listen = "127.0.0.1:9464",
}
