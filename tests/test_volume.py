"""What keeps a node with a million devices cheap to read (figures: docs/performance.md, bench/bench_volume.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import devctl

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.podresources.v1 import api_pb2 as pr
from devctl.model import ContainerDevices, Device, DeviceList
from devctl.node import checkpoint, columns, convert
from devctl.node.checkpoint import RawEntry, read_checkpoint, write_checkpoint
from devctl.node.paths import resolve_paths

RUN_A_HUGE_RESULT = """
from devctl.cli.common import run

class Huge:  # a result whose repr would cost as much as a million devices' does
    def __repr__(self):
        raise SystemExit("the result was repr'd")

async def collect():
    return Huge()

assert isinstance(run(collect()), Huge)
print("ok")
"""


def test_run_hands_back_the_result_without_repr_of_it():
    # A process of its own: asyncio.run installs its SIGINT handler only over Python's default one.
    out = subprocess.run([sys.executable, "-c", RUN_A_HUGE_RESULT], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, "ok\n", "")


def test_one_message_per_device_becomes_one_entry_per_resource_and_numa_nodes():
    def one(resource: str, device: str, *nodes: int) -> pr.ContainerDevices:
        topology = pr.TopologyInfo(nodes=[pr.NUMANode(ID=n) for n in nodes])
        return pr.ContainerDevices(resource_name=resource, device_ids=[device], topology=topology)

    reply = pr.AllocatableResourcesResponse(
        devices=[
            one("a/gpu", "g1", 1),
            one("a/gpu", "g0", 0),
            one("a/gpu", "g2", 1),
            one("b/nic", "n0"),
            one("a/gpu", "g3", 0, 1),
        ]
    )
    got = convert.allocatable(pr.AllocatableResourcesResponse.FromString(reply.SerializeToString())).devices
    assert got == (
        ContainerDevices("a/gpu", ("g1", "g2"), (1,)),
        ContainerDevices("a/gpu", ("g0",), (0,)),
        ContainerDevices("b/nic", ("n0",), ()),
        ContainerDevices("a/gpu", ("g3",), (0, 1)),
    )
    # One tuple and one name shared by every device on the same nodes and resource.
    assert got[0].numa_nodes is convert.allocatable(reply).devices[0].numa_nodes
    assert got[0].resource is got[1].resource


# --- a list read a column at a time reads as protobuf reads it -------------------------------


def _devices_wire(*devices: dp.Device) -> bytes:
    return dp.ListAndWatchResponse(devices=list(devices)).SerializeToString()


def _by_message(wire: bytes) -> tuple[Device, ...]:
    return tuple(convert.device(d) for d in dp.ListAndWatchResponse.FromString(wire).devices)


def _topology(*nodes: int) -> dp.TopologyInfo:
    return dp.TopologyInfo(nodes=[dp.NUMANode(ID=n) for n in nodes])


@pytest.mark.parametrize(
    "devices",
    [
        [dp.Device(ID=f"g{i}", health="Healthy", topology=_topology(i % 2)) for i in range(5)],
        [dp.Device(ID="g0", health="Healthy"), dp.Device(ID="g1", health="Unhealthy")],  # no topology at all
        [dp.Device(ID="g0", health="Healthy", topology=_topology(0)), dp.Device(ID="g1", health="Healthy")],
        [dp.Device(ID="g0", health="Healthy", topology=_topology(0, 1)), dp.Device(ID="g1")],  # no health
        [dp.Device(ID="ü-" + "x" * 300, health="Healthy", topology=_topology(3))],  # a two-byte length
        [],
    ],
)
def test_a_device_list_reads_the_same_by_columns_as_message_by_message(
    devices: list[dp.Device], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columns, "LONG", 0)  # every list read by columns, however short
    read = _spy_columns(monkeypatch)
    wire = _devices_wire(*devices)
    got = convert.device_list(wire)
    if devices and all(d.health and d.topology.nodes for d in devices):  # the usual form: by columns
        assert read == [True]
    assert isinstance(got, DeviceList)
    assert got == _by_message(wire)
    assert list(got) == list(_by_message(wire))


def _spy_columns(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each pass of ``columns.columns`` read its items (True) or sent them message by message."""
    read: list[bool] = []
    original = columns.columns

    def spy(wire):  # type: ignore[no-untyped-def]
        passes = original(wire)
        if passes is None:
            read.append(False)
            return None

        def each():  # type: ignore[no-untyped-def]
            for cols in passes:
                read.append(cols is not None)
                yield cols

        return each()

    monkeypatch.setattr(columns, "columns", spy)
    return read


def test_a_list_that_repeats_a_field_reads_as_protobuf_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "LONG", 0)
    read = _spy_columns(monkeypatch)
    # Counts per field balance (two IDs in one device, none in the next), so only the
    # byte-for-byte check of the columns can tell; protobuf keeps the last ID.
    one = b"\x0a\x02g0\x0a\x02g1\x12\x07Healthy"
    other = b"\x12\x07Healthy"
    wire = b"".join(b"\x0a" + bytes([len(m)]) + m for m in (one, other))
    assert convert.device_list(wire) == (Device("g1", "Healthy"), Device("", "Healthy"))
    assert read == [False]


def _item(*fields: bytes) -> bytes:
    """A ListAndWatchResponse's field 1 holding these bytes as one Device."""
    body = b"".join(fields)
    return b"\x0a" + columns.varint(len(body)) + body


ID, HEALTHY, NUMA0 = b"\x0a\x02g0", b"\x12\x07Healthy", b"\x1a\x04\x0a\x02\x08\x01"


@pytest.mark.parametrize(
    ("items", "by_columns"),
    [
        ([_item(ID, HEALTHY, NUMA0), _item(b"\x0a\x02g1", HEALTHY, NUMA0)], True),  # the usual form
        ([_item(ID, HEALTHY, b"\x1a\x00"), _item(b"\x0a\x02g1", HEALTHY, b"\x1a\x00")], True),  # empty topology
        ([_item(HEALTHY, ID, NUMA0)], False),  # fields out of order
        ([_item(ID, HEALTHY, NUMA0, b"\x22\x01x")], True),  # an unknown field, skipped as protobuf skips it
        ([_item(ID, b"\x22\x01x", HEALTHY, NUMA0)], False),  # ... between known ones
        ([_item(b"\x0a\x82\x00g0", HEALTHY)], False),  # a length not in its shortest form
        ([_item(ID, b"\x10\x01", NUMA0), _item(ID, HEALTHY, NUMA0)], False),  # field 2 as a varint
        ([_item(ID, HEALTHY, NUMA0), _item(ID, NUMA0)], False),  # a field left out of one item
        ([_item(b"\x0a\x05" + "ü\0é".encode(), HEALTHY), _item(ID, HEALTHY)], True),  # NUL, non-ASCII
    ],
)
def test_columns_are_taken_only_when_they_read_as_protobuf_reads(
    items: list[bytes], by_columns: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columns, "LONG", 0)
    read = _spy_columns(monkeypatch)
    wire = b"".join(items)
    assert convert.device_list(wire) == _by_message(wire)
    assert read == [by_columns]


def test_columns_read_in_passes_read_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "LONG", 0)
    monkeypatch.setattr(columns, "CHUNK", 3)
    read = _spy_columns(monkeypatch)
    devices = [
        dp.Device(ID=f"g{i}", health=("Healthy", "Unhealthy")[i % 3 == 0], topology=_topology(i % 2)) for i in range(10)
    ]
    wire = _devices_wire(*devices)
    assert convert.device_list(wire) == _by_message(wire)
    assert read == [True] * 4
    # An item out of order in the second pass: that pass falls back, and the whole list is read message by message.
    odd = _devices_wire(*devices[:4]) + _item(HEALTHY, b"\x0a\x02g4") + _devices_wire(*devices[5:])
    assert convert.device_list(odd) == _by_message(odd)
    assert read[4:] == [True, False]
    reply = pr.AllocatableResourcesResponse(
        devices=[
            pr.ContainerDevices(
                resource_name=r, device_ids=[f"{r}-{i}"], topology=pr.TopologyInfo(nodes=[pr.NUMANode(ID=i % 2)])
            )
            for r in ("a/x", "b/y", "a/x")  # a resource again after another: a run of its own
            for i in range(5)
        ],
        cpu_ids=[3],
    )
    assert convert.allocatable_wire(reply.SerializeToString()) == convert.allocatable(reply)


def test_a_list_that_is_no_list_is_none() -> None:
    assert convert.device_list(b"\x0a\x05ab") is None


def test_allocatable_reads_the_same_by_columns_as_message_by_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "LONG", 0)

    def one(resource: str, *ids: str, nodes: tuple[int, ...] = (0,)) -> pr.ContainerDevices:
        topology = pr.TopologyInfo(nodes=[pr.NUMANode(ID=n) for n in nodes])
        return pr.ContainerDevices(resource_name=resource, device_ids=list(ids), topology=topology)

    for devices in (
        [one(f"r{i % 3}/x", f"d{i}", nodes=(i % 2,)) for i in range(200)],  # the kubelet's form: one ID each
        [one("a/x", "d0", "d1"), one("a/x", "d2")],  # several IDs in one message
        [one("a/x", "d0"), pr.ContainerDevices(resource_name="b/y", device_ids=["e0"])],  # topology in some
    ):
        reply = pr.AllocatableResourcesResponse(devices=devices, cpu_ids=[1, 2, 5])
        wire = reply.SerializeToString()
        assert convert.allocatable_wire(wire) == convert.allocatable(reply)


def _pod(name: str, namespace: str = "ns", *containers: pr.ContainerResources) -> pr.PodResources:
    return pr.PodResources(name=name, namespace=namespace, containers=list(containers))


def _held(name: str, *ids: str, resource: str = "a/gpu", nodes: tuple[int, ...] = (0,), **more: object):
    topology = pr.TopologyInfo(nodes=[pr.NUMANode(ID=n) for n in nodes]) if nodes else None
    devices = [pr.ContainerDevices(resource_name=resource, device_ids=[i], topology=topology) for i in ids]
    return pr.ContainerResources(name=name, devices=devices, **more)  # type: ignore[arg-type]


SINGLE = [_pod(f"p{i}", f"ns-{i % 3}", _held("c", f"g{i}", nodes=(i % 2,))) for i in range(300)]


@pytest.mark.parametrize(
    ("pods", "by_columns"),
    [
        (SINGLE, True),  # one container holding one device each: by columns
        ([_pod(f"p{i}", "ns", _held("c", f"g{i}", nodes=())) for i in range(5)], True),  # no topology at all
        ([_pod("ü-" + "x" * 300, "ns", _held("c", "g0"))], True),  # a two-byte length
        ([*SINGLE, _pod("two", "ns", _held("a", "g1"), _held("b", "g2"))], False),  # two containers
        ([*SINGLE, _pod("none", "ns")], False),  # no container
        ([*SINGLE, _pod("ids", "ns", _held("c", "g1", "g2"))], False),  # two device entries
        ([*SINGLE, _pod("nodev", "ns", _held("c"))], False),  # a container without devices
        ([*SINGLE, _pod("cpus", "ns", _held("c", "g1", cpu_ids=[2, 3]))], False),  # exclusive CPUs
        ([*SINGLE, _pod("mem", "ns", _held("c", "g1", memory=[pr.ContainerMemory(memory_type="m", size=1)]))], False),
        ([*SINGLE, _pod("default-ns", "", _held("c", "g1"))], False),  # an empty namespace is left out on the wire
        ([*SINGLE, _pod("topo", "ns", _held("c", "g1", nodes=()))], False),  # a topology in some entries only
        ([], False),
    ],
)
def test_a_pod_list_reads_the_same_by_columns_as_message_by_message(
    pods: list[pr.PodResources], by_columns: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columns, "LONG", 0)  # every list read by columns, however short
    read: list[bool] = []
    original = columns.of_messages

    def spy(messages):  # type: ignore[no-untyped-def]
        cols = original(messages)
        read.append(cols is not None)
        return cols

    monkeypatch.setattr(columns, "of_messages", spy)
    wire = pr.ListPodResourcesResponse(pod_resources=pods).SerializeToString()
    got = convert.pods_wire(wire)
    assert got == tuple(convert.pod(p) for p in pr.ListPodResourcesResponse.FromString(wire).pod_resources)
    assert (bool(read) and all(read)) == by_columns


@pytest.mark.parametrize(
    "first",
    [
        _pod("two", "ns", _held("a", "g1"), _held("b", "g2")),  # several containers
        _pod(  # a DRA claim beside the device, as on a node with DRA drivers
            "claim",
            "ns",
            _held("c", "g1", dynamic_resources=[pr.DynamicResource(claim_name="k", claim_namespace="ns")]),
        ),
    ],
)
def test_a_pod_list_whose_first_pod_is_not_one_device_is_read_message_by_message_without_a_column_pass(
    first: pr.PodResources, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columns, "LONG", 0)
    passes: list[object] = []
    monkeypatch.setattr(columns, "of_messages", lambda messages: passes.append(messages))  # never asked
    wire = pr.ListPodResourcesResponse(pod_resources=[first, *SINGLE]).SerializeToString()
    got = convert.pods_wire(wire)
    assert got == tuple(convert.pod(p) for p in pr.ListPodResourcesResponse.FromString(wire).pod_resources)
    assert passes == []


def test_a_pod_list_that_is_no_list_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    assert convert.pods_wire(b"\x0a\x05ab") is None
    monkeypatch.setattr(columns, "LONG", 0)
    assert convert.pods_wire(b"\x0a\x05ab") is None
    # Columns of bytes that are not UTF-8, where protobuf wants a string: what protobuf says (not a List)
    wire = pr.ListPodResourcesResponse(pod_resources=SINGLE).SerializeToString()
    assert convert.pods_wire(wire.replace(b"p1", b"\xff1")) is None


# --- the checkpoint's checksum above the limit: not verified, and said -------------------------


def test_a_checkpoint_above_the_checksum_limit_is_read_and_its_checksum_said_unverified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path
    path = resolve_paths(root=str(root), env={}).checkpoint
    os.makedirs(os.path.dirname(path))
    payload = dp.ContainerAllocateResponse(envs={"PAYLOAD": "x" * 4096}).SerializeToString()
    entries = [RawEntry(f"uid-{i}", "c", "a.example/gpu", {"0": [f"g{i}"]}, payload) for i in range(4)]
    write_checkpoint(path, entries, {"a.example/gpu": ["g0", "g1", "g2", "g3"]})
    assert read_checkpoint(path).checksum_ok is True  # under the limit: verified

    monkeypatch.setattr(checkpoint, "CHECKSUM_LIMIT", 8 * 1024)
    cp = read_checkpoint(path)
    assert (cp.checksum_ok, cp.computed_checksum, len(cp.entries)) == (None, None, 4)
    assert "checksum not verified" in (cp.unverified or "")

    shown = devctl(root, "checkpoint")
    assert shown.exit_code == 0
    assert "checksum:   not verified" in shown.stdout and "g3" in shown.stdout  # the rest still shown
    warnings = [line for line in shown.stderr.splitlines() if "checksum not verified" in line]
    assert len(warnings) == 1 and "above devctl's limit of 8 KiB" in warnings[0]
    doc = devctl(root, "checkpoint", "-o", "json").json
    assert doc["checksum_ok"] is None
    assert [e["kind"] for e in doc["errors"] if e["source"] == "checkpoint"] == ["too-large"]


# --- JSON straight from the views: the same text as from their plain copy ---------------------


def test_json_written_from_the_views_is_the_json_of_their_plain_form() -> None:
    from test_analyze import gpu_node

    from devctl import analyze
    from devctl.model import SourceError
    from devctl.render import structured

    node = gpu_node(errors=(SourceError("checkpoint", "/cp: gone \x85\u202e"),))
    for body in (
        {"resources": analyze.resources_view(node)},
        {"devices": analyze.devices_view(node)},
        {"pods": analyze.pods_view(node)},
        analyze.topology_view(node),
        analyze.plugins_view(node),
        analyze.checkpoint_view(node),
        {"pods": []},
    ):
        for errors in (node.errors, None):
            assert structured.json_document(body, errors) == structured.to_json(structured.document(body, errors))


def test_json_of_many_rows_is_written_in_pieces_with_the_same_text() -> None:
    from dataclasses import replace

    from devctl.model import ContainerDevices, ContainerResources, PodResources, SourceError
    from devctl.render import structured

    # More rows than one piece holds, odd characters in a row of a later piece, and errors after them.
    pods = [
        PodResources("ns", f"pod-{i}", (ContainerResources("c", (ContainerDevices("x/y", (f"d{i}",), (0,)),)),))
        for i in range(3 * structured._ROWS_PER_PIECE + 3)
    ]
    pods[-2] = replace(pods[-2], name="bad\x85\u202e\n")
    errors = (SourceError("checkpoint", "gone \x9b"),)
    pieces = list(structured.json_pieces({"pods": pods}, errors))
    assert len(pieces) > 3 and max(map(len, pieces)) < len("".join(pieces)) / 2
    assert "".join(pieces) == structured.to_json(structured.document({"pods": pods}, errors))
    # A view that is a dataclass gets the errors in its document, not in itself.
    view = pods[0]
    before = vars(view).copy()
    assert structured.json_document(view, errors) == structured.to_json(structured.document(view, errors))
    assert vars(view) == before


def test_a_device_list_reads_and_round_trips_as_the_tuple_of_its_devices() -> None:
    from devctl.model import PluginProbe, PluginStatus
    from devctl.model.serial import from_plain, to_plain

    devices = (Device("a", "Healthy", (0,)), Device("b", "Unhealthy", ()))
    listed = DeviceList.of(devices)
    assert listed == devices and devices == listed and listed != devices[:1]
    assert (len(listed), listed[1], listed[:1], list(listed)) == (2, devices[1], devices[:1], list(devices))
    assert hash(listed) == hash(DeviceList.of(list(devices))) and listed.healthy_count() == 1
    probe = PluginProbe("/s.sock", PluginStatus.SERVING, devices=listed)
    assert from_plain(PluginProbe, to_plain(probe)) == probe
    assert (
        to_plain(probe)["devices"] == to_plain(PluginProbe("/s.sock", PluginStatus.SERVING, devices=devices))["devices"]
    )
