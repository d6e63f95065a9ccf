-- host-run-os-exit: os.exit(n) ends the host with status n.
os.exit(tonumber(arg[1]))
