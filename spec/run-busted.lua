-- busted inside the host: `ron-accounting run spec/run-busted.lua [busted args] SPEC...`.
-- Specs that need the event loop (spec/ron/base/task_spec.lua) then run with luv
-- bound to the host's own libuv loop, the one the daemon's tasks use; each case drives the
-- loop with uv.run() from the main chunk. busted's failure exit is
-- mapped to status 1; on success this chunk returns and the host's status (0) stands.
local ok, err = pcall(require("busted.runner"), { standalone = false })
if not ok then
    -- On a failure busted (in Lua 5.1 mode) reports, then raises a nil error to unwind
    -- instead of calling os.exit: turn that into the exit status it means.
    if err == nil then os.exit(1) end
    error(err, 0)
end
