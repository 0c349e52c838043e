"""Scenario files: the packaged default, the documented extensions, and one clear line for each bad field."""

from __future__ import annotations

from pathlib import Path

import pytest

from devctl.lab.sim.scenario import ScenarioError, default_scenario, load_scenario, parse_scenario, pod_uid
from devctl.model import ClaimDevice, ContainerMemory, DynamicResource, Hugepages

MINIMAL = {
    "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "8Gi"}, {"id": 1, "cpus": "4-7", "memory": "8Gi"}],
    "reserved_cpus": "0",
    "resources": [{"name": "example.com/widget", "count": 2, "numa": [0, 1]}],
    "pods": [
        {
            "namespace": "team",
            "name": "job",
            "containers": [{"name": "main", "requests": {"example.com/widget": 1}, "cpus": "1-2"}],
        }
    ],
}


def with_pod_container(**fields: object) -> dict:
    data = {**MINIMAL, "pods": [{"namespace": "team", "name": "job", "containers": [{"name": "main", **fields}]}]}
    return data


def test_default_scenario_is_the_documented_node() -> None:
    s = default_scenario()
    assert [n.id for n in s.numa_nodes] == [0, 1]
    assert len(s.cpus) == 32 and s.reserved_cpus == (0, 1) and len(s.allocatable_cpus) == 30
    assert all(n.memory_bytes == 64 * 2**30 for n in s.numa_nodes)
    gpu = s.resource("nvidia.com/gpu")
    assert gpu is not None and len(gpu.devices) == 8
    assert [d.id for d in gpu.devices if not d.healthy] == ["GPU-5"]
    vf = s.resource("intel.com/sriov_netdevice")
    assert vf is not None and len(vf.devices) == 8 and vf.pre_start and not vf.preferred_allocation
    foo = s.resource("hardware-vendor.example/foo")
    assert foo is not None and [d.numa_nodes for d in foo.devices] == [(), ()]
    assert {p.namespace for p in s.pods} == {"ml", "inference", "chat", "monitoring"} and len(s.pods) == 8
    (driver,) = s.dra.drivers
    assert [(d.name, d.numa_nodes, d.health) for d in driver.devices] == [
        ("gpu-0", (0,), "Healthy"),
        ("gpu-1", (0,), "Healthy"),
        ("gpu-2", (1,), "Healthy"),
        ("gpu-3", (1,), "Unhealthy"),
    ]
    held = {d for c in s.dra.claims for d in c.devices}
    assert "gpu-3" in held and {c.pod for c in s.dra.claims} == {("inference", "embed-0"), ("ml", "train-1")}
    assert {d.numa_node for d in s.pci_devices} == {0, 1}


def test_extensions_are_read() -> None:
    data = {
        **MINIMAL,
        "numa_nodes": [{"id": 0, "cpus": "0-7", "memory": "1.5Gi", "hugepages": [{"size": "2Mi", "total": 8}]}],
        "kubelet": {"get_enabled": False, "api": "v1alpha1", "dynamic_resources": False},
        "pci_devices": [{"address": "0000:3B:00.0", "numa_node": 0, "vendor": "0x10de", "driver": "nvidia"}],
        "pods": [
            {
                "name": "p",
                "uid": "1234",
                "containers": [
                    {
                        "name": "c",
                        "memory": [{"size": "1Gi", "numa": 0}, {"type": "hugepages-2Mi", "size": "4Mi", "numa": [0]}],
                        "dynamic_resources": [
                            {"claim_name": "cl", "devices": [{"driver": "d", "pool": "p", "device": "x"}]}
                        ],
                    }
                ],
            }
        ],
    }
    s = parse_scenario(data)
    assert s.numa_nodes[0].memory_bytes == 1536 * 2**20
    assert s.numa_nodes[0].hugepages == (Hugepages(size_kb=2048, total=8, free=8),)
    assert (s.kubelet.get_enabled, s.kubelet.api, s.kubelet.dynamic_resources) == (False, "v1alpha1", False)
    assert s.pci_devices[0].address == "0000:3b:00.0" and s.pci_devices[0].driver == "nvidia"
    pod = s.pods[0]
    assert (pod.namespace, pod.uid) == ("default", "1234")
    c = pod.containers[0]
    assert c.memory == (
        ContainerMemory("memory", 2**30, (0,)),
        ContainerMemory("hugepages-2Mi", 4 * 2**20, (0,)),
    )
    # claim_namespace defaults to the pod's namespace
    assert c.dynamic_resources == (DynamicResource("cl", "default", (ClaimDevice("d", "p", "x"),)),)


def test_pod_uid_is_stable_and_distinct() -> None:
    s1, s2 = parse_scenario(MINIMAL), parse_scenario(MINIMAL)
    assert s1.pods[0].uid == s2.pods[0].uid == pod_uid("team", "job")
    assert pod_uid("team", "job") != pod_uid("team", "job2")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([1, 2], "must be a mapping"),
        ({**MINIMAL, "pod": []}, "unknown field 'pod'"),
        ({**MINIMAL, "numa_nodes": [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "3-5"}]}, "numa_nodes[1].cpus: CPU 3"),
        ({**MINIMAL, "numa_nodes": [{"id": 0, "cpus": "3-1"}]}, "numa_nodes[0].cpus: invalid CPU list"),
        ({**MINIMAL, "numa_nodes": [{"id": 0, "cpus": "0-3", "memory": "lots"}]}, "numa_nodes[0].memory: invalid"),
        ({**MINIMAL, "reserved_cpus": "0-9"}, "reserved_cpus: CPUs 8-9 are on no NUMA node"),
        ({**MINIMAL, "resources": [{"name": "widget"}]}, "resources[0]: 'widget' is not an extended resource name"),
        ({**MINIMAL, "resources": [{"name": "a.example/x"}, {"name": "a.example/x"}]}, "resources[1].name"),
        ({**MINIMAL, "kubelet": {"api": "v2"}}, "kubelet.api: 'v2'"),
        ({**MINIMAL, "kubelet": {"get_enabled": "yes"}}, "kubelet.get_enabled: expected true or false"),
        ({**MINIMAL, "pci_devices": [{"address": "3b:00"}]}, "pci_devices[0].address"),
        (with_pod_container(requests={"example.com/gadget": 1}), "requests.example.com/gadget: no resource"),
        (with_pod_container(requests={"example.com/widget": "two"}), "requests.example.com/widget: expected an int"),
        (with_pod_container(cpus="0-1"), "pods[0].containers[0].cpus: CPUs 0 are reserved"),
        (with_pod_container(memory=[{"size": "1Gi", "numa": [5]}]), "memory[0].numa: NUMA node 5"),
        (with_pod_container(memory=[{"numa": [0]}]), "memory[0]: needs a 'size'"),
        (with_pod_container(dynamic_resources=[{"devices": []}]), "dynamic_resources[0]: needs a 'claim_name'"),
        (with_pod_container(gpus=1), "pods[0].containers[0]: unknown field 'gpus'"),
        ({**MINIMAL, "pods": [{"name": "Bad_Name", "containers": [{"name": "c"}]}]}, "pods[0].name: 'Bad_Name'"),
        ({**MINIMAL, "pods": [{"name": "p"}]}, "pods[0].containers: a pod needs at least one container"),
        (
            {
                **MINIMAL,
                "pods": [
                    {"name": "a", "containers": [{"name": "c", "cpus": "1-2"}]},
                    {"name": "b", "containers": [{"name": "c", "cpus": "2"}]},
                ],
            },
            "pods[1].containers[0].cpus: CPU 2 is already exclusive to default/a/c",
        ),
    ],
)
def test_bad_scenarios_name_the_field(data: object, expected: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data)  # type: ignore[arg-type]
    message = str(err.value)
    assert expected in message
    assert "\n" not in message


def test_load_scenario_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"nope\.yaml: no such file"):
        load_scenario(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("numa_nodes: [\n  {id: 0\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: not valid YAML: line \d+") as err:
        load_scenario(bad)
    assert "\n" not in str(err.value)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("resources:\n  - name: nvidia.com/gpu\n    count: 1\n    devices: [{numa: 0}]\n")
    with pytest.raises(ScenarioError, match=r"wrong\.yaml: resources\[0\]: nvidia.com/gpu: each device needs an 'id'"):
        load_scenario(wrong)


def test_load_scenario_reads_a_file(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(MINIMAL))
    s = load_scenario(path)
    assert s.resources[0].resource == "example.com/widget"
    assert [d.numa_nodes for d in s.resources[0].devices] == [(0,), (1,)]
    assert s.pods[0].containers[0].requests == {"example.com/widget": 1}
