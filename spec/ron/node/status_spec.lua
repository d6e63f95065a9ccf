-- ron.node.status: the status page's rendering (the page in a real browser against a real
-- daemon: tests/host/status-page.sh, ctest host-status-page).
local status = require("ron.node.status")
local rtm = require("ron.accounting.runtime.metrics")

local EXPO = table.concat({
    "# HELP accounting_streams_stuck x",
    "# TYPE accounting_streams_stuck gauge",
    "accounting_streams_stuck 2",
    "# TYPE accounting_stream_stuck gauge",
    'accounting_stream_stuck{tenant="t-b",dimension="bytes",reason="gap",seq="7"} 1',
    'accounting_stream_stuck{tenant="t-a",dimension="<req>",reason="conflict",seq="3"} 1',
    "accounting_sealed_slices_total 120",
    'accounting_exports_total{status="ok"} 100',
    'accounting_exports_total{status="dup"} 4',
    'accounting_exports_total{status="gap"} 9',
    "accounting_wal_entries 170000",
    "accounting_wal_max_entries 200000",
    "accounting_wal_size_bytes 1048576",
    "accounting_wal_max_size_bytes 536870912",
    "wallet_breaker_open 1",
    'wallet_queue_depth{queue="commit"} 12',
    "audit_records_total 18446744073709551615",
    "audit_failed 0",
}, "\n") .. "\n"

describe("ron.node.status", function()
    it("parses samples with their labels, values kept as written", function()
        local S = status.parse(EXPO)
        assert.equal("2", S.accounting_streams_stuck[1].value)
        assert.equal(2, #S.accounting_stream_stuck)
        local x = S.accounting_stream_stuck[2]
        assert.same({ tenant = "t-a", dimension = "<req>", reason = "conflict", seq = "3" },
                    x.labels)
        assert.equal('accounting_stream_stuck{tenant="t-a",dimension="<req>",'
                     .. 'reason="conflict",seq="3"}', x.key)
        -- a uint64 past 2^53 is shown as /metrics writes it, not through a Lua number
        assert.equal("18446744073709551615", S.audit_records_total[1].value)
    end)

    it("renders one page: readiness and reasons, stuck streams first, escaped", function()
        local page = status.new({})
        local html = page:render(EXPO, false, { "starting", "wal <failed>" }, 1000)
        assert.truthy(html:find('<p id="ready" class="bad">not ready</p>', 1, true))
        assert.truthy(html:find("<li>wal &lt;failed&gt;</li>", 1, true))
        assert.truthy(html:find('http-equiv="refresh"', 1, true))
        -- no script and no external asset: nothing that loads a URL
        assert.falsy(html:find("<script", 1, true))
        assert.falsy(html:find("src=", 1, true))
        assert.falsy(html:find("href=", 1, true))
        -- the stuck table comes before the capacity section, sorted, escaped
        local stuck = html:find('<table id="stuck">', 1, true)
        local cap = html:find("<h2>Backlog and WAL</h2>", 1, true)
        assert.truthy(stuck and cap and stuck < cap)
        local a = html:find("t-a", 1, true)
        local b = html:find("t-b", 1, true)
        assert.truthy(a < b)
        assert.truthy(html:find("<td>&lt;req&gt;</td>", 1, true))
        -- numbers carry their sample, exactly as written
        assert.truthy(html:find('data-metric="audit_records_total">18446744073709551615<', 1,
                                true))
        assert.truthy(html:find('data-metric="accounting_exports_total{status=&quot;ok&quot;}"'
                                .. ">100<", 1, true))
        -- 170000 of 200000: 85 %, shown as bad
        assert.truthy(html:find('<td class="bad">85.0 %</td>', 1, true))
        assert.truthy(html:find('<td class="bad">open</td>', 1, true))
    end)

    it("rates between two renders; none on the first", function()
        local page = status.new({})
        local h1 = page:render(EXPO, true, nil, 1000)
        assert.truthy(h1:find('<p id="ready" class="ok">ready</p>', 1, true))
        assert.falsy(h1:find("/s</td>", 1, true))
        local later = EXPO:gsub("accounting_sealed_slices_total 120",
                                "accounting_sealed_slices_total 170")
        local h2 = page:render(later, true, nil, 1010)
        assert.truthy(h2:find('<td class="n">5.00/s</td>', 1, true))
    end)

    it("leaves out the wallet and audit sections without their families", function()
        local html = status.new({}):render("accounting_streams_stuck 0\n", true, nil, 1)
        assert.falsy(html:find("<h2>Wallet</h2>", 1, true))
        assert.falsy(html:find("<h2>Audit trail</h2>", 1, true))
        assert.truthy(html:find('<td class="na">&ndash;</td>', 1, true))
    end)

    it("lists each stream's sealed and exported seq, stuck ones first, then the furthest "
       .. "behind", function()
        local expo = EXPO .. table.concat({
            'accounting_stream_seq{tenant="t-c",dimension="bytes",state="sealed"} 9',
            'accounting_stream_seq{tenant="t-c",dimension="bytes",state="exported"} 9',
            'accounting_stream_seq{tenant="t-d",dimension="requests",state="sealed"} 20',
            'accounting_stream_seq{tenant="t-d",dimension="requests",state="exported"} 12',
            'accounting_stream_seq{tenant="t-b",dimension="bytes",state="sealed"} 8',
            'accounting_stream_seq{tenant="t-b",dimension="bytes",state="exported"} 6',
        }, "\n") .. "\n"
        local html = status.new({}):render(expo, true, nil, 1)
        local tab = html:match('<table id="streams">(.-)</table>')
        assert.truthy(tab)
        local b, d, c = tab:find("t-b", 1, true), tab:find("t-d", 1, true), tab:find("t-c", 1, true)
        assert.truthy(b < d and d < c) -- stuck (t-b: gap), then 8 behind, then 0 behind
        assert.truthy(tab:find('<tr class="bad"><td>t-b</td>', 1, true))
        assert.truthy(tab:find("stuck: gap", 1, true))
        assert.truthy(tab:find('data-metric="accounting_stream_seq{tenant=&quot;t-d&quot;,'
                               .. 'dimension=&quot;requests&quot;,state=&quot;sealed&quot;}">20<',
                               1, true))
        assert.truthy(tab:find('<td class="n">8</td><td>exporting</td>', 1, true))
        assert.truthy(tab:find('<td class="n">0</td><td>exported</td>', 1, true))
    end)

    it("the runtime lists at most 100 streams: stuck first, then behind, uint64 seqs exact",
       function()
        local ffi = require("ffi")
        local streams = {}
        for i = 1, 150 do
            streams["k" .. i] = { key = string.format("%03d", i), tenant = "t" .. i, dim = "d",
                                  sealed_seq = 10 + i % 7, exported_seq = 10 }
        end
        streams.k150.stuck = { reason = "gap", seq = 11 }
        streams.k149.sealed_seq = ffi.new("uint64_t", 18446744073709551615ULL)
        streams.k149.exported_seq = nil
        local rows = rtm.stream_rows(streams)
        assert.equal(200, #rows)
        assert.same({ "t150", "d", "sealed" }, { rows[1][1], rows[1][2], rows[1][3] })
        assert.same({ "t149", "d", "sealed" }, { rows[3][1], rows[3][2], rows[3][3] })
        assert.equal(0, rows[4][4]) -- nothing exported yet
        local metrics = require("ron.base.metrics")
        assert.equal("18446744073709551615", metrics.value(rows[3][4]))
        for i = 5, #rows - 2, 2 do -- then the furthest behind first
            assert.truthy(rows[i][4] - rows[i + 1][4] >= rows[i + 2][4] - rows[i + 3][4])
        end
    end)
end)
