-- The default rate card (`make run`, docs/ops/run.md "Prices"): what the daemon prices usage
-- with when no configuration names a card. Prices are in USD cents (scale 2), summed over a
-- calendar month per tenant (docs/LEDGER-RATING.md §2):
--
--   requests    5 c per 1000 requests
--   bytes       the first 100 MB of a month free, then 2 c per MB
--   cpu_units   1 c per unit
--
-- At `--demo 1000` (about 333 requests/s per demo tenant, ~1 KB each) a tenant uses about
-- 20 000 requests and 20 MB a window of 60 s: 1.00 USD of requests per window, and bytes
-- are charged from the sixth window on. The version is cited by every transfer priced
-- with this card: change it with the prices.
return {
    version = "default-2026-11.1",
    currency = { code = "USD", scale = 2 },
    period = "month",
    dimensions = {
        requests = { per = 1000, price = 5 },
        bytes = { per = 1000000, free = 100000000, price = 2 },
        cpu_units = { price = 1 },
    },
}
