-- ron.base.metrics: the one metrics registry of the Lua side (PRODUCT.md §4: "one metrics
-- registry, registered once, rendered in Prometheus text format"). A family is declared
-- once, in its package's families.lua (name, type, help, labels); its owner renders it with
-- the values it holds, through the family, and nothing else writes "# HELP"/"# TYPE" lines
-- (tools/check-reference.lua reads this registry for docs/reference/metrics.md and refuses a
-- family rendered by hand). The C core's families come from core/metrics.c; merge() joins
-- both expositions into one.
--
--   local F = metrics.family { name = "accounting_exports_total", type = "counter",
--                              help = "Export outcomes, by status.", labels = { "status" } }
--   local FAM = metrics.declare {                -- a package's families.lua: one row a family,
--       exports = { "counter accounting_exports_total{status}", "Export outcomes, by status." },
--   }                                            -- FAM.exports is the family; return FAM
--   F:render(out, 42)                            -- no labels: one sample
--   F:render(out, { { "ok", 40 }, { "dup", 2 } }) -- labels: { label values..., value } rows
--                                                -- (a label whose value is nil is left out)
--   F:render_map(out, map[, keys])               -- one label: map[key] = value, keys sorted
--                                                -- (or in the order of `keys`)
--   F:render_histogram(out, les, cumulative, sum, count)
--   metrics.text(out) -> the lines as Prometheus text 0.0.4
--   metrics.families() -> every family declared, sorted by name
--   metrics.merge({ text, ... }) -> one exposition, each family once
--
-- A rename is one line: name = "new_name", also = { "old_name" } renders the family under
-- both names (each a complete family) until the old one is dropped.
local format, concat, sort = string.format, table.concat, table.sort
local gmatch, match, gsub = string.gmatch, string.match, string.gsub
local pairs, ipairs, type, tostring, error, setmetatable, floor =
      pairs, ipairs, type, tostring, error, setmetatable, math.floor

local _M = {}

local TYPES = { counter = true, gauge = true, histogram = true }
local registry = {} -- name -> family (the also names too)

local F = {}
F.__index = F

local function check_def(d, level)
    if type(d) ~= "table" or type(d.name) ~= "string" or not match(d.name, "^[%l_][%w_]*$") then
        error("metrics.family: name must be a metric name", level + 1)
    end
    if not TYPES[d.type] then
        error("metrics.family " .. d.name .. ": type must be counter, gauge or histogram",
              level + 1)
    end
    if type(d.help) ~= "string" or d.help == "" or d.help:find("\n", 1, true) then
        error("metrics.family " .. d.name .. ": help must be one line", level + 1)
    end
    for _, l in ipairs(d.labels or {}) do
        if type(l) ~= "string" or not match(l, "^[%a_][%w_]*$") then
            error("metrics.family " .. d.name .. ": bad label name " .. tostring(l), level + 1)
        end
    end
end

local function same(a, b)
    if a.type ~= b.type or a.help ~= b.help or #a.labels ~= #b.labels then return false end
    for i, l in ipairs(a.labels) do if b.labels[i] ~= l then return false end end
    return true
end

-- Declares a family (once; declaring the same one again answers the first, another one
-- under a taken name is an error). level: the stack level of the declaring file.
local function declare_family(d, level)
    check_def(d, level)
    local f = setmetatable({ name = d.name, type = d.type, help = d.help,
                             labels = d.labels or {}, also = d.also or {},
                             where = (debug.getinfo(level, "S").source:gsub("^@", "")) }, F)
    f.names = { f.name }
    for _, n in ipairs(f.also) do f.names[#f.names + 1] = n end
    local first = registry[f.name]
    if first then
        if first.name == f.name and same(first, f) then return first end
        error(format("metrics.family %s: declared twice (first in %s)", f.name, first.where),
              level)
    end
    for _, n in ipairs(f.names) do registry[n] = f end
    return f
end

-- (not a tail call: the level counts this frame)
function _M.family(d)
    local f = declare_family(d, 3)
    return f
end

-- A row's head, "type name" or "type name{label,...}" -> a family's definition.
local function parse_head(key, head, help)
    local ty, name, labs = match(head, "^(%l+) ([%w_]+)(.*)$")
    if not ty or (labs ~= "" and not match(labs, "^{[%w_,]+}$")) then
        error(format("metrics.declare %s: want \"type name{labels}\", got %q", key, head), 3)
    end
    local labels = {}
    for l in gmatch(labs, "[%w_]+") do labels[#labels + 1] = l end
    return { name = name, type = ty, help = help, labels = labels }
end

-- A package's families, one row each: key = { "type name{labels}", help[, also] } -> the
-- table key -> family (a value that is not a row, a constant, is carried as it is).
-- The declaring file must be on the stack: `local FAM = metrics.declare {...}; return FAM`
-- (`return metrics.declare {...}` is a tail call, which drops the file's frame).
function _M.declare(rows)
    if debug.getinfo(2, "S").what == "C" then
        error("metrics.declare: assign the families to a local, then return it (a tail call "
              .. "hides the declaring file)", 2)
    end
    local out = {}
    for key, row in pairs(rows) do
        if type(row) == "table" then
            local d = parse_head(key, row[1], row[2])
            d.also = row[3]
            out[key] = declare_family(d, 3)
        else
            out[key] = row
        end
    end
    return out
end

function _M.families()
    local list, seen = {}, {}
    for _, f in pairs(registry) do
        if not seen[f] then
            seen[f] = true
            list[#list + 1] = f
        end
    end
    sort(list, function(a, b) return a.name < b.name end)
    return list
end

-- A sample's value: integers exactly (counts, sequence numbers), others as %.17g.
local function value(v)
    if type(v) == "number" then
        if v == floor(v) and v > -2^63 and v < 2^63 then return format("%d", v) end
        return format("%.17g", v)
    elseif type(v) == "boolean" then
        return v and "1" or "0"
    end
    return (gsub(tostring(v), "U?LL$", "")) -- an int64/uint64 cdata
end
_M.value = value

local ESC = { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n" }
local function label_value(v) return (gsub(tostring(v), '[\\"\n]', ESC)) end

local function labels(f, row, extra)
    local parts = {}
    for i, l in ipairs(f.labels) do
        if row[i] ~= nil then parts[#parts + 1] = format('%s="%s"', l, label_value(row[i])) end
    end
    if extra then parts[#parts + 1] = extra end
    if #parts == 0 then return "" end
    return "{" .. concat(parts, ",") .. "}"
end

local function header(out, f, name)
    out[#out + 1] = format("# HELP %s %s", name, f.help)
    out[#out + 1] = format("# TYPE %s %s", name, f.type)
end

-- v: a value (a family without labels) or a list of rows { label values..., value }.
function F:render(out, v)
    for _, name in ipairs(self.names) do
        header(out, self, name)
        if #self.labels == 0 then
            out[#out + 1] = name .. " " .. value(v)
        else
            local n = #self.labels
            for _, row in ipairs(v) do
                out[#out + 1] = name .. labels(self, row) .. " " .. value(row[n + 1])
            end
        end
    end
    return out
end

-- A family of one label from a map (label value -> value); keys: the label values in
-- order (default: the map's keys, sorted).
function F:render_map(out, map, keys)
    if not keys then
        keys = {}
        for k in pairs(map) do keys[#keys + 1] = k end
        sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    end
    local rows = {}
    for i, k in ipairs(keys) do rows[i] = { k, map[k] or 0 } end
    return self:render(out, rows)
end

-- les: the buckets' upper bounds; cumulative[i]: the observations <= les[i], and
-- cumulative[#les + 1] all of them (the +Inf bucket).
function F:render_histogram(out, les, cumulative, sum, count)
    for _, name in ipairs(self.names) do
        header(out, self, name)
        for i, le in ipairs(les) do
            out[#out + 1] = format('%s_bucket{le="%s"} %s', name, value(le), value(cumulative[i]))
        end
        out[#out + 1] = format('%s_bucket{le="+Inf"} %s', name, value(cumulative[#les + 1]))
        out[#out + 1] = format("%s_sum %s", name, value(sum))
        out[#out + 1] = format("%s_count %s", name, value(count))
    end
    return out
end

function _M.text(out)
    if #out == 0 then return "" end
    return concat(out, "\n") .. "\n"
end

-- One sample line of an exposition -> name, labels ("" or the "{...}" text), value (its
-- text: a uint64 is never rounded through a Lua number) | nil for a comment or a blank.
function _M.sample_line(line)
    if match(line, "^#") then return nil end
    local name, lab, v = match(line, "^([%w_:]+)(%b{})%s*(%S*)")
    if not name then
        name, v = match(line, "^([%w_:]+)%s*(%S*)")
        lab = ""
    end
    return name, lab, v
end

-- Merges Prometheus text expositions into one where each metric family (HELP, TYPE and
-- its samples) appears once, contiguous: the format forbids a family split in two or
-- described twice (the meter and the runtime both count accounting_rejected_total, with
-- different reasons). The first HELP/TYPE of a family wins; a sample whose name and labels
-- were already seen is dropped (first wins: a collision is a naming bug upstream).
function _M.merge(texts)
    local order, fam = {}, {}
    local seen = {}
    local function family(name)
        local f = fam[name]
        if not f then
            f = { samples = {} }
            fam[name] = f
            order[#order + 1] = name
        end
        return f
    end
    -- histogram/summary samples (_bucket, _sum, _count) belong to their base family.
    local function owner(sample_name)
        for _, suffix in ipairs { "_bucket", "_sum", "_count" } do
            local base = match(sample_name, "^(.-)" .. suffix .. "$")
            if base and fam[base] and (fam[base].type == "histogram" or
                                       fam[base].type == "summary") then
                return base
            end
        end
        return sample_name
    end
    for _, text in ipairs(texts) do
        for line in gmatch(text, "[^\n]+") do
            local kind, name, rest = match(line, "^#%s+(%u+)%s+([%w_:]+)%s*(.*)$")
            if kind == "HELP" then
                local f = family(name)
                f.help = f.help or rest
            elseif kind == "TYPE" then
                local f = family(name)
                f.type = f.type or rest
            else -- (another comment line is dropped)
                local sname, lab = _M.sample_line(line)
                if sname then
                    local id = sname .. lab
                    if not seen[id] then
                        seen[id] = true
                        local s = family(owner(sname)).samples
                        s[#s + 1] = line
                    end
                end
            end
        end
    end
    local out = {}
    for _, name in ipairs(order) do
        local f = fam[name]
        if f.help then out[#out + 1] = format("# HELP %s %s", name, f.help) end
        if f.type then out[#out + 1] = format("# TYPE %s %s", name, f.type) end
        for _, l in ipairs(f.samples) do out[#out + 1] = l end
    end
    return concat(out, "\n") .. "\n"
end

return _M
