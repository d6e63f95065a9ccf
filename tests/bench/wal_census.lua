-- wal_census: which B-trees a SQLite ledger's commits write, counted from its WAL (issue
-- 25). bench-wallet.lua --wal-census runs the cases with the store's checkpoints held off
-- after its first, so the WAL holds every frame each case wrote, in order; this
-- reads each frame's page number from its header (https://sqlite.org/fileformat2.html,
-- "WAL File Format": a 32-byte file header, then per frame a 24-byte header whose first 4
-- bytes are the page number, big-endian, and the page) and names the page's B-tree through
-- SQLite's dbstat over a read-only connection. A page freed and used again by another tree
-- since is named by its tree now: the census is of the case's own writes, read at its end.
--
--   local census = require("wal_census")
--   local at = census.frames(db_path)      -- frames in the WAL now (nil: no WAL)
--   ... the case ...
--   census.print("sqlite", db_path, at, n_transfers)
local store_mod = require("ron.ledger.store")

local format = string.format

local M = {}

local HEADER, FRAME_HEADER = 32, 24

local function be32(s, i)
    local a, b, c, d = s:byte(i, i + 3)
    return ((a * 256 + b) * 256 + c) * 256 + d
end

-- The WAL's page size and frame count (from its size: frames are appended until a
-- checkpoint lets the writer start the WAL again).
function M.frames(db_path)
    local f = io.open(db_path .. "-wal", "rb")
    if not f then return nil end
    local hdr = f:read(HEADER)
    local size = f:seek("end")
    f:close()
    if not hdr or #hdr < HEADER then return nil end
    local ps = be32(hdr, 9)
    return math.floor((size - HEADER) / (FRAME_HEADER + ps)), ps
end

-- page number -> the name of its table or index, now
local function page_names(db_path)
    local st = assert(store_mod.open { backend = "sqlite", path = db_path, readonly = true })
    local rows = st.drv:read("SELECT pageno, name FROM dbstat", { n = 0 })
    st:close()
    local names = {}
    for _, r in ipairs(rows or {}) do names[tonumber(r[1])] = r[2] end
    return names
end

-- frames from+1 .. the last: -> { name = count }, frames counted
function M.count(db_path, from)
    local n, ps = M.frames(db_path)
    if not n or n <= from then return {}, 0 end
    local names = page_names(db_path)
    local f = assert(io.open(db_path .. "-wal", "rb"))
    local by = {}
    for i = from, n - 1 do
        f:seek("set", HEADER + i * (FRAME_HEADER + ps))
        local name = names[be32(f:read(4), 1)] or "(free or new)"
        by[name] = (by[name] or 0) + 1
    end
    f:close()
    return by, n - from
end

-- One line: the case's WAL frames per transfer, by B-tree, largest first.
function M.print(label, db_path, from, transfers)
    if not from then return print(format("%-8s %-15s WAL census: no WAL", label, "")) end
    local by, n = M.count(db_path, from)
    local list = {}
    for k, v in pairs(by) do list[#list + 1] = { k, v } end
    table.sort(list, function(a, b) return a[2] > b[2] end)
    local parts = {}
    for i = 1, math.min(12, #list) do
        parts[i] = format("%s %.2f", list[i][1], list[i][2] / math.max(transfers, 1))
    end
    print(format("%-8s %-15s WAL frames per transfer %.2f (%d frames, %d transfers): %s",
                 label, "", n / math.max(transfers, 1), n, transfers,
                 table.concat(parts, ", ")))
end

return M
