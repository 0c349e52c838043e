"""Review fixes (history, item 2): the recorder reads enough of the node to join as ``devctl hw`` does.

On the default simulated node the time-sliced GPU 0000:cc:00.0 is nvidia.com/gpu.shared's GPU-8::0..3, held by
chat/bot-0 and chat/bot-1: a kernel line the recorder stamps on that address must name them.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

from devctl.analyze.history import from_kernel, node_index
from devctl.core.recorder import _node
from devctl.model.kernel import KernelRecord

XID = "NVRM: Xid (PCI:0000:cc:00): 79, pid=1, GPU has fallen off the bus."


def test_the_recorders_read_of_the_node_joins_an_xid_on_a_time_sliced_gpu(sim_node) -> None:
    index = node_index(asyncio.run(_node(sim_node.paths, 10.0)))
    assert ("nvidia.com/gpu.shared", "GPU-8::0") in index.on_pci.get("0000:cc:00.0", ())
    at = datetime(2026, 12, 3, 14, 36, 38, tzinfo=timezone.utc)
    event = from_kernel(KernelRecord(seq=1, usec=1, time=at, level=4, facility=0, text=XID), index)
    assert event is not None and event.resource == "nvidia.com/gpu.shared"
    assert {f"{h.namespace}/{h.pod}" for h in event.holders} == {"chat/bot-0", "chat/bot-1"}
