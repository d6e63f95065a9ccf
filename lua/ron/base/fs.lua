-- ron.base.fs: whole-file reads with plain io, for the tools, the CLI verbs and the checks
-- (what waits on the loop reads through luv instead).
--
--   fs.read_file(path) -> the file's bytes | nil (it cannot be opened)
--   fs.file_size(path) -> bytes | nil
local io_open = io.open

local _M = {}

function _M.read_file(path)
    local f = io_open(path, "rb")
    if not f then return nil end
    local s = f:read("*a")
    f:close()
    return s
end

function _M.file_size(path)
    local f = io_open(path, "rb")
    if not f then return nil end
    local n = f:seek("end")
    f:close()
    return n
end

return _M
