"""Our .proto files must be wire-identical to upstream: checked against a table written from the contract.

The CRI rows are transcribed from upstream k8s.io/cri-api runtime/v1 api.proto.

The table below is transcribed from ../shared/docs/kubelet-contract.md, not from
the generated code, so a renumbered field or a renamed service fails here.
"""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import FieldDescriptor as F

from devctl.api.cri.runtime.v1 import api_pb2 as cri
from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.podresources.v1 import api_pb2 as v1
from devctl.api.podresources.v1alpha1 import api_pb2 as v1alpha1

S, B, I64, I32, U64, M = F.TYPE_STRING, F.TYPE_BOOL, F.TYPE_INT64, F.TYPE_INT32, F.TYPE_UINT64, F.TYPE_MESSAGE
U32, E = F.TYPE_UINT32, F.TYPE_ENUM
REP = "repeated"

# message -> {field: (number, type, repeated?, message type full name or None)}
MESSAGES: dict[str, dict[str, tuple]] = {
    # device plugin v1beta1
    "v1beta1.DevicePluginOptions": {"pre_start_required": (1, B), "get_preferred_allocation_available": (2, B)},
    "v1beta1.RegisterRequest": {
        "version": (1, S),
        "endpoint": (2, S),
        "resource_name": (3, S),
        "options": (4, M, None, "v1beta1.DevicePluginOptions"),
    },
    "v1beta1.Empty": {},
    "v1beta1.ListAndWatchResponse": {"devices": (1, M, REP, "v1beta1.Device")},
    "v1beta1.Device": {"ID": (1, S), "health": (2, S), "topology": (3, M, None, "v1beta1.TopologyInfo")},
    "v1beta1.TopologyInfo": {"nodes": (1, M, REP, "v1beta1.NUMANode")},
    "v1beta1.NUMANode": {"ID": (1, I64)},
    "v1beta1.PreStartContainerRequest": {"devices_ids": (1, S, REP)},
    "v1beta1.PreStartContainerResponse": {},
    "v1beta1.PreferredAllocationRequest": {
        "container_requests": (1, M, REP, "v1beta1.ContainerPreferredAllocationRequest")
    },
    "v1beta1.ContainerPreferredAllocationRequest": {
        "available_deviceIDs": (1, S, REP),
        "must_include_deviceIDs": (2, S, REP),
        "allocation_size": (3, I32),
    },
    "v1beta1.PreferredAllocationResponse": {
        "container_responses": (1, M, REP, "v1beta1.ContainerPreferredAllocationResponse")
    },
    "v1beta1.ContainerPreferredAllocationResponse": {"deviceIDs": (1, S, REP)},
    "v1beta1.AllocateRequest": {"container_requests": (1, M, REP, "v1beta1.ContainerAllocateRequest")},
    "v1beta1.ContainerAllocateRequest": {"devices_ids": (1, S, REP)},
    "v1beta1.AllocateResponse": {"container_responses": (1, M, REP, "v1beta1.ContainerAllocateResponse")},
    "v1beta1.ContainerAllocateResponse": {
        "envs": (1, "map<string,string>"),
        "mounts": (2, M, REP, "v1beta1.Mount"),
        "devices": (3, M, REP, "v1beta1.DeviceSpec"),
        "annotations": (4, "map<string,string>"),
        "cdi_devices": (5, M, REP, "v1beta1.CDIDevice"),
    },
    "v1beta1.Mount": {"container_path": (1, S), "host_path": (2, S), "read_only": (3, B)},
    "v1beta1.DeviceSpec": {"container_path": (1, S), "host_path": (2, S), "permissions": (3, S)},
    "v1beta1.CDIDevice": {"name": (1, S)},
    # pod resources v1
    "v1.ListPodResourcesRequest": {},
    "v1.AllocatableResourcesRequest": {},
    "v1.ListPodResourcesResponse": {"pod_resources": (1, M, REP, "v1.PodResources")},
    "v1.AllocatableResourcesResponse": {
        "devices": (1, M, REP, "v1.ContainerDevices"),
        "cpu_ids": (2, I64, REP),
        "memory": (3, M, REP, "v1.ContainerMemory"),
    },
    "v1.PodResources": {"name": (1, S), "namespace": (2, S), "containers": (3, M, REP, "v1.ContainerResources")},
    "v1.ContainerResources": {
        "name": (1, S),
        "devices": (2, M, REP, "v1.ContainerDevices"),
        "cpu_ids": (3, I64, REP),
        "memory": (4, M, REP, "v1.ContainerMemory"),
        "dynamic_resources": (5, M, REP, "v1.DynamicResource"),
    },
    "v1.ContainerMemory": {"memory_type": (1, S), "size": (2, U64), "topology": (3, M, None, "v1.TopologyInfo")},
    "v1.ContainerDevices": {
        "resource_name": (1, S),
        "device_ids": (2, S, REP),
        "topology": (3, M, None, "v1.TopologyInfo"),
    },
    "v1.TopologyInfo": {"nodes": (1, M, REP, "v1.NUMANode")},
    "v1.NUMANode": {"ID": (1, I64)},
    "v1.DynamicResource": {
        "claim_name": (2, S),
        "claim_namespace": (3, S),
        "claim_resources": (4, M, REP, "v1.ClaimResource"),
    },
    "v1.ClaimResource": {
        "cdi_devices": (1, M, REP, "v1.CDIDevice"),
        "driver_name": (2, S),
        "pool_name": (3, S),
        "device_name": (4, S),
    },
    "v1.CDIDevice": {"name": (1, S)},
    "v1.GetPodResourcesRequest": {"pod_name": (1, S), "pod_namespace": (2, S)},
    "v1.GetPodResourcesResponse": {"pod_resources": (1, M, None, "v1.PodResources")},
    # pod resources v1alpha1
    "v1alpha1.ListPodResourcesRequest": {},
    "v1alpha1.ListPodResourcesResponse": {"pod_resources": (1, M, REP, "v1alpha1.PodResources")},
    "v1alpha1.PodResources": {
        "name": (1, S),
        "namespace": (2, S),
        "containers": (3, M, REP, "v1alpha1.ContainerResources"),
    },
    "v1alpha1.ContainerResources": {"name": (1, S), "devices": (2, M, REP, "v1alpha1.ContainerDevices")},
    "v1alpha1.ContainerDevices": {"resource_name": (1, S), "device_ids": (2, S, REP)},
    # plugin-watcher registration
    "pluginregistration.PluginInfo": {
        "type": (1, S),
        "name": (2, S),
        "endpoint": (3, S),
        "supported_versions": (4, S, REP),
    },
    "pluginregistration.RegistrationStatus": {"plugin_registered": (1, B), "error": (2, S)},
    "pluginregistration.RegistrationStatusResponse": {},
    "pluginregistration.InfoRequest": {},
    # CRI runtime.v1 (k8s.io/cri-api pkg/apis/runtime/v1/api.proto), the RuntimeService subset devctl reads
    "runtime.v1.PodSandboxStateValue": {"state": (1, E)},
    "runtime.v1.PodSandboxFilter": {
        "id": (1, S),
        "state": (2, M, None, "runtime.v1.PodSandboxStateValue"),
        "label_selector": (3, "map<string,string>"),
    },
    "runtime.v1.ListPodSandboxRequest": {"filter": (1, M, None, "runtime.v1.PodSandboxFilter")},
    "runtime.v1.PodSandboxMetadata": {"name": (1, S), "uid": (2, S), "namespace": (3, S), "attempt": (4, U32)},
    "runtime.v1.PodSandbox": {
        "id": (1, S),
        "metadata": (2, M, None, "runtime.v1.PodSandboxMetadata"),
        "state": (3, E),
        "created_at": (4, I64),
        "labels": (5, "map<string,string>"),
        "annotations": (6, "map<string,string>"),
        "runtime_handler": (7, S),
    },
    "runtime.v1.ListPodSandboxResponse": {"items": (1, M, REP, "runtime.v1.PodSandbox")},
    "runtime.v1.ContainerStateValue": {"state": (1, E)},
    "runtime.v1.ContainerFilter": {
        "id": (1, S),
        "state": (2, M, None, "runtime.v1.ContainerStateValue"),
        "pod_sandbox_id": (3, S),
        "label_selector": (4, "map<string,string>"),
    },
    "runtime.v1.ListContainersRequest": {"filter": (1, M, None, "runtime.v1.ContainerFilter")},
    "runtime.v1.ContainerMetadata": {"name": (1, S), "attempt": (2, U32)},
    "runtime.v1.ImageSpec": {"image": (1, S), "annotations": (2, "map<string,string>")},
    "runtime.v1.Container": {
        "id": (1, S),
        "pod_sandbox_id": (2, S),
        "metadata": (3, M, None, "runtime.v1.ContainerMetadata"),
        "image": (4, M, None, "runtime.v1.ImageSpec"),
        "image_ref": (5, S),
        "state": (6, E),
        "created_at": (7, I64),
        "labels": (8, "map<string,string>"),
        "annotations": (9, "map<string,string>"),
    },
    "runtime.v1.ListContainersResponse": {"containers": (1, M, REP, "runtime.v1.Container")},
    "runtime.v1.ContainerStatusRequest": {"container_id": (1, S), "verbose": (2, B)},
    "runtime.v1.ContainerStatus": {
        "id": (1, S),
        "metadata": (2, M, None, "runtime.v1.ContainerMetadata"),
        "state": (3, E),
        "created_at": (4, I64),
        "started_at": (5, I64),
        "finished_at": (6, I64),
        "exit_code": (7, I32),
        "image": (8, M, None, "runtime.v1.ImageSpec"),
        "image_ref": (9, S),
        "reason": (10, S),
        "message": (11, S),
        "labels": (12, "map<string,string>"),
        "annotations": (13, "map<string,string>"),
    },
    "runtime.v1.ContainerStatusResponse": {
        "status": (1, M, None, "runtime.v1.ContainerStatus"),
        "info": (2, "map<string,string>"),
    },
}

# full method path -> (request, response, server streaming?)
METHODS = {
    "/v1beta1.Registration/Register": ("v1beta1.RegisterRequest", "v1beta1.Empty", False),
    "/v1beta1.DevicePlugin/GetDevicePluginOptions": ("v1beta1.Empty", "v1beta1.DevicePluginOptions", False),
    "/v1beta1.DevicePlugin/ListAndWatch": ("v1beta1.Empty", "v1beta1.ListAndWatchResponse", True),
    "/v1beta1.DevicePlugin/GetPreferredAllocation": (
        "v1beta1.PreferredAllocationRequest",
        "v1beta1.PreferredAllocationResponse",
        False,
    ),
    "/v1beta1.DevicePlugin/Allocate": ("v1beta1.AllocateRequest", "v1beta1.AllocateResponse", False),
    "/v1beta1.DevicePlugin/PreStartContainer": (
        "v1beta1.PreStartContainerRequest",
        "v1beta1.PreStartContainerResponse",
        False,
    ),
    "/v1.PodResourcesLister/List": ("v1.ListPodResourcesRequest", "v1.ListPodResourcesResponse", False),
    "/v1.PodResourcesLister/GetAllocatableResources": (
        "v1.AllocatableResourcesRequest",
        "v1.AllocatableResourcesResponse",
        False,
    ),
    "/v1.PodResourcesLister/Get": ("v1.GetPodResourcesRequest", "v1.GetPodResourcesResponse", False),
    "/v1alpha1.PodResourcesLister/List": (
        "v1alpha1.ListPodResourcesRequest",
        "v1alpha1.ListPodResourcesResponse",
        False,
    ),
    "/pluginregistration.Registration/GetInfo": (
        "pluginregistration.InfoRequest",
        "pluginregistration.PluginInfo",
        False,
    ),
    "/runtime.v1.RuntimeService/ListPodSandbox": (
        "runtime.v1.ListPodSandboxRequest",
        "runtime.v1.ListPodSandboxResponse",
        False,
    ),
    "/runtime.v1.RuntimeService/ListContainers": (
        "runtime.v1.ListContainersRequest",
        "runtime.v1.ListContainersResponse",
        False,
    ),
    "/runtime.v1.RuntimeService/ContainerStatus": (
        "runtime.v1.ContainerStatusRequest",
        "runtime.v1.ContainerStatusResponse",
        False,
    ),
    "/pluginregistration.Registration/NotifyRegistrationStatus": (
        "pluginregistration.RegistrationStatus",
        "pluginregistration.RegistrationStatusResponse",
        False,
    ),
}

FILES = [cri.DESCRIPTOR, dp.DESCRIPTOR, v1.DESCRIPTOR, v1alpha1.DESCRIPTOR, reg.DESCRIPTOR]


def _all_messages():
    out = {}
    for fd in FILES:
        for m in fd.message_types_by_name.values():
            out[m.full_name] = m
    return out


def _services():
    return [s for fd in FILES for s in fd.services_by_name.values()]


def test_every_message_is_in_the_table_and_no_more():
    assert sorted(_all_messages()) == sorted(MESSAGES)


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_fields_match_the_contract(name):
    message = _all_messages()[name]
    expected = MESSAGES[name]
    got = {f.name: f for f in message.fields}
    assert sorted(got) == sorted(expected), f"{name}: fields differ"
    for field_name, spec in expected.items():
        f = got[field_name]
        assert f.number == spec[0], f"{name}.{field_name}: number"
        if spec[1] == "map<string,string>":
            entry = f.message_type
            assert entry.GetOptions().map_entry, f"{name}.{field_name}: not a map"
            assert [(x.name, x.type) for x in entry.fields] == [("key", S), ("value", S)]
            continue
        assert f.type == spec[1], f"{name}.{field_name}: type"
        repeated = len(spec) > 2 and spec[2] == REP
        assert f.is_repeated == repeated, f"{name}.{field_name}: repeated"
        if spec[1] == M:
            assert f.message_type.full_name == spec[3], f"{name}.{field_name}: message type"


def test_dynamic_resource_reserves_the_old_class_name_field():
    message = _all_messages()["v1.DynamicResource"]
    assert 1 not in {f.number for f in message.fields}


def test_method_paths_match_the_contract():
    got = {}
    for service in _services():
        for method in service.methods:
            got[f"/{service.full_name}/{method.name}"] = (
                method.input_type.full_name,
                method.output_type.full_name,
                method.server_streaming,
            )
            assert not method.client_streaming
    assert got == METHODS


def test_generated_stubs_use_the_same_paths():
    """The grpc stubs carry the paths as strings; a client built from them must dial the contract's paths."""
    import inspect

    from devctl.api.cri.runtime.v1 import api_pb2_grpc as crig
    from devctl.api.deviceplugin.v1beta1 import api_pb2_grpc as dpg
    from devctl.api.pluginregistration.v1 import api_pb2_grpc as regg
    from devctl.api.podresources.v1 import api_pb2_grpc as v1g
    from devctl.api.podresources.v1alpha1 import api_pb2_grpc as v1ag

    text = "".join(inspect.getsource(m) for m in (crig, dpg, regg, v1g, v1ag))
    for path in METHODS:
        assert f"'{path}'" in text, path
