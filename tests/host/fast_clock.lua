-- The daemon settings the host tests share: a fast injected clock (one 60-second window
-- per real second from R0, the test's start), an ephemeral loopback port, no status
-- lines, a short tick and drain deadline. A test's --config file does
--   local cfg = dofile(SRC .. "/tests/host/fast_clock.lua")(R0)
-- and adds its own keys (exporter, backoff, ...).
local uv = require("luv")
return function(r0)
    local speed = 60
    return {
        window_len_s = 60, listen = "127.0.0.1:0", status_interval_s = 0, tick_ms = 200,
        drain_deadline_ms = 3000,
        clock = function()
            local s, us = uv.gettimeofday()
            return 1735689600 + (s + us / 1e6 - r0) * speed
        end,
    }
end
