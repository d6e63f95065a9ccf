-- wal-golden.lua FORMAT_MD DIR: writes the golden WAL of docs/FORMAT.md §4.8 (the
-- ```golden-wal segment and ```golden-wal heads blocks) into DIR as
-- 0000000000000001.seg and heads, for tests/host/wal.sh (case golden).
local md, dir = assert(arg[1]), assert(arg[2])
local blocks, cur = {}, nil
for line in io.lines(md) do
    local name = line:match("^```golden%-wal (%a+)$")
    if name then
        cur = {}
        blocks[name] = cur
    elseif cur and line:match("^```") then
        cur = nil
    elseif cur then
        for h in line:gmatch("%x%x") do cur[#cur + 1] = string.char(tonumber(h, 16)) end
    end
end
local files = { segment = "0000000000000001.seg", heads = "heads" }
for name, file in pairs(files) do
    local b = assert(blocks[name], "no golden-wal " .. name .. " block in " .. md)
    local f = assert(io.open(dir .. "/" .. file, "wb"))
    f:write(table.concat(b))
    f:close()
end
print(("wal-golden: wrote %d + %d bytes"):format(#blocks.segment, #blocks.heads))
