-- wal-inspect-check.lua HOST WAL_DIR: checks `wal inspect` (text and --json) against the
-- files of a WAL directory and against the pending slices of a meter reopened on it.
-- Run through `HOST run` by tests/host/wal.sh; prints "wal-inspect-check: ok ..." or fails.
local acct = require("ron.accounting")
local fs = require("ron.base.fs")

local host, dir = assert(arg[1]), assert(arg[2])

local function fail(fmt, ...)
    io.stderr:write("wal-inspect-check: FAILED: ", fmt:format(...), "\n")
    os.exit(1)
end

local function run(cmd)
    local p = assert(io.popen(cmd .. "; echo \"exit=$?\""))
    local lines = {}
    for l in p:lines() do lines[#lines + 1] = l end
    p:close()
    local status = tonumber(table.remove(lines):match("^exit=(%d+)$"))
    return lines, status
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- A JSON decoder for what inspect prints: one flat object per line, values are strings,
-- integers, true/false. Anything else is a failure (the point is that the lines parse).
local function decode(line)
    local pos, obj = 1, {}
    local function ws() pos = line:find("[^ \t]", pos) or #line + 1 end
    local function expect(c)
        ws()
        if line:sub(pos, pos) ~= c then fail("bad JSON at %d in %s", pos, line) end
        pos = pos + 1
    end
    local function str()
        expect('"')
        local out = {}
        while true do
            local c = line:sub(pos, pos)
            if c == "" then fail("unterminated string in %s", line) end
            pos = pos + 1
            if c == '"' then break end
            if c == "\\" then
                local e = line:sub(pos, pos)
                pos = pos + 1
                if e == "u" then
                    out[#out + 1] = string.char(tonumber(line:sub(pos, pos + 3), 16))
                    pos = pos + 4
                else
                    out[#out + 1] = ({ n = "\n", t = "\t", r = "\r", b = "\b", f = "\f" })[e] or e
                end
            else
                out[#out + 1] = c
            end
        end
        return table.concat(out)
    end
    expect("{")
    ws()
    if line:sub(pos, pos) == "}" then return obj end
    while true do
        local k = str()
        expect(":")
        ws()
        local c = line:sub(pos, pos)
        local v
        if c == '"' then
            v = str()
        elseif line:find("^true", pos) then
            v, pos = true, pos + 4
        elseif line:find("^false", pos) then
            v, pos = false, pos + 5
        else
            local num = line:match("^%-?%d+", pos)
            if not num then fail("bad JSON value at %d in %s", pos, line) end
            v, pos = tonumber(num), pos + #num
        end
        obj[k] = v
        ws()
        local sep = line:sub(pos, pos)
        pos = pos + 1
        if sep == "}" then break end
        if sep ~= "," then fail("bad JSON separator at %d in %s", pos - 1, line) end
    end
    ws()
    if pos <= #line then fail("trailing bytes in %s", line) end
    return obj
end

local file_size = fs.file_size

local ISO_MS = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$"
local ISO_S = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$"
local HEX64 = "^" .. ("%x"):rep(64) .. "$"
local UUID = "^%x+%-%x+%-%x+%-%x+%-%x+$"

-- ---- --json ------------------------------------------------------------------------------
local lines, status = run(q(host) .. " wal inspect --json " .. q(dir))
if status ~= 0 then fail("wal inspect --json exited %d", status) end
local heads, segs, frames, summary = {}, {}, {}, nil
local cur_seg
for i, l in ipairs(lines) do
    local o = decode(l)
    if summary then fail("line %d after the summary: %s", i, l) end
    if o.type == "head" then
        if cur_seg then fail("a head after a segment: %s", l) end
        if not (o.tenant:match(UUID) and o.b3:match(HEX64) and o.seq >= 1 and
                o.last_window_start:match(ISO_S)) then
            fail("bad head %s", l)
        end
        heads[#heads + 1] = o
    elseif o.type == "segment" then
        if not o.id:match("^%x+$") or #o.id ~= 16 then fail("bad segment id %s", l) end
        if o.file ~= dir .. "/" .. o.id .. ".seg" then fail("segment file %s", o.file) end
        if file_size(o.file) ~= o.bytes then fail("segment %s: bytes %d", o.file, o.bytes) end
        if not (o.header_ok and o.created:match(ISO_MS) and o.header_frames == o.frames and
                o.problems == 0) then
            fail("bad segment %s", l)
        end
        cur_seg = o
        cur_seg.listed = 0
        segs[#segs + 1] = o
    elseif o.type == "frame" then
        if not cur_seg or o.segment ~= cur_seg.id then fail("frame outside its segment: %s", l) end
        cur_seg.listed = cur_seg.listed + 1
        if o.seq < tonumber(cur_seg.id, 16) then fail("frame seq below its segment id: %s", l) end
        if not (o.tenant:match(UUID) and o.b3:match(HEX64) and o.prev_b3:match(HEX64) and
                o.window_start:match(ISO_S) and o.window_len_s == 60 and o.rows >= 1 and
                o.slice_seq >= 1 and o.state == "pending" and o.window_start_s % 60 == 0) then
            fail("bad frame %s", l)
        end
        frames[#frames + 1] = o
    elseif o.type == "summary" then
        summary = o
    else
        fail("unknown type in %s", l)
    end
end
if not summary then fail("no summary line") end
for _, s in ipairs(segs) do
    if s.listed ~= s.frames then fail("segment %s: %d frames listed, %d announced", s.id, s.listed, s.frames) end
end
if #segs == 0 or #frames == 0 or #heads == 0 then
    fail("expected segments, frames and heads: %d %d %d", #segs, #frames, #heads)
end
if summary.segments ~= #segs or summary.frames ~= #frames or summary.heads ~= #heads or
    summary.problems ~= 0 then
    fail("summary disagrees: %s", lines[#lines])
end
-- every segment file of the directory is listed
local p = io.popen("ls " .. q(dir))
local on_disk = 0
for name in p:lines() do if name:match("^%x+%.seg$") then on_disk = on_disk + 1 end end
p:close()
if on_disk ~= #segs then fail("%d segment files, %d listed", on_disk, #segs) end

-- ---- text --------------------------------------------------------------------------------
local text
text, status = run(q(host) .. " wal inspect " .. q(dir))
if status ~= 0 then fail("wal inspect exited %d", status) end
if #text ~= #lines then fail("text has %d lines, --json %d", #text, #lines) end
local fi = 0
for i, l in ipairs(text) do
    local kind = lines[i]:match('"type":"(%a+)"')
    if kind == "frame" then
        fi = fi + 1
        local f = frames[fi]
        local want = ("  frame seq=%d tenant=%s dimension=%s window=%s slice_seq=%d rows=%d " ..
                      "b3=%s state=pending"):format(f.seq, f.tenant, f.dimension,
            f.window_start, f.slice_seq, f.rows, f.b3:sub(1, 16))
        if l ~= want then fail("text line %d:\n  %s\nwanted\n  %s", i, l, want) end
    elseif kind == "segment" then
        if not l:match("^segment id=%x+ file=%S+ bytes=%d+ frames=%d+ created=%S+$") then
            fail("text segment line %s", l)
        end
    elseif kind == "head" then
        if not l:match("^head tenant=%S+ dimension=%S+ seq=%d+ last_window=%S+ b3=%x+$") then
            fail("text head line %s", l)
        end
    elseif kind == "summary" then
        if not l:match("^summary segments=%d+ bytes=%d+ frames=%d+ heads=%d+ problems=0 ") then
            fail("text summary line %s", l)
        end
    end
end

-- ---- the meter agrees ----------------------------------------------------------------------
local m = assert(acct.open { window_len_s = 60, capacity_rows = 1024, pending_slices_cap = 256,
                             wal = { dir = dir } })
local pending = m:pending()
if #pending ~= #frames then fail("%d pending slices, %d frames listed", #pending, #frames) end
for i, s in ipairs(pending) do
    local f = frames[i]
    if s.tenant ~= f.tenant or s.dimension ~= f.dimension or tonumber(s.id.seq) ~= f.slice_seq or
        s.b3 ~= f.b3 or s.prev_b3 ~= f.prev_b3 or s.id.window_start_s ~= f.window_start_s or
        #s.rows ~= f.rows then
        fail("pending slice %d (%s) differs from frame %d", i, tostring(s), f.seq)
    end
end
m:close()
print(("wal-inspect-check: ok %d heads, %d segments, %d frames"):format(#heads, #segs, #frames))
