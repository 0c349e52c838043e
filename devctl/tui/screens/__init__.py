"""The screens of the TUI: the node in tabs, one container in detail, the keys."""
