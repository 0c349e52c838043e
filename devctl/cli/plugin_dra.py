"""`devctl plugin serve --dra DRIVER`: the in-process DRA driver, kept apart from the device plugin's flags.

Imported by ``devctl.cli.plugin`` only when ``--dra`` is given; gRPC and YAML
are imported inside, so ``devctl --help`` stays fast.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer

from devctl.cli.common import GlobalOptions, fail

if TYPE_CHECKING:
    from devctl.cli.signals import Stopper
    from devctl.lab.plugin.dra import DraSpec

MAX_COUNT = 4096  # devices of one driver from --count: a debugging driver, not a load generator


def build_dra_spec(driver: str, count: int | None, devices: Sequence[str], pool: str | None, health: bool) -> DraSpec:
    """The DraSpec of the flags; ValueError (one line) for a bad combination."""
    from devctl.lab.plugin.dra import DraDevice, DraSpec
    from devctl.lab.plugin.spec import PluginSpecError, parse_device

    if not driver or "/" in driver:
        raise ValueError(f"--dra {driver!r}: a DRA driver name is a DNS name such as gpu.example.com")
    if count is not None and devices:
        raise ValueError("give either --count or --device, not both")
    if count is None and not devices:
        raise ValueError("give --count N or --device NAME[@NUMA]")
    if count is not None and count > MAX_COUNT:
        raise ValueError(f"--count {count}: at most {MAX_COUNT} devices")
    if count is not None:
        base = driver.split(".", 1)[0]
        parsed = tuple(DraDevice(name=f"{base}-{i}") for i in range(count))
    else:
        try:
            plain = [parse_device(d) for d in devices]
        except PluginSpecError as e:
            raise ValueError(str(e)) from None
        parsed = tuple(DraDevice(name=d.id, numa_nodes=d.numa_nodes) for d in plain)
        if len({d.name for d in parsed}) != len(parsed):
            raise ValueError("device names must be unique")
        if any("/" in d.name for d in parsed):
            raise ValueError("a device name has no '/' (the pool is --pool)")
    return DraSpec(driver=driver, pool=pool or socket.gethostname(), devices=parsed, health=health)


def load_claims(path: str) -> dict[str, tuple[str, ...]]:
    """``--claims FILE``: a YAML or JSON mapping of claim UID to its device names (``DEVICE`` or ``POOL/DEVICE``)."""

    from devctl.core.userfiles import UserFileError, load_yaml

    try:
        data = load_yaml(path)
    except UserFileError as e:
        detail = f"{e}" if e.problem is None else f"{path}: not valid YAML or JSON: {e.problem}"
        raise ValueError(f"--claims {detail}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--claims {path}: expected a mapping of claim UID to a list of device names")
    out = {}
    for uid, names in data.items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"--claims {path}: claim {uid}: expected a list of device names")
        out[str(uid)] = tuple(names)
    return out


def serve_dra(
    opts: GlobalOptions,
    driver: str,
    count: int | None,
    devices: Sequence[str],
    pool: str | None,
    health: bool,
    claims: str | None,
    register: bool,
) -> None:
    try:
        spec = build_dra_spec(driver, count, devices, pool, health)
        allocations = load_claims(claims) if claims else {}
    except ValueError as e:
        fail(str(e))
    logging.getLogger("devctl.lab.plugin").setLevel(logging.DEBUG if opts.verbose else logging.INFO)
    from devctl.cli.signals import run_until_signal

    code = run_until_signal(lambda stopper: _serve(spec, opts, allocations, register, stopper))
    raise typer.Exit(code)


async def _serve(
    spec: DraSpec, opts: GlobalOptions, allocations: dict[str, tuple[str, ...]], register: bool, stopper: Stopper
) -> int:
    """Serve until a stop signal (SIGINT, SIGTERM, SIGHUP: as the device plugin does), then remove our sockets."""
    from devctl.lab.plugin.control import default_control_dir
    from devctl.lab.plugin.dra import DraDriver, recorded_allocation
    from devctl.lab.plugin.server import ServeError

    paths = opts.paths()
    recorded = recorded_allocation(paths.root, spec.driver)

    def allocation(namespace: str, name: str, uid: str) -> Any:
        # --claims FILE first; else what a simulated node recorded (nothing on a real node)
        return allocations.get(uid) if uid in allocations else recorded(namespace, name, uid)

    driver = DraDriver(
        spec,
        paths.kubelet_dir,
        root=paths.root,
        allocation=allocation,
        register=register,
        control_dir=default_control_dir(paths.root),
    )
    try:
        try:
            await driver.start()
        except (ServeError, OSError) as e:
            fail(str(e))
        print(
            f"devctl: serving DRA driver {spec.driver} ({len(spec.devices)} devices in pool {spec.pool}) on "
            f"{driver.socket_path}, registration {driver.registration_path}; stop with Ctrl-C. "
            f"Try: devctl plugin set-health {spec.driver} "
            f"{spec.pool}/{spec.devices[0].name if spec.devices else 'DEVICE'} unhealthy",
            file=sys.stderr,
            flush=True,
        )
        await asyncio.Event().wait()  # until a stop signal cancels this task
    except asyncio.CancelledError:
        if stopper.received is None:
            raise
        return 0  # a stop signal is how a driver ends
    finally:
        stopper.stopping()
        await driver.stop()
    return 0
