-- The modules renamed, old name -> new name: when the package was layered (0.1 -> 0.2), and
-- when the platform (ron.base), the node (ron.node) and the ledger's exporter
-- (ron.ledger.exporter) moved out of it (issue 26, SPLIT below). Each old name is a
-- one-line stub that forwards here, so scripts, operator configurations and nginx
-- configurations written before keep working for one release; the packages themselves
-- only use the new names (spec/ron/accounting/compat_spec.lua checks both).
--
-- A name resolves to <path>.lua or <path>/init.lua (package.path has both). A moved
-- module's stub sits at the other one of the two, so its old file is gone from the tree
-- and git follows the move (a merge carries an edit of the old file to the new one).
local _M = {}

-- issue 26: the modules that moved to another package.
_M.SPLIT = {
    ["ron.accounting.runtime.task"] = "ron.base.task",
    ["ron.accounting.runtime.lru"] = "ron.base.lru",
    ["ron.accounting.runtime.rng"] = "ron.base.rng",
    ["ron.accounting.net.http_client"] = "ron.base.net.http_client",
    ["ron.accounting.net.postgres"] = "ron.base.net.postgres",
    ["ron.accounting.net.http_server"] = "ron.base.net.http_server",
    ["ron.accounting.net.http_client_c"] = "ron.base.net.http_client_c",
    ["ron.accounting.net.postgres_c"] = "ron.base.net.postgres_c",
    ["ron.accounting.export.backoff"] = "ron.base.backoff",
    ["ron.accounting.export.backoff.exponential"] = "ron.base.backoff.exponential",
    ["ron.accounting.daemon"] = "ron.node",
    ["ron.accounting.daemon.admin"] = "ron.node.admin",
    ["ron.accounting.daemon.attest"] = "ron.node.attest",
    ["ron.accounting.daemon.cli"] = "ron.node.cli",
    ["ron.accounting.daemon.demo"] = "ron.node.demo",
    ["ron.accounting.daemon.feed"] = "ron.node.feed",
    ["ron.accounting.daemon.heads"] = "ron.node.heads",
    ["ron.accounting.daemon.http"] = "ron.node.http",
    ["ron.accounting.daemon.ingest"] = "ron.node.ingest",
    ["ron.accounting.daemon.log"] = "ron.node.log",
    ["ron.accounting.daemon.plugins"] = "ron.node.plugins",
    ["ron.accounting.daemon.receiver"] = "ron.node.receiver",
    ["ron.accounting.daemon.refusals"] = "ron.node.refusals",
    ["ron.accounting.daemon.schema"] = "ron.node.schema",
    ["ron.accounting.export.exporters.ledger"] = "ron.ledger.exporter",
}

_M.RENAMED = {
    ["ron.accounting.backoff"] = "ron.base.backoff",
    ["ron.accounting.backoff.exponential"] = "ron.base.backoff.exponential",
    ["ron.accounting.cdef"] = "ron.accounting.binding.cdef",
    ["ron.accounting.config"] = "ron.accounting.binding.config",
    ["ron.accounting.curl"] = "ron.base.net.http_client_c",
    ["ron.accounting.exporter"] = "ron.accounting.export.exporters",
    ["ron.accounting.exporters.chaos"] = "ron.accounting.export.exporters.chaos",
    ["ron.accounting.exporters.file"] = "ron.accounting.export.exporters.file",
    ["ron.accounting.exporters.http"] = "ron.accounting.export.exporters.http",
    ["ron.accounting.exporters.postgres"] = "ron.accounting.export.exporters.postgres",
    ["ron.accounting.fairness"] = "ron.accounting.export.fairness",
    ["ron.accounting.fairness.common"] = "ron.accounting.export.fairness.common",
    ["ron.accounting.fairness.round_robin"] = "ron.accounting.export.fairness.round_robin",
    ["ron.accounting.fairness.wfq"] = "ron.accounting.export.fairness.wfq",
    ["ron.accounting.http"] = "ron.node.http",
    ["ron.accounting.httpc"] = "ron.base.net.http_client",
    ["ron.accounting.httpd"] = "ron.base.net.http_server",
    ["ron.accounting.ingest"] = "ron.node.ingest",
    ["ron.accounting.lib"] = "ron.accounting.binding.lib",
    ["ron.accounting.offload"] = "ron.accounting.runtime.offload",
    ["ron.accounting.offload_work"] = "ron.accounting.runtime.offload_work",
    ["ron.accounting.pg"] = "ron.base.net.postgres",
    ["ron.accounting.pq"] = "ron.base.net.postgres_c",
    ["ron.accounting.receiver"] = "ron.node.receiver",
    ["ron.accounting.rng"] = "ron.base.rng",
    ["ron.accounting.slice"] = "ron.accounting.binding.slice",
    ["ron.accounting.task"] = "ron.base.task",
}

for old, new in pairs(_M.SPLIT) do _M.RENAMED[old] = new end

-- The module an old name now is (`...` of the stub's chunk is the name it was required by).
function _M.forward(old)
    local new = _M.RENAMED[old]
    if not new then error("ron.accounting.compat: no forward for " .. tostring(old), 2) end
    return require(new)
end

return _M
