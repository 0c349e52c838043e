"""DRA claims in pod-resources as the real v1.32 kubelet sends them, and ClaimResource.share_id.

The v1.32 kubelet keeps one list of CDI names per driver of a claim and appends
each device's names to it: ``gpu-0 [c0]``, ``gpu-1 [c0 c1]`` (observed). devctl
shows each name once, on its own device. ``share_id`` (field 5, optional) is
shown where it is set (``share ID`` in tables, ``share_id`` in JSON) and stays
absent (null) where it is not.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
from helpers import devctl

from devctl.api.podresources.v1 import api_pb2 as v1
from devctl.api.podresources.v1 import api_pb2_grpc as v1_grpc
from devctl.lab.sim.podresources import list_to_pb
from devctl.model import ClaimDevice, ContainerResources, DynamicResource, PodResources
from devctl.node.convert import claim_devices, pods_wire

DRIVER = "gpu.example.com"
CDI = "k8s.gpu.example.com/claim=u1-"  # the NVIDIA-style per-claim name, + the device


def claim_resource(device: str, cdi: list[str], share_id: str | None = None, driver: str = DRIVER) -> v1.ClaimResource:
    msg = v1.ClaimResource(driver_name=driver, pool_name="node-a", device_name=device)
    msg.cdi_devices.extend([v1.CDIDevice(name=n) for n in cdi])
    if share_id is not None:
        msg.share_id = share_id
    return msg


def v132_list() -> bytes:
    """A List reply as the v1.32 kubelet writes it: gpu-1's ClaimResource repeats gpu-0's CDI name; gpu-1 shared."""
    reply = v1.ListPodResourcesResponse()
    pod = reply.pod_resources.add(name="train-0", namespace="vm")
    container = pod.containers.add(name="trainer")
    claim = container.dynamic_resources.add(claim_name="gpus", claim_namespace="vm")
    claim.claim_resources.extend(
        [claim_resource("gpu-0", [CDI + "gpu-0"]), claim_resource("gpu-1", [CDI + "gpu-0", CDI + "gpu-1"], "7f3c")]
    )
    return reply.SerializeToString()


class _Kubelet(grpc.GenericRpcHandler):
    """Answers List with fixed bytes and every other pod-resources method with an empty message."""

    def __init__(self, listed: bytes):
        self._list = grpc.unary_unary_rpc_method_handler(lambda request, context: listed)
        self._empty = grpc.unary_unary_rpc_method_handler(lambda request, context: b"")

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return self._list if handler_call_details.method == "/v1.PodResourcesLister/List" else self._empty


@contextlib.asynccontextmanager
async def kubelet(path: Path, listed: bytes) -> AsyncIterator[None]:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([_Kubelet(listed)])
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    try:
        yield
    finally:
        await server.stop(None)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def v132_node(root: Path, background) -> None:
    sockets = root / "var/lib/kubelet/pod-resources"
    sockets.mkdir(parents=True)
    (root / "var/lib/kubelet/device-plugins").mkdir()
    background(kubelet(sockets / "kubelet.sock", v132_list()))


def test_pods_and_claims_show_each_cdi_name_once_on_its_own_device(short_root: Path, background) -> None:
    # GIVEN a kubelet whose List repeats gpu-0's CDI name in gpu-1's ClaimResource, as v1.32 does
    v132_node(short_root, background)
    # WHEN pods and claims read it
    pods = devctl(short_root, "pods", "-o", "json").json["pods"]
    claims = devctl(short_root, "claims", "-o", "json").json["claims"]
    # THEN each device has its own CDI name, once
    (claim,) = pods[0]["containers"][0]["dynamic_resources"]
    (row,) = claims
    for devices in (claim["devices"], row["devices"]):
        assert {d["device"]: d["cdi_devices"] for d in devices} == {"gpu-0": [CDI + "gpu-0"], "gpu-1": [CDI + "gpu-1"]}
        # and share_id where the kubelet set it, null where it did not
        assert {d["device"]: d["share_id"] for d in devices} == {"gpu-0": None, "gpu-1": "7f3c"}


def test_the_tables_show_each_name_once_and_the_share(short_root: Path, background) -> None:
    v132_node(short_root, background)
    claims = devctl(short_root, "claims", "-o", "wide").stdout
    assert claims.count(CDI + "gpu-0") == 1 and claims.count(CDI + "gpu-1") == 1
    assert "node-a/gpu-0,node-a/gpu-1 (share 7f3c)" in claims
    pods = devctl(short_root, "pods", "-o", "wide").stdout
    assert f"vm/gpus={DRIVER}/node-a/gpu-0,{DRIVER}/node-a/gpu-1 (share 7f3c)" in pods
    assert "gpu.example.com=2" in devctl(short_root, "pods").stdout  # two devices, not more


def test_a_share_id_from_a_kubelet_is_escaped(short_root: Path, background) -> None:
    sockets = short_root / "var/lib/kubelet/pod-resources"
    sockets.mkdir(parents=True)
    reply = v1.ListPodResourcesResponse()
    claim = reply.pod_resources.add(name="p", namespace="vm").containers.add(name="c").dynamic_resources.add()
    claim.claim_name, claim.claim_namespace = "gpus", "vm"
    claim.claim_resources.append(claim_resource("gpu-0", [], "evil\x1b[2J"))
    background(kubelet(sockets / "kubelet.sock", reply.SerializeToString()))
    for argv in (("claims", "-o", "wide"), ("pods", "-o", "wide")):
        out = devctl(short_root, *argv).stdout
        assert "share evil\\x1b[2J" in out and "\x1b" not in out, argv


# --- the reading, one ClaimResource list at a time -----------------------------------------------


def names(devices: tuple[ClaimDevice, ...]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(d.driver, d.device, d.cdi_devices) for d in devices]


def test_a_claim_prepared_again_after_a_kubelet_restart_is_each_device_once() -> None:
    # the v1.32 kubelet appends the devices of a claim prepared again: gpu-0, gpu-1, gpu-0, gpu-1, names accumulated
    a, b = CDI + "gpu-0", CDI + "gpu-1"
    sent = [
        claim_resource("gpu-0", [a]),
        claim_resource("gpu-1", [a, b]),
        claim_resource("gpu-0", [a, b, a]),
        claim_resource("gpu-1", [a, b, a, b]),
    ]
    assert names(claim_devices(sent)) == [(DRIVER, "gpu-0", (a,)), (DRIVER, "gpu-1", (b,))]


def test_each_driver_of_a_claim_repeats_only_its_own_names() -> None:
    sent = [
        claim_resource("gpu-0", ["g/c=0"]),
        claim_resource("nic-0", ["n/c=0"], driver="nic.example.com"),
        claim_resource("gpu-1", ["g/c=0", "g/c=1"]),
        claim_resource("nic-1", ["n/c=0", "n/c=1"], driver="nic.example.com"),
    ]
    assert names(claim_devices(sent)) == [
        (DRIVER, "gpu-0", ("g/c=0",)),
        ("nic.example.com", "nic-0", ("n/c=0",)),
        (DRIVER, "gpu-1", ("g/c=1",)),
        ("nic.example.com", "nic-1", ("n/c=1",)),
    ]


def test_a_kubelet_that_sends_each_devices_own_names_is_read_as_sent() -> None:
    # a later device whose list does not begin with the earlier one's is not the v1.32 repetition: nothing dropped
    sent = [claim_resource("gpu-0", ["g/c=0", "g/c=x"]), claim_resource("gpu-1", ["g/c=x", "g/c=1"])]
    assert names(claim_devices(sent)) == [(DRIVER, "gpu-0", ("g/c=0", "g/c=x")), (DRIVER, "gpu-1", ("g/c=x", "g/c=1"))]


# --- the simulator sends what v1.32 sends ---------------------------------------------------------


def test_the_simulator_repeats_names_as_v132_and_sends_share_id_only_when_set() -> None:
    # GIVEN the simulator's claim of two devices, the second shared
    pod = PodResources(
        "vm",
        "train-0",
        (
            ContainerResources(
                "trainer",
                dynamic_resources=(
                    DynamicResource(
                        "gpus",
                        "vm",
                        (
                            ClaimDevice(DRIVER, "node-a", "gpu-0", ("c/x=0",)),
                            ClaimDevice(DRIVER, "node-a", "gpu-1", ("c/x=1",), "7f3c"),
                        ),
                    ),
                ),
            ),
        ),
    )
    # WHEN it is put on the wire
    wire = list_to_pb([pod])
    (sent,) = wire.pod_resources[0].containers[0].dynamic_resources
    # THEN gpu-1 repeats gpu-0's name as the v1.32 kubelet does, share_id is there on gpu-1 only
    assert [[c.name for c in r.cdi_devices] for r in sent.claim_resources] == [["c/x=0"], ["c/x=0", "c/x=1"]]
    assert [r.HasField("share_id") for r in sent.claim_resources] == [False, True]
    # AND devctl reads back exactly what the simulator holds
    assert pods_wire(wire.SerializeToString()) == (pod,)


def test_the_simulated_node_sends_repeats_and_devctl_shows_each_name_once(sim_node) -> None:
    # the default node's ml/train-1 claims gpu-2 and gpu-3 of one driver
    path = str(sim_node.root / "var/lib/kubelet/pod-resources/kubelet.sock")
    with grpc.insecure_channel(f"unix:{path}") as channel:
        reply = v1_grpc.PodResourcesListerStub(channel).List(v1.ListPodResourcesRequest(), timeout=10)
    (pod,) = [p for p in reply.pod_resources if p.name == "train-1"]
    (sent,) = pod.containers[0].dynamic_resources
    first, second = ([c.name for c in r.cdi_devices] for r in sent.claim_resources)
    assert first and second[: len(first)] == first and len(second) > len(first)  # v1.32's repetition
    got = devctl(sim_node.root, "pods", "-n", "ml", "--pod", "train-1", "-o", "json").json["pods"]
    (claim,) = got[0]["containers"][0]["dynamic_resources"]
    shown = [n for d in claim["devices"] for n in d["cdi_devices"]]
    assert sorted(shown) == sorted(set(first) | set(second)) and len(shown) == len(set(shown))
    assert all(d["share_id"] is None for d in claim["devices"])


def test_the_simulated_kubelet_lists_the_share_id_its_driver_prepared(tmp_path: Path) -> None:
    # GIVEN the simulated DRA manager holding a claim whose driver prepared gpu-1 with a share id
    from devctl.lab.sim.dramanager import ClaimInfo, DraManager
    from devctl.lab.sim.scenario_dra import DraScenario
    from devctl.node.dra_checkpoint import RawDevice

    manager = DraManager(str(tmp_path), str(tmp_path), DraScenario())
    info = ClaimInfo("u1", "gpus", "vm", DRIVER, users={("pod-uid", "trainer")})
    info.devices = (RawDevice("node-a", "gpu-0", None, ("c/x=0",)), RawDevice("node-a", "gpu-1", None, None, "7f3c"))
    manager.claims["u1"] = info
    # WHEN pod-resources asks for the container's claims
    (claim,) = manager.dynamic_resources("pod-uid", "trainer")
    # THEN the share id is there, and absent where the driver gave none
    assert [(d.device, d.share_id) for d in claim.devices] == [("gpu-0", None), ("gpu-1", "7f3c")]
