-- ron.accounting.fairness.common: what round_robin and wfq share (option checks, the
-- bounded per-tenant FIFOs, the ring of tenants with items). Not a policy itself.
local type, error, pairs, tostring, format, floor = type, error, pairs, tostring,
                                                     string.format, math.floor

local _M = {}

_M.DEFAULT_CAP = 65536     -- total items a policy holds (opts.cap)
_M.MAX_CAP = 16777216

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
function _M.new_state(cap)
    return { cap = cap, n = 0, per = {}, ring = {}, rhead = 1, rtail = 0 }
end

function _M.ring_push(st, q)
    st.rtail = st.rtail + 1
    st.ring[st.rtail] = q
end

function _M.ring_pop(st)
    local q = st.ring[st.rhead]
    st.ring[st.rhead] = nil
    st.rhead = st.rhead + 1
    if st.rhead > st.rtail then st.rhead, st.rtail = 1, 0 end
    return q
end

function _M.ring_front(st)
    if st.rhead > st.rtail then return nil end
    return st.ring[st.rhead]
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

return _M
