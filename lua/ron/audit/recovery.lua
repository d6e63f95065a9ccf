-- ron.audit.recovery: a failed trail says why, and recovers by itself (AUD-I-42; docs/AUDIT.md
-- "When the trail fails"). Functions of a chain of ron.audit.host (its sink worker runs them).
--
-- A failed append or sync fails the log (AUD-I-14: a failed fdatasync is never retried in
-- the same handle). The host then:
--  - logs ONE line at ERROR with the system's reason and the file (rau_log_failure: "write
--    .../seg-...rau: No space left on device (ENOSPC)") and the file system the trail is on
--    (its mount point, type, free and total bytes), and counts it in
--    audit_io_errors_total{errno};
--  - sheds every event from then on as audit_failed (counted in audit_drop_total, folded into
--    ONE Gap record with the exact count and time range), the queue too; the chunk whose
--    append failed is kept (its bytes are in memory);
--  - tries again with a backoff from recover_min_ms doubling to recover_max_ms (bounded: at
--    most one attempt per recover_max_ms once backed off, each one open of the log): the
--    failed handle is closed and the log opened again on the threadpool (its recovery cuts a
--    torn tail and rewrites and syncs what was not known durable), then the kept chunk is
--    appended and synced: what already reached the disk folds into its first records
--    (AUD-I-6), the rest is appended. A failure of either is the next attempt's. Once both
--    are through, the trail takes events again and the sink worker appends the Gap record.
-- recover_max_ms = 0: no recovery (the trail stays failed until the daemon restarts).
local audit = require("ron.audit")
local task = require("ron.base.task")
local bit = require("bit")
local uv = require("luv")

local format, min, floor, tostring = string.format, math.min, math.floor, tostring

local _M = {}

-- The file system a directory is on: { mount, type, free, size } (bytes), or nil.
function _M.fs_info(dir)
    local real = uv.fs_realpath(dir) or dir
    local st = uv.fs_stat(real)
    if not st then return nil end
    local mount = real
    while mount ~= "/" and mount ~= "" do
        local parent = mount:match("^(.*)/[^/]*$")
        if parent == "" then parent = "/" end
        local ps = parent and uv.fs_stat(parent)
        if not ps or ps.dev ~= st.dev then break end
        mount = parent
    end
    local info = { mount = mount }
    local sf = uv.fs_statfs(real)
    if sf then info.free, info.size = sf.bavail * sf.bsize, sf.blocks * sf.bsize end
    local f = io.open("/proc/self/mounts", "r")
    for line in (f and f:lines() or function() end) do
        local mp, ty = line:match("^%S+ (%S+) (%S+)")
        if mp == mount then info.type = ty end
    end
    if f then f:close() end
    return info
end

local function bytes(n)
    if not n then return "?" end
    if n >= 1073741824 then return format("%.1f GiB", n / 1073741824) end
    if n >= 1048576 then return format("%.1f MiB", n / 1048576) end
    return format("%d KiB", floor(n / 1024))
end

-- "the file system mounted at M (type, F free of S)" of the chain's directory.
function _M.fs_text(dir)
    local fs = dir and _M.fs_info(dir)
    if not fs then return "file system unknown" end
    return format("file system mounted at %s (%s, %s free of %s)", fs.mount, fs.type or "?",
                  bytes(fs.free), bytes(fs.size))
end

-- The events of a chunk that will not be appended: shed as audit_failed.
local function shed_chunk(h, c)
    for i = 1, c.n - (c.gaps or 0) do
        h.lg:shed("audit_failed", c.ts[i] or h.now_ms(), c.what[i])
    end
end

-- The chain h's log failed with err (the host's text); c: the chunk whose append failed,
-- kept to be appended again when reusable (the pool answered: it reads its bytes no more),
-- else its events are shed. Sheds the queue and logs (ERROR the first time).
function _M.failed(h, err, c, reusable)
    local lg = h.lg
    local errno, why = lg:failure()
    local name = why:match("%((E[%u%d]+)%)$") or (errno ~= 0 and tostring(errno)) or "none"
    h.io_errors[name] = (h.io_errors[name] or 0) + 1
    local first = not h.failed
    if first then h.shed_at_fail = lg.drops.audit_failed or 0 end
    if c and reusable then
        h.retry_chunk = c
    elseif c then
        shed_chunk(h, c)
    end
    lg:shed_queued("audit_failed")
    -- the system's reason and the file rather than the code's generic message
    err = tostring(err)
    h.failed = why ~= "" and ((err:match("^(%a+):") or "IoError") .. ": " .. why) or err
    if first then
        h.failed_at = h.now_ms()
        h.attempts, h.wait_ms = 0, h.recover_min_ms
        h.log(format("the audit trail %s failed: %s; %s: every event is shed and counted " ..
                     "(audit_drop_total{reason=\"audit_failed\"}, then ONE gap record) until " ..
                     "it recovers; %s", h.dir or "(amnesia)", h.failed, _M.fs_text(h.dir),
                     h.recover_max_ms > 0 and format("retrying in %d ms", h.wait_ms)
                     or "no recovery (audit.recover_max_ms = 0)"), "ERROR")
    end
end

-- One attempt: the failed handle closed and the log opened again in the pool, then the kept
-- chunk appended and synced. -> true | nil, err
local function attempt(h)
    local lg = h.lg
    local old = lg:detach()
    local ptr, err = h.reopen(old, audit.open_spec(lg.cfg))
    if not ptr then return nil, err end
    lg:attach(ptr)
    local c = h.retry_chunk
    h.retry_chunk = nil
    if c and not h:commit(c) then return nil, h.failed end
    return true
end

-- The recovery loop of a failed chain (its sink worker's): -> true when it recovered, false
-- when the trail closes first (or recovery is off).
function _M.run(h)
    if h.recover_max_ms <= 0 then
        task.select({ h.stop })
        return false
    end
    while not h.closing do
        local _, serr = task.select({ h.stop }, h.wait_ms)
        if h.closing or serr == "Canceled" or serr == "Closed" then return false end
        h.attempts = h.attempts + 1
        local ok, err = attempt(h)
        if ok then
            h.log(format("the audit trail %s recovered after %d attempt(s) in %d ms: %d " ..
                         "event(s) were shed meanwhile (a gap record follows)",
                         h.dir or "(amnesia)", h.attempts, h.now_ms() - h.failed_at,
                         (h.lg.drops.audit_failed or 0) - h.shed_at_fail), "WARN")
            h.failed, h.recoveries = nil, h.recoveries + 1
            return true
        end
        -- quiet: attempts 1, 2, 4, 8, ... are logged
        if bit.band(h.attempts, h.attempts - 1) == 0 then
            h.log(format("the audit trail is still failing (attempt %d: %s); next in %d ms",
                         h.attempts, tostring(err or h.failed), min(h.wait_ms * 2,
                                                                    h.recover_max_ms)),
                  "WARN")
        end
        h.wait_ms = min(h.wait_ms * 2, h.recover_max_ms)
    end
    return false
end

-- What was kept for the recovery and never appended (the trail closes failed): shed.
function _M.abandon(h)
    local c = h.retry_chunk
    h.retry_chunk = nil
    if c then shed_chunk(h, c) end
end

return _M
