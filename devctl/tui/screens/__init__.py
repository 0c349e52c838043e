"""The screens of the TUI: the node in six views, one container in detail, the keys."""
