-- The modules renamed when the package was layered (0.1 -> 0.2), old name -> new name.
-- Each old name is a one-line stub at its old path that forwards here, so scripts and
-- nginx configurations written for 0.1 keep working for one release; the package itself
-- only uses the new names (spec/ron/accounting/compat_spec.lua checks both).
local _M = {}

_M.RENAMED = {
    ["ron.accounting.backoff"] = "ron.accounting.export.backoff",
    ["ron.accounting.backoff.exponential"] = "ron.accounting.export.backoff.exponential",
    ["ron.accounting.cdef"] = "ron.accounting.binding.cdef",
    ["ron.accounting.config"] = "ron.accounting.binding.config",
    ["ron.accounting.curl"] = "ron.accounting.net.http_client_c",
    ["ron.accounting.exporter"] = "ron.accounting.export.exporters",
    ["ron.accounting.exporters.chaos"] = "ron.accounting.export.exporters.chaos",
    ["ron.accounting.exporters.file"] = "ron.accounting.export.exporters.file",
    ["ron.accounting.exporters.http"] = "ron.accounting.export.exporters.http",
    ["ron.accounting.exporters.postgres"] = "ron.accounting.export.exporters.postgres",
    ["ron.accounting.fairness"] = "ron.accounting.export.fairness",
    ["ron.accounting.fairness.common"] = "ron.accounting.export.fairness.common",
    ["ron.accounting.fairness.round_robin"] = "ron.accounting.export.fairness.round_robin",
    ["ron.accounting.fairness.wfq"] = "ron.accounting.export.fairness.wfq",
    ["ron.accounting.http"] = "ron.accounting.daemon.http",
    ["ron.accounting.httpc"] = "ron.accounting.net.http_client",
    ["ron.accounting.httpd"] = "ron.accounting.net.http_server",
    ["ron.accounting.ingest"] = "ron.accounting.daemon.ingest",
    ["ron.accounting.lib"] = "ron.accounting.binding.lib",
    ["ron.accounting.offload"] = "ron.accounting.runtime.offload",
    ["ron.accounting.offload_work"] = "ron.accounting.runtime.offload_work",
    ["ron.accounting.pg"] = "ron.accounting.net.postgres",
    ["ron.accounting.pq"] = "ron.accounting.net.postgres_c",
    ["ron.accounting.receiver"] = "ron.accounting.daemon.receiver",
    ["ron.accounting.rng"] = "ron.accounting.runtime.rng",
    ["ron.accounting.slice"] = "ron.accounting.binding.slice",
    ["ron.accounting.task"] = "ron.accounting.runtime.task",
}

-- The module an old name now is (`...` of the stub's chunk is the name it was required by).
function _M.forward(old)
    local new = _M.RENAMED[old]
    if not new then error("ron.accounting.compat: no forward for " .. tostring(old), 2) end
    return require(new)
end

return _M
