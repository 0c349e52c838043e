"""The simulated node's DRA and device-plugin functions: each on a host bridge of its own NUMA node.

A real host's host bridge belongs to one socket; the simulator used to put every simulated function
(NUMA 0, 1 and none) on the one bus 0000:d0, which hwloc placed on Package 0 against devctl's reading.
"""

from __future__ import annotations

from devctl.lab.sim.drasysfs import VENDOR, char_devices
from devctl.lab.sim.scenario import default_scenario, parse_scenario


def _functions(scenario_data: dict[str, object] | None = None) -> dict[tuple[int, int], tuple[str, int, str]]:
    scenario = default_scenario() if scenario_data is None else parse_scenario(scenario_data)
    chars = char_devices(scenario.dra, scenario.resources, scenario.pci_devices)
    return {key: (pci.address, pci.numa_node, pci.vendor_id) for key, pci in chars.items()}


def test_default_dra_gpus_sit_on_their_own_numa_nodes_bridges() -> None:
    scenario = default_scenario()
    (driver,) = scenario.dra.drivers
    functions = _functions()
    dra = [functions[(driver.major, minor)][:2] for minor in range(len(driver.devices))]
    assert dra == [("0000:d0:00.0", 0), ("0000:d0:01.0", 0), ("0000:e0:00.0", 1), ("0000:e0:01.0", 1)]
    # one host bridge (pci<domain>:<bus>) never holds two NUMA nodes, nor a node and an unknown one
    by_bridge: dict[str, set[int]] = {}
    for address, numa, _ in functions.values():
        by_bridge.setdefault(address.rsplit(":", 1)[0], set()).add(numa)
    assert {bridge: nodes for bridge, nodes in by_bridge.items() if len(nodes) > 1} == {}
    assert all(numa >= 0 for _, numa, _ in functions.values())
    simulated = {v for _, _, v in functions.values() if v not in ("0x10de", "0x8086")}
    assert simulated == {VENDOR} and VENDOR not in ("0x0001", "0x0000", "0xffff")


def test_default_foo_devices_without_numa_get_no_function() -> None:
    scenario = default_scenario()
    foo = next(r for r in scenario.resources if r.resource == "hardware-vendor.example/foo")
    assert len(foo.devices) == 2 and all(not d.numa_nodes for d in foo.devices)
    # the simulated functions are the 4 DRA GPUs alone: foo-0 and foo-1 have no place, so no link
    simulated = sorted(a for a, _, vendor in _functions().values() if vendor == VENDOR)
    assert simulated == ["0000:d0:00.0", "0000:d0:01.0", "0000:e0:00.0", "0000:e0:01.0"]


def test_the_default_kernel_log_names_gpu_3s_address() -> None:
    """The Xid 79 story follows gpu-3 (NUMA 1, the second function on 0000:e0)."""
    scenario = default_scenario()
    (driver,) = scenario.dra.drivers
    address = _functions()[(driver.major, 3)][0]
    assert address == "0000:e0:01.0"
    texts = [line.text for line in scenario.kernel]
    assert any("Xid (PCI:0000:e0:01): 79" in t for t in texts)
    assert not any("0000:d0:03" in t for t in texts)


def test_a_third_and_fourth_numa_node_get_buses_of_their_own() -> None:
    data = {
        "numa_nodes": [{"id": i, "cpus": str(i)} for i in range(4)],
        "dra": {
            "drivers": [
                {
                    "name": "gpu.example.com",
                    "pool": "p",
                    "devices": [*({"name": f"g{i}", "numa": i} for i in range(4)), {"name": "lost"}],  # no NUMA
                }
            ]
        },
    }
    functions = sorted(_functions(data).values())
    assert [(a, n) for a, n, _ in functions] == [
        ("0000:d0:00.0", 0),
        ("0000:e0:00.0", 1),
        ("0000:f0:00.0", 2),
        ("0001:d0:00.0", 3),
    ]
