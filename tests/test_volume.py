"""What keeps a node with a million devices cheap to read (figures: docs/performance.md, bench/bench_volume.py)."""

from __future__ import annotations

import subprocess
import sys

from devctl.api.podresources.v1 import api_pb2 as pr
from devctl.model import ContainerDevices
from devctl.node import convert

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
