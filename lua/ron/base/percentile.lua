-- ron.base.percentile: the nearest-rank percentile, the one rule the runtime's readiness
-- (p95 of its sample ring) and the benchmarks' and specs' latency figures use.
--
--   percentile(values, q[, n])  -> the smallest value with at least q of the values at or
--                                  below it (q in (0, 1]: 0.5 the median, 1 the maximum);
--                                  values[1..n] (n default #values) are copied, never
--                                  reordered; 0 when there are none
local ceil, max, sort = math.ceil, math.max, table.sort

return function(values, q, n)
    n = n or #values
    if n == 0 then return 0 end
    local a = {}
    for i = 1, n do a[i] = values[i] end
    sort(a)
    return a[max(1, ceil(q * n))]
end
