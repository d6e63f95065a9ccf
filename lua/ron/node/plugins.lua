-- ron.node.plugins: an exporter, fairness policy or backoff from its setting:
-- a built-in name, { policy = name, ... } or an operator's { module = "name", ... }
-- (module.new(opts)); errors as one line naming the kind and the module.
local format, pairs, type, tostring, pcall, require = string.format, pairs, type, tostring, pcall,
                                                      require

local _M = {}

-- A plug-in from its configuration: a built-in name, { policy = name, ... } or
-- { module = "name", ... } (module.new(opts)).
function _M.new(kind, v, builtin_prefix)
    if v == false or v == nil then return nil end
    local name, opts
    if type(v) == "string" then
        name, opts = builtin_prefix .. v, nil
    else
        opts = {}
        for k, x in pairs(v) do
            if k ~= "module" and k ~= "policy" then opts[k] = x end
        end
        name = v.module or (builtin_prefix .. (v.policy or "exponential"))
    end
    local ok, mod = pcall(require, name)
    if not ok then return nil, format("%s: cannot load %s: %s", kind, name, tostring(mod)) end
    if type(mod) ~= "table" or type(mod.new) ~= "function" then
        return nil, format("%s: module %s has no new(opts)", kind, name)
    end
    local ok2, obj, err = pcall(mod.new, opts)
    if not ok2 or not obj then
        return nil, format("%s: %s.new: %s", kind, name, tostring(ok2 and err or obj))
    end
    return obj
end

return _M
