-- ron.base.metrics: families declared once, rendered once (Prometheus text 0.0.4).
local metrics = require("ron.base.metrics")

local function text(f, ...)
    return metrics.text(f[select("#", ...) > 1 and "render_map" or "render"](f, {}, ...))
end

describe("ron.base.metrics", function()
    local n = 0
    local function name(base)
        n = n + 1
        return ("spec_%s_%d"):format(base, n)
    end

    it("renders a family without labels: HELP, TYPE, one sample, integers exactly", function()
        local nm = name("total")
        local f = metrics.family { name = nm, type = "counter", help = "Things." }
        -- (a uint64 cdata beyond 2^53: exactly, never through a double)
        assert.equal(("# HELP %s Things.\n# TYPE %s counter\n%s 9007199254740993\n")
                     :format(nm, nm, nm), text(f, 9007199254740993ULL))
        assert.equal(("# HELP %s Things.\n# TYPE %s counter\n%s 12\n"):format(nm, nm, nm),
                     text(f, 12))
    end)

    it("renders labelled rows in order, escapes label values, leaves a nil label out", function()
        local nm = name("rows")
        local f = metrics.family { name = nm, type = "gauge", help = "Rows.",
                                   labels = { "a", "b" } }
        local out = f:render({}, { { "x", "y", 1 }, { 'q"\\\n', nil, 2 } })
        assert.same({ "# HELP " .. nm .. " Rows.", "# TYPE " .. nm .. " gauge",
                      nm .. '{a="x",b="y"} 1', nm .. '{a="q\\"\\\\\\n"} 2' }, out)
    end)

    it("renders a one-label map sorted, or in the order given (missing keys 0)", function()
        local nm = name("map")
        local f = metrics.family { name = nm, type = "counter", help = "M.", labels = { "k" } }
        local out = f:render_map({}, { b = 2, a = 1 })
        assert.same({ nm .. '{k="a"} 1', nm .. '{k="b"} 2' }, { out[3], out[4] })
        out = f:render_map({}, { b = 2 }, { "b", "a" })
        assert.same({ nm .. '{k="b"} 2', nm .. '{k="a"} 0' }, { out[3], out[4] })
    end)

    it("renders a histogram: cumulative buckets, +Inf, sum, count", function()
        local nm = name("ms")
        local f = metrics.family { name = nm, type = "histogram", help = "H." }
        local out = f:render_histogram({}, { 10, 100 }, { 1, 3, 4 }, 250, 4)
        assert.same({ "# HELP " .. nm .. " H.", "# TYPE " .. nm .. " histogram",
                      nm .. '_bucket{le="10"} 1', nm .. '_bucket{le="100"} 3',
                      nm .. '_bucket{le="+Inf"} 4', nm .. "_sum 250", nm .. "_count 4" }, out)
    end)

    it("declares a family once: the same declaration again is the same family, another one "
       .. "under a taken name an error", function()
        local nm = name("once")
        local f = metrics.family { name = nm, type = "counter", help = "Once." }
        assert.equal(f, metrics.family { name = nm, type = "counter", help = "Once." })
        assert.has_error(function()
            metrics.family { name = nm, type = "gauge", help = "Once." }
        end)
        local listed = false
        for _, g in ipairs(metrics.families()) do listed = listed or g == f end
        assert.is_true(listed)
    end)

    it("a rename is one line: also renders the old name alongside, each family whole",
       function()
        local new, old = name("new"), name("old")
        local f = metrics.family { name = new, also = { old }, type = "gauge", help = "R." }
        assert.equal(("# HELP %s R.\n# TYPE %s gauge\n%s 3\n# HELP %s R.\n# TYPE %s gauge\n%s 3\n")
                     :format(new, new, new, old, old, old), text(f, 3))
        assert.has_error(function() metrics.family { name = old, type = "gauge", help = "R." } end)
    end)

    it("refuses a bad declaration", function()
        assert.has_error(function() metrics.family { name = "Bad-Name", type = "counter", help = "x" } end)
        assert.has_error(function() metrics.family { name = name("t"), type = "summary", help = "x" } end)
        assert.has_error(function() metrics.family { name = name("h"), type = "gauge", help = "a\nb" } end)
        assert.has_error(function()
            metrics.family { name = name("l"), type = "gauge", help = "x", labels = { "a-b" } }
        end)
    end)

    it("declares a package's families from rows: \"type name{labels}\", help, constants as "
       .. "they are, the declaring file recorded", function()
        local a, b = name("rows_a"), name("rows_b")
        local FAM = metrics.declare {
            LIMIT = 7,
            a = { "counter " .. a .. "{x,y}", "A rows." },
            b = { "histogram " .. b, "B.", { b .. "_old" } },
        }
        assert.equal(7, FAM.LIMIT)
        assert.same({ a, "counter", "A rows.", { "x", "y" } },
                    { FAM.a.name, FAM.a.type, FAM.a.help, FAM.a.labels })
        assert.same({ b, b .. "_old" }, FAM.b.names)
        assert.same({}, FAM.b.labels)
        assert.matches("metrics_spec.lua$", FAM.a.where)
        assert.has_error(function() metrics.declare { c = { "counter", "C." } } end)
        assert.has_error(function() metrics.declare { c = { "gauge " .. name("c") .. "{a-b}", "C." } } end)
        assert.has_error(function() metrics.declare { c = { "summary " .. name("c"), "C." } } end)
        -- a tail call would hide the declaring file: refused, not recorded as "=[C]"
        local chunk = assert(loadstring('return require("ron.base.metrics").declare { '
                                        .. 'c = { "gauge ' .. name("c") .. '", "C." } }'))
        package.preload.spec_tail_families = chunk
        local ok, err = pcall(require, "spec_tail_families")
        assert.is_false(ok)
        assert.matches("tail call", err)
    end)

    it("merges expositions: each family once, contiguous, the first sample of a series wins",
       function()
        local a = "# HELP x X.\n# TYPE x counter\nx{r=\"a\"} 1\n# HELP y Y.\n# TYPE y gauge\ny 2\n"
        local b = "# HELP x X2.\n# TYPE x counter\nx{r=\"b\"} 3\nx{r=\"a\"} 9\n"
        assert.equal("# HELP x X.\n# TYPE x counter\nx{r=\"a\"} 1\nx{r=\"b\"} 3\n"
                     .. "# HELP y Y.\n# TYPE y gauge\ny 2\n", metrics.merge({ a, b }))
    end)
end)
