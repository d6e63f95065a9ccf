-- ron.base.fs: whole-file reads with plain io, for the tools, the CLI verbs and the checks
-- (what waits on the loop reads through luv instead).
--
--   fs.read_file(path) -> the file's bytes | nil (it cannot be opened)
--   fs.file_size(path) -> bytes | nil
local io_open = io.open

local _M = {}

-- what(f) on the file opened for reading, closed after; nil when it cannot be opened.
local function with_file(path, what)
    local f = io_open(path, "rb")
    if not f then return nil end
    local v = what(f)
    f:close()
    return v
end

local function all(f) return f:read("*a") end
local function size(f) return f:seek("end") end

function _M.read_file(path) return with_file(path, all) end
function _M.file_size(path) return with_file(path, size) end

return _M
