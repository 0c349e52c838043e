"""The baseline of bench/bench_read.py: the same RPCs as `devctl ls` / `devctl pods`, with nothing around them.

Plain synchronous grpcio and the generated stubs, one call after another, each
raw reply printed as JSON (protobuf's own MessageToDict). It is what a person
would write in a hurry, and the bar devctl's start-up and analysis are measured
against.

    python bench/bare_client.py ROOT ls      # pod-resources + every plugin socket
    python bench/bare_client.py ROOT pods    # pod-resources only
"""

from __future__ import annotations

import json
import os
import stat
import sys

import grpc
from google.protobuf.json_format import MessageToDict

from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dp_grpc
from devctl.api.podresources.v1 import api_pb2 as pr
from devctl.api.podresources.v1 import api_pb2_grpc as pr_grpc

TIMEOUT = 5.0
OPTIONS = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]


def pod_resources(root: str) -> dict:
    with grpc.insecure_channel(f"unix:{root}/var/lib/kubelet/pod-resources/kubelet.sock", options=OPTIONS) as ch:
        stub = pr_grpc.PodResourcesListerStub(ch)
        listed = stub.List(pr.ListPodResourcesRequest(), timeout=TIMEOUT)
        allocatable = stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=TIMEOUT)
    return {"list": MessageToDict(listed), "allocatable": MessageToDict(allocatable)}


def plugin(path: str) -> dict:
    with grpc.insecure_channel(f"unix:{path}", options=OPTIONS) as ch:
        stub = dp_grpc.DevicePluginStub(ch)
        options = stub.GetDevicePluginOptions(dp.Empty(), timeout=TIMEOUT)
        stream = stub.ListAndWatch(dp.Empty(), timeout=TIMEOUT)
        first = next(stream)
        stream.cancel()
    return {"socket": path, "options": MessageToDict(options), "devices": MessageToDict(first)}


def main() -> None:
    root, what = sys.argv[1], sys.argv[2]
    out = {"pod_resources": pod_resources(root)}
    if what == "ls":
        plugins_dir = f"{root}/var/lib/kubelet/device-plugins"
        sockets = sorted(
            os.path.join(plugins_dir, n)
            for n in os.listdir(plugins_dir)
            if n != "kubelet.sock" and stat.S_ISSOCK(os.lstat(os.path.join(plugins_dir, n)).st_mode)
        )
        out["plugins"] = [plugin(s) for s in sockets]
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
