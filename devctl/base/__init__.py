"""The lowest room: escaping, units and name matching, the standard library only, importable by every room
without loading devctl.model (a completion or `devctl --help` answers before the model is imported)."""
