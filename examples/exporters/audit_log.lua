-- exporters/audit_log.lua: an operator's exporter, as a Lua module (docs/EXPORT.md §1).
--
-- It stores slices in the file ledger (so the contract — ok, dup, conflict, gap — is the
-- ledger's) and, for every slice the ledger accepted, appends one JSON line to an audit
-- log: what a billing team tails. It shows the three things an exporter must get right:
--   * put(slice) answers with the contract's statuses (here: the inner ledger's);
--   * no blocking call on the loop thread: the ledger runs on the libuv threadpool
--     (offload.file) and the log is written with luv's asynchronous fs_write, the task
--     waiting on a one-slot channel for the callback;
--   * a failure is an answer, never an exception: a log write that fails answers
--     retry_network, so the runtime retries the slice (the ledger then says dup and the
--     line is written again: the log is at-least-once, the ledger exactly-once).
--
-- With the daemon (the script's directory, examples/, is on package.path):
--   return { exporter = { module = "exporters.audit_log", dir = "var/ledger",
--                         log = "var/audit.jsonl" } }
local offload = require("ron.accounting.runtime.offload")
local task = require("ron.base.task")
local uv = require("luv")

local format = string.format

local _M = {}

local E = {}
E.__index = E

function _M.new(opts)
    if type(opts) ~= "table" or type(opts.dir) ~= "string" or type(opts.log) ~= "string" then
        return nil, "audit_log.new: expects { dir = ledger directory, log = file path }"
    end
    local ledger, err = offload.file { dir = opts.dir }
    if not ledger then return nil, err end
    -- O_WRONLY | O_CREAT | O_APPEND, 0640: opened once, at configuration time
    local fd, oerr = uv.fs_open(opts.log, "a", 416)
    if not fd then return nil, "audit_log: " .. tostring(oerr) end
    return setmetatable({ ledger = ledger, fd = fd, lines = 0 }, E)
end

-- Appends line asynchronously; the calling task waits for the callback.
local function append(fd, line)
    local done = task.channel(1, "audit_log_write")
    uv.fs_write(fd, line, -1, function(err, n)
        done:try_send({ err = err, n = n })
    end)
    local r, werr = done:recv()
    if not r then return nil, werr end        -- shutdown: the write still completes
    if r.err then return nil, r.err end
    return true
end

function E:put(s)
    local status, detail = self.ledger:put(s)
    if status ~= "ok" then return status, detail end
    local total = 0
    for _, row in ipairs(s.rows) do total = total + tonumber(row.inc) end
    local line = format('{"tenant":"%s","dimension":"%s","seq":%d,"window_start_s":%d,'
                        .. '"window_len_s":%d,"rows":%d,"total":%.0f,"b3":"%s"}\n',
                        s.tenant, s.dimension, s.id.seq, s.id.window_start_s,
                        s.id.window_len_s, #s.rows, total, s.b3)
    local ok, err = append(self.fd, line)
    if not ok then return "retry_network", "audit log: " .. tostring(err) end
    self.lines = self.lines + 1
    return "ok"
end

function E:head(tenant, dimension)
    return self.ledger:head(tenant, dimension)
end

function E:close()
    if self.fd then
        uv.fs_close(self.fd)
        self.fd = nil
    end
    self.ledger:close()
end

return _M
