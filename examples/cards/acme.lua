-- A rate card (docs/LEDGER-RATING.md §2): the price of each dimension in USD cents. The
-- version is cited by every transfer priced with it: change it with the prices.
return {
    version = "acme-2026-11.1",
    currency = { code = "USD", scale = 2 },
    period = "month",
    dimensions = {
        bytes = { per = 1000000, free = 1000000000,             -- 1 GB a month free
                  tiers = { { upto = 1000000000000, price = 10 }, -- 10 c/MB up to 1 TB
                            { price = 5 } } },                    -- then 5 c/MB
        requests = { per = 1000, price = 2 },                     -- 2 c per 1000 requests
        cpu_units = { price = 1 },                                -- 1 c per unit
    },
}
