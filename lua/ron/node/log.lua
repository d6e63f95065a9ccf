-- ron.node.log: the daemon's log line on stderr, "ron-accounting: LEVEL ...".
local format = string.format

return function(level, fmt, ...)
    io.stderr:write(format("ron-accounting: %s %s\n", level, format(fmt, ...)))
end
