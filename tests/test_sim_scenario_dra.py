"""The scenario's dra: section, and unknown keys anywhere in a scenario named with their path."""

from __future__ import annotations

import pytest
from test_sim_scenario import MINIMAL

from devctl.lab.sim.scenario import ScenarioError, parse_scenario
from devctl.lab.sim.scenario_dra import claim_uid

DRIVER = {
    "name": "gpu.example.com",
    "devices": [{"name": "gpu-0", "numa": 0}, {"name": "gpu-1", "numa": 1, "health": "Unhealthy"}],
}
CLAIM = {"name": "job-gpu", "driver": "gpu.example.com", "devices": ["gpu-1"], "pod": "team/job"}


def with_dra(**dra: object) -> dict:
    return {**MINIMAL, "dra": dra}


def test_the_dra_section_is_read() -> None:
    s = parse_scenario(with_dra(drivers=[DRIVER], claims=[CLAIM]))
    (driver,) = s.dra.drivers
    assert (driver.driver, driver.pool, driver.health, driver.versions) == (
        "gpu.example.com",
        "sim-node",
        True,
        ("v1", "v1beta1"),
    )
    assert [(d.name, d.numa_nodes, d.health) for d in driver.devices] == [
        ("gpu-0", (0,), "Healthy"),
        ("gpu-1", (1,), "Unhealthy"),
    ]
    (claim,) = s.dra.claims
    assert (claim.namespace, claim.name, claim.pod, claim.container) == ("team", "job-gpu", ("team", "job"), "main")
    assert claim.uid == claim_uid("team", "job-gpu")


def test_counted_devices_and_options() -> None:
    driver = {
        "name": "nic.example.com",
        "pool": "p",
        "count": 3,
        "numa": [0, 0, 1],
        "health_stream": False,
        "health_timeout": 5,
        "versions": ["v1beta1"],
    }
    (d,) = parse_scenario(with_dra(drivers=[driver])).dra.drivers
    assert [(x.name, x.numa_nodes) for x in d.devices] == [("nic-0", (0,)), ("nic-1", (0,)), ("nic-2", (1,))]
    assert (d.health, d.health_timeout, d.versions, d.pool) == (False, 5, ("v1beta1",), "p")


@pytest.mark.parametrize(
    "data, expected",
    [
        (with_dra(driver=[]), "dra: unknown field 'driver'"),
        (with_dra(drivers=[{**DRIVER, "colour": "red"}]), "dra.drivers[0]: unknown field 'colour'"),
        (
            with_dra(drivers=[{**DRIVER, "devices": [{"name": "g", "numa_node": 0}]}]),
            "dra.drivers[0].devices[0]: unknown field 'numa_node'",
        ),
        (with_dra(drivers=[DRIVER], claims=[{**CLAIM, "pods": "x"}]), "dra.claims[0]: unknown field 'pods'"),
        (with_dra(drivers=[DRIVER, DRIVER]), "dra.drivers[1].name: gpu.example.com is listed twice"),
        (with_dra(drivers=[{**DRIVER, "versions": ["v1alpha3"]}]), "dra.drivers[0].versions"),
        (
            with_dra(drivers=[{**DRIVER, "devices": [{"name": "g", "health": "Sick"}]}]),
            "dra.drivers[0].devices[0].health",
        ),
        (
            with_dra(drivers=[DRIVER], claims=[{**CLAIM, "pod": "team/nope"}]),
            "dra.claims[0].pod: 'team/nope' is not a pod",
        ),
        (with_dra(drivers=[DRIVER], claims=[{**CLAIM, "driver": "x.example.com"}]), "dra.claims[0].driver"),
        (with_dra(drivers=[DRIVER], claims=[{**CLAIM, "devices": ["gpu-9"]}]), "gpu.example.com has no device 'gpu-9'"),
        (with_dra(drivers=[DRIVER], claims=[{**CLAIM, "container": "side"}]), "has no container 'side'"),
        (with_dra(drivers=[DRIVER], claims=[{**CLAIM, "namespace": "other"}]), "a claim is in its pod's namespace"),
        (
            with_dra(drivers=[DRIVER], claims=[CLAIM, {**CLAIM, "name": "second"}]),
            "dra.claims[1].devices: gpu.example.com gpu-1 is already allocated to team/job-gpu",
        ),
        # unknown keys outside dra: too, with their path
        (
            {**MINIMAL, "resources": [{"name": "example.com/w", "count": 1, "pre_star": True}]},
            "resources[0]: unknown field 'pre_star'",
        ),
        (
            {**MINIMAL, "resources": [{"name": "example.com/w", "devices": [{"id": "a", "numaa": 0}]}]},
            "resources[0].devices[0]: unknown field 'numaa'",
        ),
        (
            {**MINIMAL, "resources": [{"name": "example.com/w", "count": 1, "allocate": {"env": {}}}]},
            "resources[0].allocate: unknown field 'env'",
        ),
        (
            {**MINIMAL, "resources": [{"name": "example.com/w", "count": 1, "allocate": {"mounts": [{"host": "/x"}]}}]},
            "resources[0].allocate.mounts[0]: unknown field 'host'",
        ),
    ],
)
def test_bad_dra_and_unknown_keys_name_the_path(data: dict, expected: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data)
    assert expected in str(err.value) and "\n" not in str(err.value)
