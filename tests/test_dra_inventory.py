"""`ls`'s DRA driver rows, counted from the files, against the same rows made from the claims view (`devices`' way).

``dra_inventory(devices=False)`` (`ls`) counts a driver's devices by state
straight from dra_manager_state's claims and pod-resources; with
``devices=True`` the rows come from ``claims_view``, as they always did. Both
must give the same ``ls`` rows, on the default simulated node and on each
case planted in its real files: a claim of a driver that is not running, a
stale claim (its pod gone, known by name or by UID alone, or not known at
all), a claim with no pod, a claim whose pod runs without using it, a failed
prepare (null devices), one device held by two claims, and sources unread
(pod-resources, the checkpoint, the plugin sockets) or still pending.
"""

from __future__ import annotations

import json
import uuid
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import add_dra_claims

from devctl.analyze import CDI, CHECKPOINT, DRA_CHECKPOINT, IDENTITIES, PLUGINS, POD_RESOURCES
from devctl.analyze.dra_inventory import dra_inventory
from devctl.core.collect import collect
from devctl.model import NodeSnapshot

DRIVER = "gpu.example.com"
LS = {POD_RESOURCES, PLUGINS, CHECKPOINT, DRA_CHECKPOINT, IDENTITIES}
TIMEOUT = 5.0


def _no_claims(path: Path) -> None:
    """dra_manager_state with a null claim list, as a kubelet that has just started writes it."""
    data = json.dumps(
        {"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "ClaimInfoStateList": None}
    )
    path.write_text(json.dumps({"Data": data, "Checksum": zlib.crc32(data.encode())}))


def _claim(
    name: str, pods: list[str], driver: str = DRIVER, devices: list[str] | None = None, cdi: str = "", ns: str = "ml"
) -> dict:
    listed = (
        None
        if devices is None
        else [
            {"PoolName": "sim-node", "DeviceName": d, "RequestNames": ["r"], "CDIDeviceIDs": [cdi] if cdi else None}
            for d in devices
        ]
    )
    return {
        "ClaimUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        "ClaimName": name,
        "Namespace": ns,
        "PodUIDs": {p: {} for p in pods},
        "DriverState": {driver: {"Devices": listed}},
    }


def _same_rows(snap: NodeSnapshot) -> list:
    """`ls`'s DRA rows, after checking they equal the rows made through the claims view."""
    counted = dra_inventory(snap, devices=False)[0]
    assert counted == dra_inventory(snap, devices=True)[0]
    return counted


def _variants(snap: NodeSnapshot) -> list:
    """The rows of ``snap`` and of it with a source still pending (no driver is then known to be missing)."""
    rows = _same_rows(snap)
    _same_rows(replace(snap, pending=(PLUGINS,)))
    return rows


async def test_ls_rows_counted_from_the_files_are_the_claims_view_s(sim_node) -> None:
    paths = sim_node.paths
    # GIVEN the default node, read as `ls` reads it and as `ls -o wide` does (CDI specs: NUMA nodes)
    plain = _variants(await collect(paths, TIMEOUT, want=LS))
    wide = _variants(await collect(paths, TIMEOUT, want=LS | {CDI}))
    (row,) = [r for r in plain if r.name == DRIVER]
    assert (row.capacity, row.allocated, row.free, row.unhealthy, row.numa_nodes) == (4, 3, 1, 1, ())
    assert [r.numa_nodes for r in wide if r.name == DRIVER] == [(0, 1)]

    # AND planted claims: each case the claims view tells apart
    full = await collect(paths, TIMEOUT, want=LS | {CDI})
    embed = next(c for c in full.dra_checkpoint.claims if c.name == "embed-gpu")
    running_uid = embed.pod_uids[0]
    gone_named, gone_uid_only, unknown = (str(uuid.uuid4()) for _ in range(3))
    (Path(paths.pod_logs) / f"ml_old-pod_{gone_named}").mkdir(parents=True)
    (Path(paths.kubelet_dir) / "pods" / gone_uid_only).mkdir(parents=True)
    cdi_name = embed.devices[0].cdi_devices[0]
    add_dra_claims(
        Path(paths.dra_checkpoint),
        [
            _claim("held-by-dead", [unknown], driver="dead.example.com", devices=["d0"]),
            _claim("gone-named", [gone_named], devices=["gpu-1"]),
            _claim("gone-uid-only", [gone_uid_only], devices=["gpu-1"]),
            _claim("gone-unknown", [unknown], devices=["gpu-5"]),
            _claim("no-pod", [], devices=["gpu-6"]),
            _claim("waiting", [running_uid], devices=["gpu-7"]),
            _claim("failed-prepare", [running_uid]),
            _claim("twice", [running_uid, gone_named], devices=["gpu-0"], cdi=cdi_name),
            # Before embed-gpu by name, after it in the file: gpu-0's NUMA node is embed-gpu's (the last by name)
            _claim("aa-twice", [running_uid], devices=["gpu-0"], cdi="vendor.example/none=x", ns="inference"),
        ],
    )
    for want in (LS, LS | {CDI}):
        planted = _variants(await collect(paths, TIMEOUT, want=want))
        by_name = {r.name: r for r in planted}
        assert by_name["dead.example.com"].status == "driver-missing"
        assert by_name[DRIVER].numa_nodes == ((0, 1) if CDI in want else ())
        # WHEN sources are unread: pod-resources (holders unknown), the checkpoint (claims from pod-resources
        # alone), the plugin sockets (every driver missing)
        for unread in (POD_RESOURCES, DRA_CHECKPOINT, PLUGINS, IDENTITIES):
            _variants(await collect(paths, TIMEOUT, want=want - {unread}))
    # THEN the stale claims do not hold gpu-1 (still free), and only the prepared claims count as allocated
    drv = by_name[DRIVER]
    assert (drv.capacity, drv.allocated, drv.free, drv.unhealthy) == (4, 3, 1, 1)


@pytest.mark.parametrize("pods_unread", [False, True])
async def test_a_node_with_no_claim_has_driver_rows_alike(sim_node, pods_unread: bool) -> None:
    # GIVEN the default node whose checkpoint lost its claims (a kubelet that has just started)
    _no_claims(Path(sim_node.paths.dra_checkpoint))
    want = LS - {POD_RESOURCES} if pods_unread else LS
    # THEN both ways give the same rows (the claims pod-resources reports, when read, stand alone)
    rows = _variants(await collect(sim_node.paths, TIMEOUT, want=want))
    assert [r.name for r in rows] == [DRIVER]
