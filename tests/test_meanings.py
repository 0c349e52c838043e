"""One meaning per number and word: the same node reads the same through every face (issue 29, item 5).

Each test runs the real commands against a real simulated node: ``devctl ls``
and ``devctl fleet ls`` through a real exporter scraped by a real Prometheus,
``devctl doctor`` and the exporter's findings, and so on.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import run_devctl
from test_exporter import exporter
from test_fleet import PROMETHEUS, _fleet, _wait, prometheus

DRIVER = "gpu.example.com"  # the default node's DRA driver: gpu-3 unhealthy and held, gpu-1 healthy and free
GPU = "nvidia.com/gpu"


def _ls_free(root: Path) -> dict[str, int | None]:
    result = run_devctl("ls", "-o", "json", root=root)
    assert result.exit_code == 0, result.stderr
    return {r["name"]: r["free"] for r in result.json["resources"]}


@pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed (apt-get install prometheus)")
def test_free_is_the_same_in_ls_and_fleet_ls(sim_node, tmp_path: Path) -> None:
    """GIVEN the default node, whose DRA driver has an unhealthy device a claim holds
    WHEN `devctl ls` and `devctl fleet ls` (through its exporter and a real Prometheus) are read
    THEN FREE is the same number for every resource: 1 for the driver (not allocatable - allocated = 0)."""
    ls_free = _ls_free(sim_node.root)
    assert ls_free[DRIVER] == 1
    with contextlib.ExitStack() as stack:
        ex = stack.enter_context(exporter(sim_node.root, "--interval", "1"))
        url = stack.enter_context(prometheus(tmp_path, {"sim-node": ex.url.removeprefix("http://")}))

        def fleet_free() -> dict[str, int | None]:
            return {r["resource"]: r["free"] for r in _fleet(url, "ls")["resources"] if r["resource"]}

        _wait("fleet ls lists every resource", lambda: set(fleet_free()) == set(ls_free))
        assert fleet_free() == ls_free
        table = run_devctl("--timeout", "10", "fleet", "--prometheus", url, "ls")
        assert table.exit_code == 0, table.stderr
        row = next(line.split() for line in table.stdout.splitlines() if line.split()[1:2] == [DRIVER])
        assert row[5] == "1"  # NODE RESOURCE CAP ALLOC USED FREE BAD


def _doctor_codes(root: Path) -> Counter[tuple[str, str]]:
    result = run_devctl("doctor", "-o", "json", root=root)
    return Counter((f["severity"], f["code"]) for f in result.json["findings"])


def _exporter_codes(ex) -> Counter[tuple[str, str]]:
    return Counter({(ls["severity"], ls["code"]): int(v) for ls, v in ex.samples("devctl_doctor_findings") if v})


def test_the_exporters_findings_are_doctors_when_a_plugin_stops(sim_node) -> None:
    """GIVEN a live exporter WHEN the GPU plugin stops (its socket goes)
    THEN devctl_doctor_findings counts what `devctl doctor` finds: no-plugin, not a plugin-unreachable
    of the socket the exporter still followed."""
    with exporter(sim_node.root, "--interval", "0.5") as ex:
        ex.wait_for("the first findings", lambda: bool(_exporter_codes(ex)))
        # Each reading is taken at its own moment: the two agree once both have read the same node.
        ex.wait_for("the same findings", lambda: _exporter_codes(ex) == _doctor_codes(sim_node.root))

        async def stop(node) -> None:
            await node.plugins[GPU].stop()

        sim_node.call(stop)
        # The simulated kubelet marks the resource a moment later: compare with doctor's reading each time.
        ex.wait_for("doctor's findings", lambda: _exporter_codes(ex) == _doctor_codes(sim_node.root))
        doctor = _doctor_codes(sim_node.root)
        assert doctor[("error", "no-plugin")] == 1
        # They stay so: the exporter's socket followed after it went is no finding of its own.
        time.sleep(1.5)
        assert _exporter_codes(ex) == doctor


def test_an_unhealthy_dra_device_no_claim_holds_is_a_warning(sim_node) -> None:
    """GIVEN the default node WHEN its DRA driver calls sim-node/gpu-1 (held by no claim) unhealthy
    THEN doctor warns of it as of a device plugin's (unhealthy-devices, the driver its subject), exit 1 for the
    error the held gpu-3 already is; before the flip the held gpu-3 alone makes no such warning."""
    before = run_devctl("doctor", "-o", "json", root=sim_node.root).json["findings"]
    assert not [f for f in before if f["code"] == "unhealthy-devices" and f["subject"] == DRIVER]
    flip = run_devctl("plugin", "set-health", DRIVER, "sim-node/gpu-1", "unhealthy", root=sim_node.root)
    assert flip.exit_code == 0, flip.stderr
    deadline = time.monotonic() + 15
    while True:
        result = run_devctl("doctor", "-o", "json", root=sim_node.root)
        found = [f for f in result.json["findings"] if f["code"] == "unhealthy-devices" and f["subject"] == DRIVER]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [f["severity"] for f in found] == ["warning"]
    assert found[0]["message"] == (
        "2 of 4 device(s) unhealthy: sim-node/gpu-1, sim-node/gpu-3 (1 of them still held: dra-device-unhealthy-in-use)"
    )
    assert result.exit_code == 1


def test_hints_carry_the_real_names(sim_node) -> None:
    """GIVEN the default node WHEN a GPU that ml/train-0 holds goes unhealthy
    THEN the hint says the very command (`kubectl -n ml delete pod train-0`), as the held DRA device's does for
    ml/train-1, and no hint carries an upper-case placeholder (NODE, POD, NAME, IMAGE, SOCKET)."""
    sim_node.set_health(GPU, "GPU-0", "Unhealthy")
    deadline = time.monotonic() + 15
    while True:
        findings = run_devctl("doctor", "-o", "json", root=sim_node.root).json["findings"]
        hints = {(f["code"], f["subject"]): f["hint"] for f in findings}
        if ("unhealthy-allocated", f"{GPU}/GPU-0") in hints or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert hints[("unhealthy-allocated", f"{GPU}/GPU-0")].endswith("(kubectl -n ml delete pod train-0)")
    assert hints[("dra-device-unhealthy-in-use", f"{DRIVER}/sim-node/gpu-3")].endswith(
        "(kubectl -n ml delete pod train-1)"
    )
    assert hints[("numa-misaligned", "inference/serve-0/server")].endswith("(kubectl -n inference delete pod serve-0)")
    for hint in hints.values():
        assert not re.search(r"\b(NODE|POD|NS|NAME|IMAGE|SOCKET)\b", hint), hint


def test_a_socket_hint_names_the_socket() -> None:
    """A plugin serving devices no resource is tied to: the hint's `devctl call` names its socket, not SOCKET."""
    from devctl.analyze.doctor import diagnose
    from devctl.model import Device, NodeSnapshot, PluginProbe, PluginStatus
    from devctl.node.paths import resolve_paths

    paths = resolve_paths(root="/r", env={})
    sock = f"{paths.plugins_dir}/mystery.sock"
    probe = PluginProbe(sock, PluginStatus.SERVING, None, devices=(Device("d0", "Healthy"),))
    snapshot = NodeSnapshot(taken_at="2026-01-01T00:00:00.000Z", paths=paths, pods=(), plugins=(probe,))
    (finding,) = [f for f in diagnose(snapshot) if f.code == "unknown-resource"]
    assert f"devctl call --socket {sock} list" in finding.hint


@pytest.mark.parametrize("form", ["unix://{}", "unix:{}", "UNIX://{}", "{}"])
def test_a_runtime_endpoint_as_crictl_takes_it(sim_node, form: str) -> None:
    """GIVEN the simulated runtime's socket WHEN --runtime-endpoint is written unix:///path, unix:/path or a path
    THEN who names the pod of each holder through the runtime (no runtime error)."""
    sock = f"{sim_node.root}/run/containerd/containerd.sock"
    result = run_devctl("--runtime-endpoint", form.format(sock), "who", "-o", "json", root=sim_node.root)
    assert result.exit_code in (0, 1), result.stderr
    assert [e for e in result.json["errors"] if e["source"] == "runtime"] == []


def test_two_thousand_host_processes_on_one_device_are_one_finding(short_root: Path) -> None:
    """GIVEN 2,000 host processes (no pod) holding /dev/nvidia-uvm open on the simulated node
    WHEN doctor runs THEN one device-used-outside-pods finding names the device node and counts them."""
    from importlib import resources

    import yaml

    from devctl.lab.sim.scenario import parse_scenario
    from devctl.lab.sim.thread import running_sim

    data = yaml.safe_load(resources.files("devctl.lab.sim").joinpath("scenarios/default.yaml").read_text())
    data["processes"] = [{"command": f"worker-{i} --serve", "open": ["/dev/nvidia-uvm"]} for i in range(2000)]
    with running_sim(short_root, parse_scenario(data)):
        result = run_devctl("--timeout", "20", "doctor", "-o", "json", root=short_root, timeout=60)
    found = [f for f in result.json["findings"] if f["code"] == "device-used-outside-pods"]
    assert len(found) == 1, [f["subject"] for f in found][:5]
    (f,) = found
    assert f["subject"].endswith("/dev/nvidia-uvm")
    assert f["message"].startswith("2000 processes (pid ")
    assert "and 1992 more), outside any running pod, hold " in f["message"]


def test_call_without_a_serving_socket_is_exit_3_whichever_way_it_is_named(sim_node) -> None:
    """GIVEN the GPU plugin stopped (the kubelet still names nvidia.com/gpu) WHEN `devctl call nvidia.com/gpu list`
    and `devctl call --socket <its old socket> list` run THEN both exit 3 with one devctl: line; a name the
    node does not have stays exit 1 (not found)."""

    async def stop(node) -> None:
        await node.plugins[GPU].stop()

    sim_node.call(stop)
    by_name = run_devctl("call", GPU, "list", root=sim_node.root)
    assert by_name.exit_code == 3, by_name.stderr
    assert by_name.stdout == ""
    assert by_name.stderr.count("\n") == 1 and by_name.stderr.startswith("devctl: no serving socket")
    by_socket = run_devctl("call", "--socket", "nvidia-gpu.sock", "list", root=sim_node.root)
    assert by_socket.exit_code == 3, by_socket.stderr
    wrong = run_devctl("call", "example.com/nothing", "list", root=sim_node.root)
    assert wrong.exit_code == 1, wrong.stderr


def test_the_exporter_finds_a_state_file_the_kubelet_will_not_start_on(sim_node) -> None:
    """GIVEN a cpu_manager_state whose checksum matches no layout WHEN the exporter refreshes
    THEN devctl_doctor_findings has doctor's cpu-state-checksum error (fleet doctor shows it), and
    devctl_source_up{source="kubelet-state"} is 0."""
    state = Path(sim_node.root) / "var/lib/kubelet/cpu_manager_state"
    state.write_text('{"policyName":"none","defaultCpuSet":"","checksum":1}')
    assert _doctor_codes(sim_node.root)[("error", "cpu-state-checksum")] == 1
    with exporter(sim_node.root, "--interval", "0.5") as ex:
        ex.wait_for("the checksum finding", lambda: _exporter_codes(ex)[("error", "cpu-state-checksum")] == 1)
        up = {ls["source"]: v for ls, v in ex.samples("devctl_source_up")}
        assert up["kubelet-state"] == 0
