-- host-run-error-exit: an uncaught error ends the host with status 1 and a traceback.
local function deeper()
    error("intentional failure from error.lua")
end
print("before the error")
deeper()
print("not reached")
