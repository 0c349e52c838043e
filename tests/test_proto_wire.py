"""Our .proto files must be wire-identical to upstream: checked against a table written from the contract.

The table below is transcribed from the upstream APIs (kubelet device plugin, pod-resources,
plugin registration, DRA kubelet plugin and DRA health, and the CRI runtime.v1 subset
from k8s.io/cri-api), not from
the generated code, so a renumbered field or a renamed service fails here.
"""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import FieldDescriptor as F

from devctl.api.cri.runtime.v1 import api_pb2 as cri
from devctl.api.deviceplugin.v1beta1 import api_pb2 as dp
from devctl.api.dra.v1 import api_pb2 as dra_v1
from devctl.api.dra.v1beta1 import api_pb2 as dra_v1beta1
from devctl.api.drahealth.v1 import api_pb2 as health_v1
from devctl.api.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from devctl.api.pluginregistration.v1 import api_pb2 as reg
from devctl.api.podresources.v1 import api_pb2 as v1
from devctl.api.podresources.v1alpha1 import api_pb2 as v1alpha1

S, B, I64, I32, U64, M = F.TYPE_STRING, F.TYPE_BOOL, F.TYPE_INT64, F.TYPE_INT32, F.TYPE_UINT64, F.TYPE_MESSAGE
U32, E = F.TYPE_UINT32, F.TYPE_ENUM
REP = "repeated"
OPT = "optional"  # proto3 `optional`: presence is tracked (DRA v1 Device.share_id)
DRA_V1 = "k8s.io.kubelet.pkg.apis.dra.v1"
DRA_V1BETA1 = "k8s.io.kubelet.pkg.apis.dra.v1beta1"


def _dra_messages(pkg: str, share_id: bool) -> dict[str, dict[str, tuple]]:
    """The DRA kubelet plugin messages (dra-contract.md): the same numbers in v1 and v1beta1, share_id only in v1."""
    device = {"request_names": (1, S, REP), "pool_name": (2, S), "device_name": (3, S), "cdi_device_ids": (4, S, REP)}
    if share_id:
        device["share_id"] = (5, S, OPT)
    return {
        f"{pkg}.NodePrepareResourcesRequest": {"claims": (1, M, REP, f"{pkg}.Claim")},
        f"{pkg}.NodePrepareResourcesResponse": {"claims": (1, f"map<string,{pkg}.NodePrepareResourceResponse>")},
        f"{pkg}.NodePrepareResourceResponse": {"devices": (1, M, REP, f"{pkg}.Device"), "error": (2, S)},
        f"{pkg}.Device": device,
        f"{pkg}.NodeUnprepareResourcesRequest": {"claims": (1, M, REP, f"{pkg}.Claim")},
        f"{pkg}.NodeUnprepareResourcesResponse": {"claims": (1, f"map<string,{pkg}.NodeUnprepareResourceResponse>")},
        f"{pkg}.NodeUnprepareResourceResponse": {"error": (1, S)},
        f"{pkg}.Claim": {"namespace": (1, S), "uid": (2, S), "name": (3, S)},
    }


def _health_messages(pkg: str) -> dict[str, dict[str, tuple]]:
    """DRA health (KEP-4680): v1alpha1 and its v1 copy carry the same messages."""
    return {
        f"{pkg}.NodeWatchResourcesRequest": {},
        f"{pkg}.NodeWatchResourcesResponse": {"devices": (1, M, REP, f"{pkg}.DeviceHealth")},
        f"{pkg}.DeviceIdentifier": {"pool_name": (1, S), "device_name": (2, S)},
        f"{pkg}.DeviceHealth": {
            "device": (1, M, None, f"{pkg}.DeviceIdentifier"),
            "health": (2, E, None, f"{pkg}.HealthStatus"),
            "last_updated_time": (3, I64),
            "health_check_timeout_seconds": (4, I64),
            "message": (5, S),
        },
    }


# enum -> {value name: number}
ENUMS = {
    "v1alpha1.HealthStatus": {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2},
    "v1.HealthStatus": {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2},
    # CRI runtime.v1
    "runtime.v1.PodSandboxState": {"SANDBOX_READY": 0, "SANDBOX_NOTREADY": 1},
    "runtime.v1.ContainerState": {
        "CONTAINER_CREATED": 0,
        "CONTAINER_RUNNING": 1,
        "CONTAINER_EXITED": 2,
        "CONTAINER_UNKNOWN": 3,
    },
}

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
        "share_id": (5, S, OPT),
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
    # DRA kubelet plugin v1 and v1beta1, DRA health v1alpha1 and v1
    **_dra_messages(DRA_V1, share_id=True),
    **_dra_messages(DRA_V1BETA1, share_id=False),
    **_health_messages("v1alpha1"),
    **_health_messages("v1"),
    # CRI runtime.v1 (k8s.io/cri-api pkg/apis/runtime/v1/api.proto), the RuntimeService subset devctl reads
    "runtime.v1.PodSandboxStateValue": {"state": (1, E, None, "runtime.v1.PodSandboxState")},
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
        "state": (3, E, None, "runtime.v1.PodSandboxState"),
        "created_at": (4, I64),
        "labels": (5, "map<string,string>"),
        "annotations": (6, "map<string,string>"),
        "runtime_handler": (7, S),
    },
    "runtime.v1.ListPodSandboxResponse": {"items": (1, M, REP, "runtime.v1.PodSandbox")},
    "runtime.v1.ContainerStateValue": {"state": (1, E, None, "runtime.v1.ContainerState")},
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
        "state": (6, E, None, "runtime.v1.ContainerState"),
        "created_at": (7, I64),
        "labels": (8, "map<string,string>"),
        "annotations": (9, "map<string,string>"),
    },
    "runtime.v1.ListContainersResponse": {"containers": (1, M, REP, "runtime.v1.Container")},
    "runtime.v1.ContainerStatusRequest": {"container_id": (1, S), "verbose": (2, B)},
    "runtime.v1.ContainerStatus": {
        "id": (1, S),
        "metadata": (2, M, None, "runtime.v1.ContainerMetadata"),
        "state": (3, E, None, "runtime.v1.ContainerState"),
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
    f"/{DRA_V1}.DRAPlugin/NodePrepareResources": (
        f"{DRA_V1}.NodePrepareResourcesRequest",
        f"{DRA_V1}.NodePrepareResourcesResponse",
        False,
    ),
    f"/{DRA_V1}.DRAPlugin/NodeUnprepareResources": (
        f"{DRA_V1}.NodeUnprepareResourcesRequest",
        f"{DRA_V1}.NodeUnprepareResourcesResponse",
        False,
    ),
    f"/{DRA_V1BETA1}.DRAPlugin/NodePrepareResources": (
        f"{DRA_V1BETA1}.NodePrepareResourcesRequest",
        f"{DRA_V1BETA1}.NodePrepareResourcesResponse",
        False,
    ),
    f"/{DRA_V1BETA1}.DRAPlugin/NodeUnprepareResources": (
        f"{DRA_V1BETA1}.NodeUnprepareResourcesRequest",
        f"{DRA_V1BETA1}.NodeUnprepareResourcesResponse",
        False,
    ),
    "/v1alpha1.DRAResourceHealth/NodeWatchResources": (
        "v1alpha1.NodeWatchResourcesRequest",
        "v1alpha1.NodeWatchResourcesResponse",
        True,
    ),
    "/v1.DRAResourceHealth/NodeWatchResources": (
        "v1.NodeWatchResourcesRequest",
        "v1.NodeWatchResourcesResponse",
        True,
    ),
}

FILES = [
    cri.DESCRIPTOR,
    dp.DESCRIPTOR,
    v1.DESCRIPTOR,
    v1alpha1.DESCRIPTOR,
    reg.DESCRIPTOR,
    dra_v1.DESCRIPTOR,
    dra_v1beta1.DESCRIPTOR,
    health_v1alpha1.DESCRIPTOR,
    health_v1.DESCRIPTOR,
]


def _all_messages():
    out = {}
    for fd in FILES:
        for m in fd.message_types_by_name.values():
            if not m.GetOptions().map_entry:
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
        if isinstance(spec[1], str) and spec[1].startswith("map<string,"):
            entry = f.message_type
            assert entry.GetOptions().map_entry, f"{name}.{field_name}: not a map"
            value = spec[1][len("map<string,") : -1]
            key, val = entry.fields
            assert (key.name, key.type, val.name) == ("key", S, "value")
            got_value = "string" if val.type == S else val.message_type.full_name
            assert got_value == value, f"{name}.{field_name}: map value"
            continue
        assert f.type == spec[1], f"{name}.{field_name}: type"
        repeated = len(spec) > 2 and spec[2] == REP
        assert f.is_repeated == repeated, f"{name}.{field_name}: repeated"
        optional = len(spec) > 2 and spec[2] == OPT
        assert f.has_presence == (optional or (spec[1] == M and not repeated)), f"{name}.{field_name}: optional"
        if spec[1] == M:
            assert f.message_type.full_name == spec[3], f"{name}.{field_name}: message type"
        if spec[1] == E:
            assert f.enum_type.full_name == spec[3], f"{name}.{field_name}: enum type"


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_enums_match_the_contract(name):
    enums = {e.full_name: e for fd in FILES for e in fd.enum_types_by_name.values()}
    assert {v.name: v.number for v in enums[name].values} == ENUMS[name]


def test_every_enum_is_in_the_table():
    assert sorted(e.full_name for fd in FILES for e in fd.enum_types_by_name.values()) == sorted(ENUMS)


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
    from devctl.api.dra.v1 import api_pb2_grpc as drag
    from devctl.api.dra.v1beta1 import api_pb2_grpc as drabg
    from devctl.api.drahealth.v1 import api_pb2_grpc as healthg
    from devctl.api.drahealth.v1alpha1 import api_pb2_grpc as healthag
    from devctl.api.pluginregistration.v1 import api_pb2_grpc as regg
    from devctl.api.podresources.v1 import api_pb2_grpc as v1g
    from devctl.api.podresources.v1alpha1 import api_pb2_grpc as v1ag

    text = "".join(inspect.getsource(m) for m in (crig, dpg, regg, v1g, v1ag, drag, drabg, healthg, healthag))
    for path in METHODS:
        assert f"'{path}'" in text, path
