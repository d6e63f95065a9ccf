-- ron.accounting.export.exporters.file: the embedded default ledger (docs/EXPORT.md, "The file
-- ledger"). An append-only directory of per-stream files that enforces the export
-- contract itself:
--
--   local file = require("ron.accounting.export.exporters.file")
--   local ledger = assert(file.new { dir = "./var/ledger", fsync = true })
--   local status, detail = ledger:put(slice)   -- ok | dup | conflict | gap, or nil, err
--   local head = ledger:head(tenant, dimension) -- { seq = n, b3 = hex } | nil
--   ledger:close()
--
-- Layout:  <dir>/LEDGER                        marker, "ron-accounting file ledger v1\n"
--          <dir>/<tenant uuid>/<dimension>.ledger   one stream, records in seq order
--          <dir>/<tenant uuid>/<dimension>.ledger.<offset>.broken   a cut torn tail
-- Record:  u32 little-endian n | n bytes: the slice's canonical encoding (FORMAT.md §1)
--          | 32 bytes: BLAKE3 of those n bytes (= the slice's b3)
-- Record k (1-based) of a stream file holds seq k: a chain starts at seq 1.
-- A record may instead be an accepted loss (ledger:accept_loss; docs/EXPORT.md §2,
-- "Accepted losses"): the
-- operator gave up seqs the producer no longer has; its bytes start with `RONL` and its
-- trailer is the b3 the next record links to, not a digest of the record.
--
-- Synchronous on purpose (lite mode uses it without a loop): every put() opens the stream
-- file, takes flock(LOCK_EX) on it (two exporters, in one process or in several, may
-- race on one stream: the lock serialises them and each re-reads the head under it),
-- decides from the head, appends and fsyncs, unlocks and closes. Memory: one cached head
-- per stream ({seq, b3, file size}), never a slice. Linux only (flock, the O_* values).
local ffi = require("ffi")
local bit = require("bit")
local b3raw = require("ron.base.b3").raw
local chain = require("ron.accounting.export.chain")
local slice_mod = require("ron.accounting.binding.slice")
local C = require("ron.accounting.binding.lib").namespace()
local SYS = ffi.C

assert(ffi.os == "Linux", "ron.accounting.export.exporters.file: Linux only")

-- Another module may have declared some of these already: each on its own.
for _, decl in ipairs {
    "int open(const char *pathname, int flags, ...);",
    "int close(int fd);",
    "intptr_t pread(int fd, void *buf, size_t count, int64_t offset);",
    "intptr_t write(int fd, const void *buf, size_t count);",
    "int fsync(int fd);",
    "int flock(int fd, int operation);",
    "int64_t lseek(int fd, int64_t offset, int whence);",
    "int ftruncate(int fd, int64_t length);",
    "int mkdir(const char *pathname, unsigned int mode);",
    "char *strerror(int errnum);",
    "int getpid(void);",
} do
    pcall(ffi.cdef, decl)
end

local O_RDONLY, O_WRONLY, O_RDWR = 0, 1, 2
local O_CREAT, O_EXCL, O_APPEND, O_CLOEXEC = 0x40, 0x80, 0x400, 0x80000
local LOCK_EX, LOCK_UN = 2, 8
local SEEK_END = 2
local ENOENT, EINTR, EEXIST, ENOSPC = 2, 4, 17, 28

local MARKER = "LEDGER"
local MARKER_TEXT = "ron-accounting file ledger v1\n"
local MAX_SLICE = 1048576 -- FORMAT.md §1: a slice is at most 1 MiB
local TRAILER = 32
local ZERO32 = string.rep("\0", 32)

local band, rshift = bit.band, bit.rshift
local byte, char, rep = string.byte, string.char, string.rep
local ffi_string, ffi_new = ffi.string, ffi.new
local tonumber, type = tonumber, type

local _M = { MARKER = MARKER, MARKER_TEXT = MARKER_TEXT }

---------------------------------------------------------------------------------------
-- system calls
---------------------------------------------------------------------------------------

local function errstr(what, path, e)
    e = e or ffi.errno()
    local name = e == ENOSPC and "PersistenceFull" or "IoError"
    return ("%s: %s %s: %s"):format(name, what, path, ffi_string(SYS.strerror(e))), e
end

-- The system-call wrappers below make one call in the common case and keep their retry
-- loops in separate functions: a loop inside a function that a hot loop calls (the
-- pool's put_many) makes LuaJIT abort the caller's trace ("inner loop in root trace"),
-- and the whole put path then runs interpreted, ~3x slower.
local NO_MODE = ffi_new("int", 0) -- open()'s variadic mode must be an int cdata

local function sys_open_retry(path, flags, mode)
    while true do
        local fd = SYS.open(path, flags, mode)
        if fd >= 0 then return fd end
        local e = ffi.errno()
        if e ~= EINTR then return nil, e end
    end
end

local function sys_open(path, flags, mode)
    mode = mode and ffi_new("int", mode) or NO_MODE -- a mode only when creating: rare
    local fd = SYS.open(path, flags, mode)
    if fd >= 0 then return fd end
    local e = ffi.errno()
    if e ~= EINTR then return nil, e end
    return sys_open_retry(path, flags, mode)
end

local function fsync_path(path)
    local fd = sys_open(path, O_RDONLY + O_CLOEXEC)
    if not fd then return nil, errstr("open", path) end
    local rc = SYS.fsync(fd)
    local e = ffi.errno()
    SYS.close(fd)
    if rc ~= 0 then return nil, errstr("fsync", path, e) end
    return true
end

-- mkdir 0700; returns true when it created the directory, false when it existed.
local function mkdir(path)
    if SYS.mkdir(path, 448) == 0 then return true end
    local e = ffi.errno()
    if e == EEXIST then return false end
    return nil, errstr("mkdir", path, e)
end

local function write_rest(fd, p, n, off, path)
    while off < n do
        local w = tonumber(SYS.write(fd, p + off, n - off))
        if w < 0 then
            local e = ffi.errno()
            if e ~= EINTR then return nil, errstr("write", path, e) end
        else
            off = off + w
        end
    end
    return true
end

local function write_all(fd, s, path)
    local p, n = ffi.cast("const char *", s), #s
    local w = tonumber(SYS.write(fd, p, n))
    if w == n then return true end
    if w < 0 then
        local e = ffi.errno()
        if e ~= EINTR then return nil, errstr("write", path, e) end
        w = 0
    end
    return write_rest(fd, p, n, w, path)
end

local buf_cap = 64 * 1024
local buf = ffi_new("uint8_t[?]", buf_cap)

local function pread_rest(fd, n, off, got)
    while got < n do
        local r = tonumber(SYS.pread(fd, buf + got, n - got, off + got))
        if r < 0 then
            if ffi.errno() ~= EINTR then return nil end
        elseif r == 0 then
            break
        else
            got = got + r
        end
    end
    return ffi_string(buf, got)
end

-- n bytes at off as a Lua string (shorter only at end of file).
local function pread_str(fd, n, off)
    if n > buf_cap then
        buf_cap = n
        buf = ffi_new("uint8_t[?]", buf_cap)
    end
    local r = tonumber(SYS.pread(fd, buf, n, off))
    if r == n then return ffi_string(buf, n) end
    if r < 0 then
        if ffi.errno() ~= EINTR then return nil end
        r = 0
    end
    return pread_rest(fd, n, off, r)
end


local function u32le(n)
    return char(band(n, 255), band(rshift(n, 8), 255), band(rshift(n, 16), 255),
                band(rshift(n, 24), 255))
end

local function get_u32(s, i)
    local a, b, c, d = byte(s, i, i + 3)
    return a + b * 256 + c * 65536 + d * 16777216
end

local function get_u64(s, i) -- exact below 2^53, which every real seq is
    local lo, hi = get_u32(s, i), get_u32(s, i + 4)
    return hi * 4294967296 + lo
end

local function tohex(s)
    return (s:gsub(".", function(c) return ("%02x"):format(byte(c)) end))
end

-- Accepted-loss records (docs/EXPORT.md §2, "Accepted losses"): ron.accounting.export.loss.
local loss = require("ron.accounting.export.loss")
local loss_seq = loss.seq
_M._loss_seq = loss_seq -- for specs

local slice_out = ffi_new("ra_slice_t *[1]")
-- nil, or the decoded slice's seq (the record is released at once).
local function decoded_seq(bytes)
    if C.ra_slice_decode(bytes, #bytes, slice_out) ~= 0 then return nil end
    local s = slice_out[0]
    local id = ffi_new("ra_slice_id_t")
    C.ra_slice_get_id(s, id)
    C.ra_slice_unref(s)
    slice_out[0] = nil
    return tonumber(id.seq)
end

---------------------------------------------------------------------------------------
-- loading a stream's head (under the stream's lock)
---------------------------------------------------------------------------------------

local Ledger = {}
Ledger.__index = Ledger
-- Capability (the exporter contract): put() writes and fsyncs on the calling thread, so
-- the export runtime refuses this ledger on the loop (offload.file runs it in the pool).
Ledger.blocking = true

local function corrupt(path, off, what)
    return nil, ("IoError: %s: corrupt ledger at offset %d: %s (run ron-accounting verify)")
        :format(path, off, what)
end

-- Keeps bytes [off, size) aside as <path>.<off>.broken, then cuts the file there.
function Ledger:_cut(fd, path, off, size, why)
    local tail = pread_str(fd, size - off, off)
    if not tail then return nil, errstr("pread", path) end
    local bpath, k = ("%s.%d.broken"):format(path, off), 0
    while true do
        local bfd, e = sys_open(bpath, O_WRONLY + O_CREAT + O_EXCL + O_CLOEXEC, 384)
        if bfd then
            local ok, err = write_all(bfd, tail, bpath)
            if ok and self.fsync and SYS.fsync(bfd) ~= 0 then
                ok, err = nil, errstr("fsync", bpath)
            end
            SYS.close(bfd)
            if not ok then return nil, err end
            break
        end
        if e ~= EEXIST then return nil, errstr("open", bpath, e) end
        k = k + 1
        bpath = ("%s.%d.broken.%d"):format(path, off, k)
    end
    if SYS.ftruncate(fd, off) ~= 0 then return nil, errstr("ftruncate", path) end
    if self.fsync then
        if SYS.fsync(fd) ~= 0 then return nil, errstr("fsync", path) end
        local ok, err = fsync_path(path:match("^(.*)/[^/]*$"))
        if not ok then return nil, err end
    end
    local info = { path = path, offset = off, bytes = size - off, broken = bpath, reason = why }
    self.repairs = self.repairs + 1
    self.on_repair(info)
    return true
end

-- Walks the records of the file (from a known head when the file only grew), cuts a torn
-- last record, checks the last record in full. Returns the head { seq, raw, size }.
function Ledger:_load(fd, path, size, old)
    local off, count, last_off, last_len = 0, 0, nil, nil
    if old and size > old.size then off, count = old.size, old.seq end
    local start_count = count
    while off < size do
        local rem = size - off
        if rem < 4 then
            local ok, err = self:_cut(fd, path, off, size, "torn record: a partial length")
            if not ok then return nil, err end
            size = off
            break
        end
        local L = get_u32(assert(pread_str(fd, 4, off)), 1)
        if L < 1 or L > MAX_SLICE then
            -- A torn append leaves a prefix of a valid record, or zeros where the file
            -- grew before its data reached the disk; anything else is corruption.
            local tail = rem <= 4 + MAX_SLICE + TRAILER and pread_str(fd, rem, off)
            if tail and tail == rep("\0", rem) then
                local ok, err = self:_cut(fd, path, off, size, "torn record: zero bytes")
                if not ok then return nil, err end
                size = off
                break
            end
            return corrupt(path, off, ("record length %d"):format(L))
        end
        if off + 4 + L + TRAILER > size then
            local ok, err = self:_cut(fd, path, off, size, "torn record: incomplete")
            if not ok then return nil, err end
            size = off
            break
        end
        count, last_off, last_len = count + 1, off, L
        off = off + 4 + L + TRAILER
    end
    if count == start_count then
        if old and count > 0 then return { seq = old.seq, raw = old.raw, size = size } end
        if count == 0 then return { seq = 0, raw = ZERO32, size = size } end
    end
    -- The last record in full: digest, decoder, position in the chain.
    local rec = pread_str(fd, last_len + TRAILER, last_off + 4)
    local bytes, trailer = rec:sub(1, last_len), rec:sub(last_len + 1)
    local seq
    if bytes:sub(1, 4) == loss.MAGIC then
        seq = loss_seq(bytes, trailer)
    else
        seq = b3raw(bytes) == trailer and decoded_seq(bytes)
    end
    if not seq then
        if self._recut then
            return corrupt(path, last_off, "the last record does not verify")
        end
        -- A complete but unreadable last record: an append whose data never fully reached
        -- the disk. Cut it, then the record before it must verify.
        local ok, err = self:_cut(fd, path, last_off, size, "torn record: bad digest or encoding")
        if not ok then return nil, err end
        self._recut = true
        local h, err2 = self:_load(fd, path, last_off, nil)
        self._recut = nil
        return h, err2
    end
    if seq ~= count then
        return corrupt(path, last_off, ("record %d holds seq %d"):format(count, seq))
    end
    return { seq = seq, raw = trailer, size = size }
end

-- The stored b3 (raw) of seq k <= head: record k.
function Ledger:_b3_at(fd, path, k)
    local off = 0
    for _ = 1, k - 1 do
        off = off + 4 + get_u32(assert(pread_str(fd, 4, off)), 1) + TRAILER
    end
    local hdr = pread_str(fd, 4 + 44, off)
    if not hdr or #hdr < 48 or get_u64(hdr, 4 + 37) ~= k then
        return corrupt(path, off, ("record %d does not hold seq %d"):format(k, k))
    end
    return pread_str(fd, TRAILER, off + 4 + get_u32(hdr, 1))
end

---------------------------------------------------------------------------------------
-- the exporter
---------------------------------------------------------------------------------------

-- new{ dir = path, fsync = true, on_repair = function(info) } -> ledger | nil, err
-- on_repair is called with { path, offset, bytes, broken, reason } whenever a torn tail
-- is cut; by default one line on stderr.
function _M.new(opts)
    if type(opts) ~= "table" or type(opts.dir) ~= "string" or opts.dir == "" then
        error("ron.accounting.export.exporters.file.new: expects { dir = path, ... }", 2)
    end
    local dir = opts.dir:gsub("/+$", "")
    if dir == "" then dir = "/" end
    local created, err = mkdir(dir)
    if created == nil then return nil, err end
    -- The marker appears atomically (written to a temporary file, then renamed), so a
    -- process starting at the same time never reads it half written; two writers rename
    -- the same bytes.
    local mpath = dir .. "/" .. MARKER
    local f = io.open(mpath, "rb")
    if not f then
        local tmp = ("%s.%d.%d.tmp"):format(mpath, SYS.getpid(), math.random(1, 2 ^ 30))
        local fd, e = sys_open(tmp, O_WRONLY + O_CREAT + O_EXCL + O_CLOEXEC, 384)
        if not fd then return nil, errstr("open", tmp, e) end
        local ok, werr = write_all(fd, MARKER_TEXT, tmp)
        if ok and SYS.fsync(fd) ~= 0 then ok, werr = nil, errstr("fsync", tmp) end
        SYS.close(fd)
        if ok and not os.rename(tmp, mpath) then ok, werr = nil, errstr("rename", tmp) end
        if not ok then os.remove(tmp) return nil, werr end
        local ok2, ferr = fsync_path(dir)
        if not ok2 then return nil, ferr end
        f = io.open(mpath, "rb")
        if not f then return nil, errstr("open", mpath) end
    end
    local text = f:read("*a")
    f:close()
    if text ~= MARKER_TEXT then
        return nil, "Incompatible: " .. mpath .. " is not a v1 file ledger marker"
    end
    local self = setmetatable({
        dir = dir,
        fsync = opts.fsync ~= false,
        heads = {},   -- "tenant/dimension" -> { seq, raw, size }: the only cache
        repairs = 0,  -- torn tails cut
        on_repair = opts.on_repair or function(i)
            io.stderr:write(("ron.accounting.export.exporters.file: %s: cut a torn tail of %d "
                .. "bytes at offset %d (%s), kept in %s\n"):format(i.path, i.bytes, i.offset,
                i.reason, i.broken))
        end,
    }, Ledger)
    return self
end

function Ledger:path(tenant, dimension)
    return ("%s/%s/%s.ledger"):format(self.dir, tenant, dimension)
end

local function check_open(self, what)
    if getmetatable(self) ~= Ledger then
        error("ron.accounting.export.exporters.file: use ledger:" .. what .. "()", 3)
    end
    if self.closed then error("ron.accounting.export.exporters.file: the ledger is closed", 3) end
end

-- Opens (create: also makes the tenant directory), locks and loads a stream. Returns
-- fd, head, path; or nil (create false and no file); or nil, err.
function Ledger:_open_stream(tenant, dimension, create)
    local tdir = self.dir .. "/" .. tenant
    local path = tdir .. "/" .. dimension .. ".ledger"
    local fd, e = sys_open(path, O_RDWR + O_APPEND + O_CLOEXEC)
    if not fd and e == ENOENT and create then
        local made, err = mkdir(tdir)
        if made == nil then return nil, err end
        if made and self.fsync then
            local ok, ferr = fsync_path(self.dir)
            if not ok then return nil, ferr end
        end
        fd, e = sys_open(path, O_RDWR + O_APPEND + O_CREAT + O_CLOEXEC, 384)
        if fd and self.fsync then
            local ok, ferr = fsync_path(tdir)
            if not ok then SYS.close(fd) return nil, ferr end
        end
    end
    if not fd then
        if e == ENOENT and not create then return nil end
        return nil, errstr("open", path, e)
    end
    while SYS.flock(fd, LOCK_EX) ~= 0 do
        local fe = ffi.errno()
        if fe ~= EINTR then SYS.close(fd) return nil, errstr("flock", path, fe) end
    end
    local size = tonumber(SYS.lseek(fd, 0, SEEK_END))
    if size < 0 then SYS.close(fd) return nil, errstr("lseek", path) end
    local key = tenant .. "/" .. dimension
    local h = self.heads[key]
    if not h or h.size ~= size then
        local err
        h, err = self:_load(fd, path, size, h and h.size < size and h or nil)
        if not h then SYS.close(fd) return nil, err end
        self.heads[key] = h
    end
    return fd, h, path
end

local function release(fd)
    SYS.flock(fd, LOCK_UN)
    SYS.close(fd)
end

-- Appends rec (whole records) to a stream's file, fsync'ed when the ledger fsyncs; its head
-- (key: "tenant/dimension") moves to (seq, raw). On a failure nothing was acknowledged:
-- whatever part of rec landed is taken back and the cached head dropped. -> true | nil, err
function Ledger:_append(fd, path, key, h, rec, seq, raw)
    local ok, err = write_all(fd, rec, path)
    if ok and self.fsync and SYS.fsync(fd) ~= 0 then ok, err = nil, errstr("fsync", path) end
    if not ok then
        SYS.ftruncate(fd, h.size)
        self.heads[key] = nil
        return nil, err
    end
    self.heads[key] = { seq = seq, raw = raw, size = h.size + #rec }
    return true
end

-- put(slice) -> "ok" | "dup" | "conflict" | "gap", detail | nil, err
function Ledger:put(s)
    check_open(self, "put")
    local ptr = slice_mod.ptr(s)
    if not ptr then error("ron.accounting.export.exporters.file: put expects a slice", 2) end
    local seq = s.id.seq
    if type(seq) ~= "number" then return "gap", "seq beyond 2^53" end
    local fd, h, path = self:_open_stream(s.tenant, s.dimension, true)
    if not fd then return nil, h end
    local raw = ffi_string(C.ra_slice_b3(ptr), 32)
    local prev = ffi_string(C.ra_slice_prev_b3(ptr), 32)
    local status, detail = chain.admit(h.seq, h.raw, seq, prev, raw)
    if status == "below" then
        local stored, err = h.raw
        if seq < h.seq then
            stored, err = self:_b3_at(fd, path, seq)
            if not stored then release(fd) return nil, err end
        end
        status, detail = chain.stored(seq, stored, raw)
    elseif status == "ok" then
        local bytes = s:encode()
        local ok, err = self:_append(fd, path, s.tenant .. "/" .. s.dimension, h,
                                     u32le(#bytes) .. bytes .. raw, seq, raw)
        if not ok then
            release(fd)
            return nil, err
        end
    end
    release(fd)
    return status, detail
end

-- accept_loss{ tenant =, dimension =, through_seq = n, link_b3 = hex, reason = text,
--              now_s = UTC seconds } -> { from =, to = } | nil, err
-- The operator gives up the seqs head + 1 .. through_seq of a stream, which its producer no
-- longer has (a WAL segment lost or damaged): one loss record per seq, the last one's
-- trailer link_b3, the prev_b3 of the producer's slice through_seq + 1, so that slice is
-- then accepted (ok) and the chain goes on. Nothing stored is changed; verify lists every
-- accepted range. Refused when through_seq is not beyond the head (nothing is missing).
function Ledger:accept_loss(o)
    check_open(self, "accept_loss")
    local ok, err = loss.check(o)
    if not ok then return nil, err end
    local fd, h, path = self:_open_stream(o.tenant, o.dimension, true)
    if not fd then return nil, h end
    local recs
    recs, err = loss.records(o, h.seq, h.raw)
    if not recs then
        release(fd)
        return nil, err
    end
    local parts = {}
    for i, r in ipairs(recs) do parts[i] = u32le(#r.bytes) .. r.bytes .. r.link end
    local last = recs[#recs]
    ok, err = self:_append(fd, path, o.tenant .. "/" .. o.dimension, h, table.concat(parts),
                           last.seq, last.link)
    release(fd)
    if not ok then return nil, err end
    return { from = recs[1].seq, to = last.seq }
end

-- head(tenant, dimension) -> { seq = n, b3 = hex } | nil (no slice stored) | nil, err
function Ledger:head(tenant, dimension)
    check_open(self, "head")
    local fd, h = self:_open_stream(tenant, dimension, false)
    if not fd then return nil, h end
    release(fd)
    if h.seq == 0 then return nil end
    return { seq = h.seq, b3 = tohex(h.raw) }
end

-- The directory listing of list_heads(): glibc's opendir/readdir (x86-64/arm64 dirent layout).
for _, decl in ipairs {
    "void *opendir(const char *name);",
    "int closedir(void *dirp);",
    "struct ra_file_dirent { uint64_t d_ino; int64_t d_off; unsigned short d_reclen;"
        .. " unsigned char d_type; char d_name[256]; };",
    "struct ra_file_dirent *readdir(void *dirp);",
} do pcall(ffi.cdef, decl) end

local function list_dir(path)
    local d = SYS.opendir(path)
    if d == nil then return nil, errstr("opendir", path) end
    local names = {}
    while true do
        local e = SYS.readdir(d)
        if e == nil then break end
        local name = ffi_string(e.d_name)
        if name ~= "." and name ~= ".." then names[#names + 1] = name end
    end
    SYS.closedir(d)
    table.sort(names)
    return names
end

-- list_heads() -> { { tenant =, dimension =, seq =, b3 = hex }, ... } | nil, err: every stream's
-- head, for a node that lost its own (ron.node seeds its meter with them).
function Ledger:list_heads()
    check_open(self, "list_heads")
    local tenants, err = list_dir(self.dir)
    if not tenants then return nil, err end
    local out = {}
    for _, t in ipairs(tenants) do
        if t:match("^%x+%-%x+%-%x+%-%x+%-%x+$") then
            local files = list_dir(self.dir .. "/" .. t) or {}
            for _, f in ipairs(files) do
                local dim = f:match("^([a-z][a-z0-9_]*)%.ledger$")
                if dim then
                    local h, herr = self:head(t, dim)
                    if herr then return nil, herr end
                    if h then
                        out[#out + 1] = { tenant = t, dimension = dim, seq = h.seq, b3 = h.b3 }
                    end
                end
            end
        end
    end
    return out
end

-- True for a ledger made by new().
function _M.is_ledger(x)
    return getmetatable(x) == Ledger
end

function Ledger:close()
    if getmetatable(self) ~= Ledger then
        error("ron.accounting.export.exporters.file: use ledger:close()", 2)
    end
    self.closed = true
    self.heads = {}
end

return _M
