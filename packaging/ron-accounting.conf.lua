-- /etc/ron-accounting/ron-accounting.conf.lua: the ron-accounting service's configuration
-- (the Debian package's default; a conffile, kept across upgrades). Every key and its
-- default: /usr/share/doc/ron-accounting/reference/config.md. The unit passes
-- --var /var/lib/ron-accounting (the plane, the WAL, the ledger, the audit trail).
--
-- As shipped: the meter seals 300-second windows into the WAL and a local file ledger,
-- and serves the status page, /metrics, /healthz and /readyz on loopback only.
-- Check a change with:
--   ron-accounting run /usr/share/ron-accounting/daemon.lua \
--       --config /etc/ron-accounting/ron-accounting.conf.lua --var /var/lib/ron-accounting --check
return {
    listen = "127.0.0.1:9464",
    window_len_s = 300,
    status_interval_s = 0, -- the journal gets the log lines, the status page the figures
}
