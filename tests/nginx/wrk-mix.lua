-- wrk script of the real-nginx tests and benchmarks: requests over three tenants (one of
-- them also spelled in capitals), seven subjects and a few paths (a small response,
-- static files of 1 kB, 10 kB and 100 kB, a 404). Each wrk thread cycles on its own.
local tenants = { "6f1c3c1e-2b7a-4d5e-9a43-0c8e5b1f7a21", "b2d4e6f8-1a3c-4e5f-8b7d-9c0e2f4a6b8d",
                  "3e9a1b5c-7d2f-4a6e-b1c8-5f0d3e7a9b24", "6F1C3C1E-2B7A-4D5E-9A43-0C8E5B1F7A21" }
local paths = { "/hello", "/f1k.bin", "/hello", "/f10k.bin", "/no-such-file", "/f100k.bin" }
local reqs = {}
local n = 0

function init(args)
    -- Preformatted requests: wrk's cost per request stays low and constant.
    local k = 0
    for i = 1, 84 do
        local t = tenants[i % #tenants + 1]
        local p = paths[math.floor(i / 4) % #paths + 1]
        k = k + 1
        reqs[k] = wrk.format("GET", p, { ["X-Tenant-Id"] = t,
                                         ["X-Subject-Id"] = "user-" .. (i % 7) })
    end
end

function request()
    n = n % #reqs + 1
    return reqs[n]
end
