"""Model objects to tables, JSON, YAML and event lines; no I/O besides the output stream."""
