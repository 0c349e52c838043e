"""The speed wing: accelerators behind the interfaces they speed up (README.md names each one's bench)."""
