-- ron.base.check: the checks of what a caller hands a module (STYLE.md 12: options and
-- configuration tables are validated, unknown keys are errors; a policy is a table of one
-- fixed shape). Written once here; each module keeps its own messages' names.
--
--   check.options(fname, opts, known[, level])  misuse raises: opts not a table, or a key
--                                               not in the set `known` (level as error's,
--                                               counted from the caller; default 2)
--   check.section(v, key, shape, known)  -> true | nil, err: a daemon configuration
--                                           section, false (off) or a table whose keys
--                                           have a value in `known` (DEFAULTS, a set)
--   check.ranges(v, ranges, key)         -> true | nil, err: each v[k] present is an
--                                           integer in ranges[k] = { lo, hi }
--   check.policy(p, methods, who[, level])  misuse raises: p a table (or userdata) whose
--                                           methods[i] are functions
local format, tostring, type, pairs, ipairs, pcall, error, floor =
      string.format, tostring, type, pairs, ipairs, pcall, error, math.floor

local _M = {}

function _M.options(fname, opts, known, level)
    level = (level or 2) + 1
    if type(opts) ~= "table" then error(fname .. ": expects an options table", level) end
    for k in pairs(opts) do
        if not known[k] then error(format("%s: unknown option %q", fname, tostring(k)), level) end
    end
    return opts
end

function _M.section(v, key, shape, known)
    if v == false then return true end
    if type(v) ~= "table" then return nil, format("%s must be false or a table %s", key, shape) end
    for k in pairs(v) do
        if known[k] == nil then return nil, format("unknown key '%s.%s'", key, tostring(k)) end
    end
    return true
end

function _M.ranges(v, ranges, key)
    for k, r in pairs(ranges) do
        local x = v[k]
        if x ~= nil and (type(x) ~= "number" or x ~= floor(x) or x < r[1] or x > r[2]) then
            return nil, format("%s.%s must be an integer in %d..%d, got %s", key, k, r[1], r[2],
                               tostring(x))
        end
    end
    return true
end

function _M.policy(p, methods, who, level)
    level = (level or 2) + 1
    local t = type(p)
    if t ~= "table" and t ~= "userdata" then
        error(who .. ": a policy must be a table, got " .. t, level)
    end
    for _, m in ipairs(methods) do
        local ok, f = pcall(function() return p[m] end)
        if not ok or type(f) ~= "function" then
            error(who .. ": policy." .. m .. " must be a function, got "
                  .. (ok and type(f) or "an error"), level)
        end
    end
    return p
end

return _M
