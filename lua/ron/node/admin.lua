-- ron.node.admin: the operator's routes of the daemon's HTTP server, answered to
-- loopback peers only (whatever metrics_public says): an operator on the node, or a tool it
-- runs (`ron-accounting streams ...`, host/cli/streams.c), never the network.
--
--   GET  /v1/admin/streams/stuck        -> 200 {"stuck":[{tenant, dimension, reason, seq,
--                                          stuck_ms, detail}, ...]}
--   POST /v1/admin/streams/accept-loss  {"tenant":uuid, "dimension":name, "reason":text}
--                                       -> 200 {"tenant", "dimension", "from", "to", "slices"}
--        404 not stuck, 409 stuck on conflict (not a gap), 501 the exporter cannot record
--        a loss, 400 a bad body, 503 no export runtime
--
-- Accepting a loss gives up, for good, the seqs a stuck-on-gap stream waits for (issue 14
-- item 1; docs/ops/failure-modes.md): the downstream records them as given up and the
-- stream goes on. The runtime logs exactly which seqs (RT:accept_loss); with the audit
-- trail configured every attempt (granted or refused, with the peer) is an audit record.
local cjson = require("cjson.safe").new()
local http = require("ron.node.http")
local task = require("ron.base.task")
local text = require("ron.accounting.runtime.rt").audit_text

local type, pairs, tostring = type, pairs, tostring

local _M = {}

local function json(req, code, t)
    local body = cjson.encode(t) .. "\n"
    return req:respond(code, body, "application/json", { ["Cache-Control"] = "no-store" })
end

local function problem(req, code, err)
    local name, msg = tostring(err):match("^(%a+): (.*)$")
    return json(req, code, { error = name or "Error", message = msg or tostring(err) })
end

local STATUS = { NotFound = 404, InvalidArgument = 409, Unsupported = 501 }

-- d: the daemon (d.rt: the export runtime, when there is one)
function _M.routes(d)
    local function guard(req)
        if not http.is_loopback(req.peer or "") then
            return 403, "forbidden: the admin routes answer loopback peers only\n"
        end
        if not d.rt then
            return 503, '{"error":"Unavailable","message":"no export runtime"}\n',
                   "application/json"
        end
    end
    local function stuck(req)
        local code, body, ctype = guard(req)
        if code then return code, body, ctype end
        local list = d.rt:stuck_list()
        if #list == 0 then return 200, '{"stuck":[]}\n', "application/json" end
        return 200, cjson.encode({ stuck = list }) .. "\n", "application/json"
    end
    local function accept_loss(req)
        local code, body, ctype = guard(req)
        if code then return code, body, ctype end
        local o = cjson.decode(req.body or "")
        local bad = type(o) ~= "table" or type(o.tenant) ~= "string"
                    or type(o.dimension) ~= "string"
                    or (o.reason ~= nil and type(o.reason) ~= "string")
        if not bad then
            for k in pairs(o) do
                if k ~= "tenant" and k ~= "dimension" and k ~= "reason" then bad = true end
            end
        end
        if bad then
            return 400, '{"error":"SchemaViolation","message":"expected {\\"tenant\\": uuid, '
                        .. '\\"dimension\\": name, \\"reason\\": text}"}\n', "application/json"
        end
        -- the exporter's accept_loss may go through the threadpool: answered from a task
        task.spawn("admin_accept_loss", function()
            local r, err = d.rt:accept_loss(o.tenant, o.dimension, o.reason)
            if d.audit_emit then -- an operator action, granted or refused (AUD-I-21)
                d.audit_emit("operator", {
                    action = "accept_loss", tenant = text(o.tenant),
                    dimension = text(o.dimension), reason = text(o.reason or ""),
                    peer = text(req.peer or "-"),
                    outcome = r and "ok" or (tostring(err):match("^(%a+):") or "Error"),
                    from = r and r.from or nil, to = r and r.to or nil })
            end
            if not r then
                local name = tostring(err):match("^(%a+):")
                return problem(req, STATUS[name] or 500, err)
            end
            return json(req, 200, { tenant = o.tenant, dimension = o.dimension, from = r.from,
                                    to = r.to, slices = r.to - r.from + 1 })
        end)
    end
    return {
        { method = "GET", path = "^/v1/admin/streams/stuck$", handler = stuck },
        { method = "POST", path = "^/v1/admin/streams/accept%-loss$", handler = accept_loss },
    }
end

return _M
