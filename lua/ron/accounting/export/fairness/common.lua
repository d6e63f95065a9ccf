-- ron.accounting.export.fairness.common: what round_robin and wfq share (option checks, the
-- bounded per-tenant FIFOs, the ring of tenants with items). Not a policy itself.
local type, error, pairs, tostring, format, floor = type, error, pairs, tostring,
                                                     string.format, math.floor

local _M = {}

_M.DEFAULT_CAP = 65536     -- total items a policy holds (opts.cap)
_M.MAX_CAP = 16777216

-- Reads cap and tenant_cap (default: no per-tenant bound beyond cap) of opts.
function _M.caps(fname, opts)
    local cap = opts.cap
    if cap == nil then cap = _M.DEFAULT_CAP end
    _M.check_int(fname, "cap", cap, 1, _M.MAX_CAP)
    local tcap = opts.tenant_cap
    if tcap == nil then tcap = cap end
    _M.check_int(fname, "tenant_cap", tcap, 1, _M.MAX_CAP)
    return cap, tcap
end

-- Full: the policy holds cap items, or this tenant holds tenant_cap.
function _M.full(st, tenant)
    if st.n >= st.cap then return true end
    local q = st.per[tenant]
    return q ~= nil and q.tail - q.head + 1 >= st.tcap
end

-- Raises (at the caller of new) on a key of opts that spec does not name.
function _M.check_opts(fname, opts, spec)
    if opts == nil then return {} end
    if type(opts) ~= "table" then
        error(format("%s: opts must be a table, got %s", fname, type(opts)), 3)
    end
    for k in pairs(opts) do
        if not spec[k] then
            error(format("%s: unknown option %s", fname, tostring(k)), 3)
        end
    end
    return opts
end

function _M.check_int(fname, what, v, lo, hi)
    if type(v) ~= "number" or v ~= floor(v) or v < lo or v > hi then
        error(format("%s: %s must be an integer in %d..%d, got %s", fname, what, lo, hi,
                     tostring(v)), 3)
    end
    return v
end

function _M.check_tenant(fname, tenant)
    if type(tenant) ~= "string" or tenant == "" then
        error(fname .. ": tenant must be a non-empty string, got " .. tostring(tenant), 3)
    end
end

-- A FIFO of tenants (the ones holding items, in service order) and one FIFO of items per
-- tenant. Empty tenants are dropped at once: memory is bounded by the items held.
function _M.new_state(cap, tcap)
    return { cap = cap, tcap = tcap or cap, n = 0, per = {}, ring = {}, rhead = 1,
             rtail = 0 }
end

function _M.ring_push(st, q)
    st.rtail = st.rtail + 1
    st.ring[st.rtail] = q
end

-- The tenant queue to serve next and its ring index: the first in service order, or with
-- eligible the first for which eligible(tenant) holds; nil when none. Costs one call per
-- skipped (ineligible) tenant.
function _M.ring_next(st, eligible)
    local ring = st.ring
    if not eligible then
        if st.rhead > st.rtail then return nil end
        return ring[st.rhead], st.rhead
    end
    for i = st.rhead, st.rtail do
        local q = ring[i]
        if eligible(q.tenant) then return q, i end
    end
    return nil
end

-- Removes ring[i]; the tenants before it keep their places (their turn comes first).
function _M.ring_remove(st, i)
    local ring = st.ring
    for j = i, st.rhead + 1, -1 do ring[j] = ring[j - 1] end
    ring[st.rhead] = nil
    st.rhead = st.rhead + 1
    if st.rhead > st.rtail then st.rhead, st.rtail = 1, 0 end
end

-- Items a tenant holds (0 when none).
function _M.held(st, tenant)
    local q = st.per[tenant]
    return q and q.tail - q.head + 1 or 0
end

-- Appends item to tenant's FIFO; returns the tenant's queue and whether it was idle.
function _M.push(st, tenant, item, weight)
    local q = st.per[tenant]
    local fresh = false
    if not q then
        q = { tenant = tenant, head = 1, tail = 0, weight = weight, deficit = 0 }
        st.per[tenant] = q
        fresh = true
    end
    q.tail = q.tail + 1
    q[q.tail] = item
    st.n = st.n + 1
    return q, fresh
end

-- p:enqueue (a tail call from the policy's method: the errors name its caller): Busy at a
-- cap, else queued at the tenant's weight (a tenant that held nothing joins the back of the
-- rotation).
function _M.enqueue(st, policy, tenant, item, weight)
    _M.check_tenant(policy .. ":enqueue", tenant)
    if item == nil then error(policy .. ":enqueue: item must not be nil", 2) end
    if _M.full(st, tenant) then return nil, "Busy" end
    local q, fresh = _M.push(st, tenant, item, weight)
    if fresh then _M.ring_push(st, q) end
    return true
end

-- Takes the oldest item of q; drops q from the tenant map once empty. Returns item, empty.
function _M.take(st, q)
    local item = q[q.head]
    q[q.head] = nil
    q.head = q.head + 1
    st.n = st.n - 1
    if q.head > q.tail then
        st.per[q.tenant] = nil
        return item, true
    end
    return item, false
end

-- Tenants holding items, in the order they will next be served.
function _M.tenants(st)
    local out = {}
    for i = st.rhead, st.rtail do out[#out + 1] = st.ring[i].tenant end
    return out
end

-- The methods every built-in policy answers the same way (its state is self.st):
-- p:len([tenant]) -> items held (by tenant), p:tenants() -> tenants in serving order.
function _M.methods(P)
    function P:len(tenant)
        if tenant ~= nil then return _M.held(self.st, tenant) end
        return self.st.n
    end
    function P:tenants() return _M.tenants(self.st) end
    return P
end

return _M
