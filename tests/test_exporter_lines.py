"""The exporter's hand-written ``devctl_device_health`` lines against prometheus-client's own exposition.

The health family is the one as large as the node, so the exporter writes it
itself and keeps each resource's lines between builds (``HealthLines``). These
checks hold it to what prometheus-client writes for the same samples, byte for
byte, label values with quotes, backslashes, newlines and control characters
among them, and to what its parser reads back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from devctl.analyze import DeviceRow, Holder
from devctl.core.watch import numa_text
from devctl.exporter.metrics import HEALTH_HELP, HealthLines, Layout, Refresh, health_value
from devctl.model import Device

WEIRD = 'GPU "x"\\y\nz\r\x1b[2J\x07 é \u202e'


def _layout(lists: Mapping[str, tuple[Device, ...]], held: Mapping[str, Mapping[str, DeviceRow]]) -> Layout:
    dra = [
        DeviceRow("gpu.example.com", "node-a/gpu-0", "Healthy", (0,), "free", (), kind="dra"),
        DeviceRow("gpu.example.com", 'node-a/"odd"\n', "Unknown", (), "allocated", (), kind="dra"),
    ]
    refresh = Refresh(
        at=0.0,
        snapshot=cast(Any, None),  # the health lines read the live lists and the refresh's device rows only
        source_up={},
        resources=(),
        devices=held,
        dra_devices=tuple(dra),
        claims=(),
        findings=(),
    )
    return Layout(refresh, (), lists, [], dra, True)


def _as_prometheus_client_writes_it(lay: Layout) -> bytes:
    """The same samples through GaugeMetricFamily and generate_latest."""

    class Health:
        def collect(self) -> Iterator[Metric]:
            family = GaugeMetricFamily(
                "devctl_device_health", HEALTH_HELP, labels=["kind", "resource", "device", "numa"]
            )
            for name, listed in sorted(lay.lists.items()):
                ids = {d.id for d in listed}
                for d in listed:
                    family.add_metric(["device-plugin", name, d.id, numa_text(d.numa_nodes)], health_value(d.health))
                for dev_id, row in lay.refresh.devices.get(name, {}).items():
                    if dev_id not in ids and row.allocated_to:
                        family.add_metric(["device-plugin", name, dev_id, numa_text(row.numa_nodes)], -1.0)
            for d in lay.dra_devices:
                family.add_metric(["dra", d.resource, d.id, numa_text(d.numa_nodes)], health_value(d.health))
            yield family

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Health())  # type: ignore[arg-type]
    return generate_latest(registry)


LISTS = {
    "example.com/gpu": (
        Device("gpu-0", "Healthy", (0,)),
        Device(WEIRD, "Unhealthy", (0, 1)),
        Device("gpu-2", "Unknown", ()),
    ),
    'example.com/"q"\\': (Device("q-0", "Healthy", (1,)),),
}
HELD = {
    "example.com/gpu": {
        "gone-1": DeviceRow("example.com/gpu", "gone-1", "Missing", (1,), "allocated", (Holder("ml", "a", "main"),)),
        "gone-2": DeviceRow("example.com/gpu", "gone-2", "Missing", (), "free", ()),
    }
}


def test_the_health_lines_are_what_prometheus_client_writes() -> None:
    lay = _layout(LISTS, HELD)
    text = HealthLines().render(lay)
    assert text == _as_prometheus_client_writes_it(lay)
    (family,) = text_string_to_metric_families(text.decode())
    by_device = {s.labels["device"]: s.value for s in family.samples}
    assert by_device[WEIRD] == 0.0  # read back exactly
    assert by_device["gone-1"] == -1.0 and "gone-2" not in by_device
    assert by_device['node-a/"odd"\n'] == -1.0


def test_a_changed_list_is_written_again_and_the_others_are_kept() -> None:
    lines = HealthLines()
    lines.render(_layout(LISTS, HELD))
    flipped = dict(LISTS)
    flipped["example.com/gpu"] = (Device("gpu-0", "Unhealthy", (0,)), *LISTS["example.com/gpu"][1:])
    lay = _layout(flipped, HELD)
    assert lines.render(lay) == _as_prometheus_client_writes_it(lay)
    assert lines.render(_layout(LISTS, HELD)) == _as_prometheus_client_writes_it(_layout(LISTS, HELD))
