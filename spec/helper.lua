-- Loaded once by busted (.busted: helper) before any spec file and outside the insulation
-- busted gives each file, so luv stays loaded for the whole run. luv (the Debian package,
-- 1.44) keeps its default loop in the first luv module table it returns; busted drops the
-- package.loaded entries a file added once the file is done, and when that table is then
-- collected the loop is freed under luv: the next file that makes a handle crashes
-- (uv_idle_init, SIGSEGV, rc 139), after whichever GC cycle collected it. Inside the host
-- (spec/run-busted.lua) luv is bound to the host's loop and this changes nothing.
require("luv")
