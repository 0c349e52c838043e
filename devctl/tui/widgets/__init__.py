"""The views of the TUI; each formats a NodeView and holds no data of its own."""
