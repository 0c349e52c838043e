"""Review fixes (history, item 2): history joins PCI addresses and devices as ``devctl hw`` does.

On the default simulated node the time-sliced GPU 0000:cc:00.0 is nvidia.com/gpu.shared's GPU-8::0..3, held by
chat/bot-0 and chat/bot-1 (``devctl hw``): an Xid on it names a replica and both pods, a replica's flip has the
GPU's address, and the flip's story says which Xid came just before.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from devctl.analyze.history import from_kernel, from_watch, matches, node_index, story
from devctl.core.collect import collect
from devctl.core.events import WatchEvent
from devctl.model.kernel import KernelRecord

SHARED = "nvidia.com/gpu.shared"
T0 = datetime(2026, 12, 3, 14, 36, 38, tzinfo=timezone.utc)
XID = "NVRM: Xid (PCI:0000:cc:00): 79, pid=1234, name=python, GPU has fallen off the bus."


def test_an_xid_on_a_time_sliced_gpu_names_its_replica_its_pods_and_the_flip_its_address(sim_node) -> None:
    snapshot = asyncio.run(collect(sim_node.paths, timeout=10.0))
    index = node_index(snapshot)
    xid = from_kernel(KernelRecord(seq=1, usec=1000, time=T0, level=4, facility=0, text=XID), index)
    assert xid is not None and xid.pci == "0000:cc:00.0"
    assert xid.resource == SHARED and xid.device is not None and xid.device.startswith("GPU-8::")
    assert {f"{h.namespace}/{h.pod}" for h in xid.holders} == {"chat/bot-0", "chat/bot-1"}
    assert matches(xid, "chat/bot-0") and matches(xid, "chat/bot-1")

    at = T0 + timedelta(seconds=0.5)
    watched = WatchEvent(at, SHARED, "nvidia-gpu-shared.sock", "health", "GPU-8::0", "Healthy", "Unhealthy")
    flip = from_watch(watched, index)
    assert flip is not None and flip.pci == "0000:cc:00.0"

    told = story([xid, flip], SHARED, "GPU-8::0", at + timedelta(minutes=1), unhealthy=True)
    assert told.before is xid
    assert told.line == "unhealthy since 14:36:38, 0.5 s after Xid 79: GPU has fallen off the bus on 0000:cc:00.0"


def test_a_node_without_the_gpu_leaves_the_xid_unjoined() -> None:
    xid = from_kernel(KernelRecord(seq=1, usec=1000, time=T0, level=4, facility=0, text=XID), None)
    assert xid is not None and xid.device is None and xid.holders == ()
    assert xid.time == T0 and xid.pci == "0000:cc:00.0"  # the record's own time; the address still said
