"""Every file ttftsim reads goes through here: bounded in size, regular files only, UTF-8, YAML and JSON with
bounded aliases, nesting and numbers, duplicate keys refused, and every failure one `InputError` naming the
file (docs/inputs.md lists the limits and how to raise them)."""
