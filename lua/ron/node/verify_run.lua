-- The script `ron-accounting verify DIR` runs on a daemon's state directory
-- (host/cli/chainverify.c): the arguments after the verb are this chunk's `...`;
-- ron.node.verify walks the chain and gives the exit code.
os.exit(require("ron.node.verify").main({ ... }))
