"""``devctl exporter``: this node's devices, holders and findings as Prometheus metrics.

Only typer and the standard library at module level; prometheus-client and the
core are imported when the command runs (``devctl --help`` stays fast).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from devctl.cli.common import ExitCode, fail, options, run, say

if TYPE_CHECKING:
    from devctl.core.recorder import Recorder
    from devctl.model import NodePaths

# Below this an interval would read pod-resources faster than any scraper looks.
MIN_INTERVAL = 0.1


def exporter(
    ctx: typer.Context,
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            metavar="HOST:PORT",
            help="Address of /metrics and /healthz: this host only by default; :9477 is every address.",
        ),
    ] = "127.0.0.1:9477",
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            metavar="SECONDS",
            min=MIN_INTERVAL,
            max=86400.0,
            help="Read pod-resources, the checkpoint and sysfs at most this often.",
        ),
    ] = 15.0,
    journal: Annotated[
        str | None,
        typer.Option(
            "--journal", metavar="PATH", help="Also record the node's events to this journal (devctl record)."
        ),
    ] = None,
    kmsg: Annotated[
        str | None, typer.Option("--kmsg", metavar="PATH", help="The kernel log to record [default: <root>/dev/kmsg].")
    ] = None,
) -> None:
    """Serve Prometheus metrics of this node's devices, holders and findings at /metrics (and /healthz).

    Device health comes from live ListAndWatch streams; pod-resources, the
    checkpoint and sysfs are read once per --interval, and every scrape is
    answered from that state. Read-only. SIGTERM or Ctrl-C ends it.
    """
    from devctl.exporter.server import HttpEnded, ListenError, parse_listen, serve

    opts = options(ctx)
    if opts.from_file:
        fail("--from: the exporter follows the live node; a snapshot file has no streams")
    if interval != interval:  # NaN passes min and max
        fail("--interval: not a number of seconds")
    try:
        address = parse_listen(listen)
    except ListenError as e:
        fail(str(e))

    paths = opts.paths()
    recorder = _recorder(paths, journal) if journal else None
    kernel_log = None
    if recorder is not None:
        from devctl.core.history import default_kmsg

        kernel_log = default_kmsg(paths, kmsg)

    def listening(host: str, port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        print(f"devctl: serving http://{shown}:{port}/metrics", file=sys.stderr, flush=True)

    try:
        run(serve(paths, address, interval, opts.timeout, on_listening=listening, recorder=recorder, kmsg=kernel_log))
    except OSError as e:
        fail(f"--listen {listen}: {e.strerror or e}", ExitCode.USAGE)
    except HttpEnded as e:
        fail(str(e), ExitCode.FINDINGS)
    except KeyboardInterrupt:
        pass  # Ctrl-C before the exporter set its own handler
    raise typer.Exit(int(ExitCode.OK))


def _recorder(paths: NodePaths, journal: str) -> Recorder:
    """The journal open and locked before serving: a second recorder or a file that is not a journal is refused."""
    import os

    from devctl.core.history import JournalError, open_journal
    from devctl.core.recorder import Recorder

    try:
        os.makedirs(os.path.dirname(journal) or ".", exist_ok=True)
        return Recorder(open_journal(journal), on_notice=say)
    except OSError as e:
        fail(f"journal {journal}: {e.strerror or e}", ExitCode.FINDINGS)
    except JournalError as e:
        fail(str(e), ExitCode.FINDINGS)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("exporter")(exporter)
