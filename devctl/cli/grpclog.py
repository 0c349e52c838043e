"""Keep gRPC's own C-core log lines off the terminal.

gRPC's core writes lines such as ``E1201 … add_port.cc:83] Failed to add port``
or ``chttp2_transport.cc`` and ``posix_interface_posix.cc`` notices straight to
stderr, beside devctl's own one-line message about the same failure. With
grpcio 1.85 the one switch that silences them is ``GRPC_VERBOSITY=NONE`` in the
environment before grpc is first imported (it is read once, at import; setting
it later, or absl's log level from Python, has no effect). devctl imports grpc
lazily inside its commands, so the global options callback sets it in time.
A ``GRPC_VERBOSITY`` of the user's own leaves gRPC as it is; ``-v`` does not
bring them back: it shows devctl's own lines (each RPC, each source), never
gRPC's internals (docs/architecture.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

VARIABLE = "GRPC_VERBOSITY"
_set_by_devctl = False


def quiet() -> None:
    """Silence gRPC's core log unless the user chose a verbosity."""
    global _set_by_devctl
    if VARIABLE in os.environ:
        return
    os.environ[VARIABLE] = "NONE"
    _set_by_devctl = True


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a command devctl starts (``sim -- CMD``): without the setting devctl made for itself."""
    out = dict(env)
    if _set_by_devctl:
        out.pop(VARIABLE, None)
    return out
