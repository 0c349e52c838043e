"""devctl: a node-local Kubernetes device inspector."""

__version__ = "0.1.0"


def quiet_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C while the ``devctl`` command is still importing: a quiet exit 130, not a traceback from an import."""
    raise SystemExit(130)


def _guard_start_up() -> None:
    # Only for the devctl command itself (its script, or python -m devctl), never for a program that imports
    # devctl; devctl.cli.app.main gives Ctrl-C back to Python once the imports are done.
    import os
    import sys

    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "devctl" or argv0.endswith(os.path.join("devctl", "__main__.py")):
        import signal  # only then: a program that imports devctl (the CDI helper process) does not pay for it

        signal.signal(signal.SIGINT, quiet_interrupt)


_guard_start_up()
