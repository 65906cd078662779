"""Terminal rendering (rich) of what each command prints: a module per command, sharing cells.py."""
