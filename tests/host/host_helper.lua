-- A module beside a script: `ron-accounting run` puts the script's directory on
-- package.path, so args.lua can require it.
return { answer = 42 }
