"""`fleet ls` and `fleet devices` read as `ls` and `devices` do: the same header words, and 80 columns."""

from __future__ import annotations

from devctl.fleet.tables import devices_table, resources_table
from devctl.fleet.views import FleetDeviceRow, FleetHolder, FleetResourceRow
from devctl.render.table import TableStyle

STYLE = TableStyle(headers=True, wide=False, color=False)


def test_fleet_ls_says_cap_alloc_used_free_bad_as_ls_and_fits_80_columns() -> None:
    rows = [
        FleetResourceRow(
            "gpu-node-a.cluster.example.com", "hardware-vendor.example/foo", "device-plugin", 2, 2, 1, 1, 0
        ),
        FleetResourceRow("gpu-node-b.cluster.example.com", "intel.com/sriov_netdevice", "device-plugin", 8, 8, 2, 6, 0),
    ]
    lines = resources_table(rows, STYLE).splitlines()
    assert lines[0].split() == ["NODE", "RESOURCE", "CAP", "ALLOC", "USED", "FREE", "BAD"]
    assert max(len(line) for line in lines) <= 80, lines
    wide = resources_table(rows, TableStyle(headers=True, wide=True, color=False))
    assert "gpu-node-a.cluster.example.com" in wide and "hardware-vendor.example/foo" in wide


def test_fleet_devices_fits_80_columns_and_never_cuts_health() -> None:
    holder = FleetHolder("inference", "embedding-server-7f9c4d8b6-x2x9k", "server")
    rows = [
        FleetDeviceRow("gpu-node-a.cluster.example.com", "nvidia.com/gpu", "device-plugin",
                       "GPU-8d3f1a2b-4c5d-6e7f-8091-a2b3c4d5e6f7", "Unhealthy", "1", "allocated", (holder,)),
    ]  # fmt: skip
    lines = devices_table(rows, STYLE).splitlines()
    assert max(len(line) for line in lines) <= 80, lines
    assert "Unhealthy" in lines[1] and "allocated" in lines[1]
