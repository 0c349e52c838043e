"""Who holds a device open: the /proc scanner, the CRI client and runtime, `devctl who` and its doctor checks.

The simulated node keeps a ``<root>/proc`` of its containers' processes (fd
links to their device nodes, cgroup files naming their containers) and serves
a CRI socket; one test finds a real child process through the real /proc.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import time
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest
import yaml
from badservers import hung_server
from helpers import call_as_nobody, devctl

from devctl.fast import helper
from devctl.lab.sim.ids import container_id
from devctl.lab.sim.scenario import parse_scenario
from devctl.lab.sim.thread import running_sim
from devctl.model import ErrorKind, ProcScan
from devctl.node import procs
from devctl.node.cri import read_runtime
from devctl.node.paths import resolve_paths
from devctl.node.procs import CHUNK, Watch, parse_cgroup, scan
from devctl.node.rpc import RpcFailure

GPU = "nvidia.com/gpu"
CID = "a" * 64
UID = "0c4e6a1c-1f7e-4a6b-9d7c-2b1f8a3e5d90"


# --- cgroup files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # cgroup v2, systemd driver, containerd
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice/"
        f"cri-containerd-{CID}.scope\n",
        # cgroup v2, systemd driver, CRI-O
        f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/crio-{CID}.scope\n",
        # cgroup v1, cgroupfs driver: one line per controller
        f"12:memory:/kubepods/besteffort/pod{UID}/{CID}\n11:cpu,cpuacct:/kubepods/besteffort/pod{UID}/{CID}\n",
    ],
)
def test_cgroup_names_the_container_and_pod(text):
    assert parse_cgroup(text) == (CID, UID)


@pytest.mark.parametrize("text", ["0::/system.slice/sshd.service\n", "garbage without colons\n", "", "0::/\n"])
def test_cgroup_of_a_host_process_or_unknown_format_names_nothing(text):
    assert parse_cgroup(text) == (None, None)


# --- the scan ----------------------------------------------------------------------------------


def _process(proc: Path, pid: int, links: list[str], cgroup: str = "0::/system.slice/x.service\n") -> None:
    d = proc / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "cmdline").write_bytes(b"python\0train.py\0")
    (d / "cgroup").write_text(cgroup)
    for fd, target in enumerate(links):
        os.symlink(target, d / "fd" / str(fd))


def test_scan_finds_holders_and_skips_what_is_not_a_process(tmp_path):
    proc = tmp_path / "proc"
    _process(proc, 10, ["/dev/null", "/dev/nvidia0", "socket:[1]"], f"0::/kubepods/pod{UID}/{CID}\n")
    _process(proc, 11, ["/dev/nvidia1"])
    _process(proc, 12, ["pipe:[3]"])
    (proc / "13").mkdir()  # exited between listing and reading: no fd dir
    (proc / "self").mkdir()
    (proc / "\u00b2").mkdir()  # "²": str.isdigit() says yes, int() says no
    loop = proc / "12" / "fd" / "9"
    os.symlink(loop, loop)  # a link to itself: read, never followed
    result, errors = scan(str(proc), Watch.of(["/dev/nvidia0"], str(tmp_path)))
    assert errors == []
    assert result is not None and result.scanned == 4
    [p] = result.processes
    assert (p.pid, p.command, p.devices, p.container_id, p.pod_uid) == (
        10,
        "python train.py",
        ("/dev/nvidia0",),
        CID,
        UID,
    )


def _many(proc: Path) -> int:
    """More processes than the caller keeps to itself: holders at 7 (of nvidia1) and every 500th PID (nvidia0)."""
    count = 2 * CHUNK + 7
    for pid in range(1, count + 1):
        (proc / str(pid) / "fd").mkdir(parents=True)
        os.symlink("/dev/nvidia0" if pid % 500 == 0 else "pipe:[1]", proc / str(pid) / "fd" / "0")
    os.symlink("/dev/nvidia1", proc / "7" / "fd" / "1")
    return count


def _found_all(result: ProcScan | None, errors: list, count: int) -> None:
    assert errors == [] and result is not None and result.scanned == count
    assert [p.pid for p in result.processes] == [7, *range(500, count + 1, 500)]
    assert result.processes[0].devices == ("/dev/nvidia1",)
    assert result.processes[1].devices == ("/dev/nvidia0",)


class _SlowCaller(procs.Matcher):
    """The caller's reader, slowed so that the worker claims slices of its own; counts the slices read here."""

    slices = 0
    waits_for: Path | None = None  # a file the worker makes once it claimed its slices

    def read(self, pids, until=None):
        type(self).slices += 1
        deadline = time.monotonic() + 20
        while self.waits_for is not None and not self.waits_for.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.02)
        return super().read(pids, until)


def _slices(count: int) -> int:
    return -(-count // procs.SLICE)


def test_scan_shares_many_processes_with_a_worker_process_and_keeps_them_in_pid_order(tmp_path, monkeypatch):
    count = _many(tmp_path / "proc")
    watch = Watch.of(["/dev/nvidia0", "/dev/nvidia1"], str(tmp_path))
    spawned = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):  # a real worker process; only counted
        spawned.append(args[0])
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(procs, "Matcher", type("Slow", (_SlowCaller,), {}))
    result, errors = scan(str(tmp_path / "proc"), watch, workers=3)
    assert len(spawned) == 1  # two readers of CHUNK processes or more: the caller and one worker
    assert 0 < procs.Matcher.slices < _slices(count)  # the worker read the others
    _found_all(result, errors, count)


# A worker that claims two slices (the caller waits for it), marks that it did, then breaks; CLAIMED is the JSON
# list of the two.
_CLAIMS = (
    "import os, sys, time; t = os.read(int(sys.argv[3]), 4); open(sys.argv[1] + '/claimed', 'w').close(); "
    "CLAIMED = str([int.from_bytes(t[i : i + 2], 'big') for i in (0, 2)]); "
)


@pytest.mark.parametrize(
    ("breakage", "claims"),
    [
        ({"PACKAGE_ROOT": "/nonexistent"}, False),  # the worker cannot import devctl: exits 1
        ({"_WORKER": "import time; time.sleep(60)"}, False),  # never claims, never answers: not waited for
        ({"_WORKER": _CLAIMS + "sys.exit(1)"}, True),
        ({"_WORKER": _CLAIMS + "time.sleep(60)", "WORKER_GRACE": 0.1, "WORKER_PATIENCE": 0}, True),  # no answer
        ({"_WORKER": _CLAIMS + "print('not json')"}, True),
        # it names a holder from a slice it did not read (8000 is in the 32nd), or a slice the caller read
        (
            {
                "_WORKER": _CLAIMS
                + """print('{"done": %s, "found": [["8000", ["/dev/nvidia0"]]], "denied": 0}' % CLAIMED)"""
            },
            True,
        ),
        ({"_WORKER": _CLAIMS + """print('{"done": %s, "found": [], "denied": 0}' % (CLAIMED[:-1] + ', 20]'))"""}, True),
    ],
    ids=["fails", "never-claims", "claims-then-fails", "claims-then-hangs", "garbles", "foreign-pid", "foreign-slice"],
)
def test_scan_reads_a_failed_workers_slices_itself(tmp_path, monkeypatch, breakage, claims):
    count = _many(tmp_path / "proc")
    for name, value in breakage.items():
        monkeypatch.setattr(helper if name == "PACKAGE_ROOT" else procs, name, value)
    if claims:
        monkeypatch.setattr(helper, "PACKAGE_ROOT", str(tmp_path))  # where the worker marks its claim (argv[1])
    monkeypatch.setattr(
        procs, "Matcher", type("Slow", (_SlowCaller,), {"waits_for": tmp_path / "claimed" if claims else None})
    )
    started = time.monotonic()
    result, errors = scan(str(tmp_path / "proc"), Watch.of(["/dev/nvidia0", "/dev/nvidia1"], str(tmp_path)), 2)
    _found_all(result, errors, count)
    assert (tmp_path / "claimed").exists() == claims
    assert procs.Matcher.slices == _slices(count)  # every slice read here, the worker's claimed ones too
    assert time.monotonic() - started < 30  # a worker that never answers is not waited for without end


def test_scan_without_a_memory_file_reads_alone(tmp_path, monkeypatch):
    # GIVEN a sandbox that refuses memfd_create (as some seccomp profiles do)
    def refused(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "memfd_create", refused)
    count = _many(tmp_path / "proc")
    # WHEN many processes are scanned, THEN every holder is still found, without an error
    _found_all(*scan(str(tmp_path / "proc"), Watch.of(["/dev/nvidia0", "/dev/nvidia1"], str(tmp_path)), 2), count)


def _null_node(path: Path) -> None:
    """A character device of /dev/null's major:minor at ``path``, under a test's root (a symlink to /dev/null
    would lead outside the root, and is refused); skipped where devctl's tests may not make device nodes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.stat("/dev/null").st_rdev)
    except PermissionError:
        pytest.skip("mknod is not permitted here")


def test_scan_reads_past_an_fd_that_is_not_a_link(tmp_path):
    # An fd entry that readlink refuses (here a regular file: EINVAL) sends the process down the careful path,
    # which still finds its holder by path and by major:minor (the watched node is /dev/null by another name).
    root = tmp_path / "root"
    _null_node(root / "dev" / "gpu0")
    proc = tmp_path / "proc"
    _process(proc, 30, ["/dev/gpu1"])
    (proc / "30" / "fd" / "1").write_text("not a link")
    os.symlink("/dev/null", proc / "30" / "fd" / "2")
    result, errors = scan(str(proc), Watch.of(["/dev/gpu0", "/dev/gpu1"], str(root)))
    assert errors == [] and result is not None
    [p] = result.processes
    assert (p.pid, p.devices) == (30, ("/dev/gpu0", "/dev/gpu1"))


def test_scan_without_rights_says_so_once(short_root):
    proc = short_root / "proc"
    for pid in (20, 21):
        _process(proc, pid, ["/dev/nvidia0"])
        (proc / str(pid) / "fd").chmod(0o700)
    short_root.chmod(0o755)  # pytest's tmp_path lies under a directory only root may enter

    def run() -> list[str]:
        result, errors = scan(str(proc), Watch.of(["/dev/nvidia0"], "/nonexistent"))
        return [result.processes == (), *(f"{e.kind.value}: {e.message}" for e in errors)]

    out = call_as_nobody(run)
    assert out["value"][0] is True
    assert len(out["value"]) == 2
    assert out["value"][1].startswith(f"{ErrorKind.PERMISSION_DENIED.value}: ")
    assert "2 of 2 processes" in out["value"][1] and "run as root" in out["value"][1]


def test_scan_finds_a_real_child_holding_a_real_file(tmp_path):
    held = tmp_path / "held.bin"
    held.write_bytes(b"x")
    code = "import sys; f = open(sys.argv[1], 'rb'); print('open', flush=True); sys.stdin.read()"
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(held)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "open\n"  # wait for the open, not a time
        result, _ = scan("/proc", Watch.of([str(held)], "/"))
        assert result is not None
        found = {p.pid: p for p in result.processes}
        assert child.pid in found
        assert found[child.pid].devices == (str(held),)
        assert found[child.pid].command.startswith(sys.executable)
    finally:
        child.kill()
        child.wait()


def test_scan_matches_by_major_minor_whatever_the_process_calls_the_node(tmp_path):
    # A container calls the host's /dev/foo-0 "/dev/foo": its fd link then names
    # another path, but resolves to the same character device. Here the host's node
    # (under --root) is a character device of /dev/null's major:minor, and a child holds /dev/null open.
    root = tmp_path / "root"
    _null_node(root / "dev" / "gpu0")
    code = "import sys; f = open('/dev/null', 'rb'); print('open', flush=True); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "open\n"
        result, _ = scan("/proc", Watch.of(["/dev/gpu0"], str(root)))
        found = {p.pid: p for p in result.processes}
        assert found[child.pid].devices == ("/dev/gpu0",)
    finally:
        child.kill()
        child.wait()


async def test_the_scan_does_not_wait_behind_a_hung_plugin(short_root):
    # GIVEN a node whose one plugin socket never answers, and a process under its <proc>
    from devctl.core.collect import PLUGINS, PROCS, Progress, collect

    paths = resolve_paths(root=str(short_root), env={})
    os.makedirs(paths.plugins_dir)
    _process(Path(paths.proc), 10, ["/dev/null"])
    hung = f"{paths.plugins_dir}/hung.sock"
    scanned = []

    def report(progress: Progress) -> None:
        if hung in progress.pending:
            scanned.append(progress.snapshot().procs)

    # WHEN collect reads the plugins and <proc>
    async with hung_server(hung):
        snap = await asyncio.wait_for(collect(paths, 1.0, want={PLUGINS, PROCS}, progress=report), 10)
    # THEN the scan was in while the hung socket was still awaited, not after its deadline
    assert snap.procs is not None and snap.procs.scanned == 1
    assert any(p is not None and p.scanned == 1 for p in scanned)


# --- CRI ---------------------------------------------------------------------------------------


def test_cri_client_names_the_simulated_pods_and_containers(sim_node):
    endpoint = f"unix://{sim_node.root}/run/containerd/containerd.sock"
    state = asyncio.run(read_runtime(endpoint, 2.0))
    pods = {(s.namespace, s.name): s for s in state.sandboxes}
    assert ("ml", "train-0") in pods and pods[("ml", "train-0")].state == "ready"
    train = pods[("ml", "train-0")]
    names = {c.name for c in state.containers if c.sandbox_id == train.id}
    assert names == {"trainer", "log-shipper"}
    assert {c.id for c in state.containers} >= {container_id(train.uid, "trainer")}


def test_cri_that_hangs_is_a_timeout_and_the_rest_still_shows(sim_node, short_root, background):
    hung = str(short_root / "hung.sock")
    background(hung_server(hung))
    with pytest.raises(RpcFailure) as err:
        asyncio.run(read_runtime(hung, 0.3))
    assert err.value.kind == ErrorKind.TIMEOUT
    r = devctl(sim_node.root, "--runtime-endpoint", hung, "who", GPU, "-o", "json", timeout=0.3)
    assert r.exit_code == 0, r.stderr
    doc = r.json
    assert [e["source"] for e in doc["errors"]] == ["runtime"]
    # The pod still comes from the cgroup's pod UID and the pod log dirs; the container name needs the runtime.
    assert doc["holders"] and all(h["container"] is None and h["allocated"] for h in doc["holders"])


def test_cri_absent_is_one_error(short_root):
    r = devctl(short_root, "who", "-o", "json")
    assert r.exit_code == 3
    assert {e["source"] for e in r.json["errors"]} >= {"runtime"}


# --- devctl who on the default node ------------------------------------------------------------


def test_who_lists_gpu_holders_with_pod_and_container_names(sim_node):
    r = devctl(sim_node.root, "who", GPU, "-o", "json")
    assert r.exit_code == 0, r.stderr
    holders = r.json["holders"]
    assert {(h["pod"]["namespace"], h["pod"]["name"], h["container"]) for h in holders} == {
        ("ml", "train-0", "trainer"),
        ("ml", "train-1", "trainer"),
    }
    assert {h["device"] for h in holders} == {"GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-4", "GPU-6"}
    assert all(h["allocated"] and h["kind"] == "device-plugin" and h["path"].startswith("/dev/") for h in holders)
    table = devctl(sim_node.root, "who", GPU)
    assert "ml/train-0" in table.stdout and "trainer" in table.stdout and "ALLOCATED" in table.stdout


def test_who_lists_the_dra_drivers_holders_from_their_cdi_specs(sim_node):
    r = devctl(sim_node.root, "who", "gpu.example.com", "-o", "json")
    assert r.exit_code == 0, r.stderr
    holders = r.json["holders"]
    assert {(h["device"], h["pod"]["namespace"], h["pod"]["name"], h["container"]) for h in holders} == {
        ("sim-node/gpu-0", "inference", "embed-0", "embedder"),
        ("sim-node/gpu-2", "ml", "train-1", "trainer"),
        ("sim-node/gpu-3", "ml", "train-1", "trainer"),
    }
    # The node a claim's CDI spec names, and the claim given to that very container.
    assert all(h["kind"] == "dra" and h["allocated"] is True for h in holders)
    assert {h["path"] for h in holders} == {f"/dev/dra/gpu.example.com/gpu-{i}" for i in (0, 2, 3)}
    by_name = devctl(sim_node.root, "who", "gpu-3", "-o", "json").json["holders"]
    assert [h["device"] for h in by_name] == ["sim-node/gpu-3"]
    wide = devctl(sim_node.root, "devices", "gpu.example.com", "-o", "wide")
    procs = {line.split()[1]: line.split()[-1] for line in wide.stdout.splitlines()[1:]}
    assert procs["sim-node/gpu-0"] == "1" and procs["sim-node/gpu-2"] == "1"


def test_a_device_of_which_no_node_is_known_says_so(sim_node):
    r = devctl(sim_node.root, "who", "GPU-7", "-o", "json")
    assert r.exit_code == 0, r.stderr
    assert r.json["holders"] == []
    assert r.json["without_nodes"] == [{"kind": "device-plugin", "resource": GPU, "device": "GPU-7"}]
    table = devctl(sim_node.root, "who", "gpu.example.com")
    assert table.exit_code == 0
    assert "gpu.example.com: no device node known for sim-node/gpu-1" in table.stderr
    assert "sim-node/gpu-0" in table.stdout


def test_who_finds_the_nodes_of_a_device_plugins_cdi_names(short_root):
    # nvidia.com/gpu's Allocate replies carry the CDI name nvidia.com/gpu=<first ID> (default scenario); a
    # spec naming /dev/nvidia<N> for it makes that node this device's, given to the container.
    data = yaml.safe_load(resources.files("devctl.lab.sim").joinpath("scenarios/default.yaml").read_text())
    data["processes"] = [{"command": "cuda-app", "pod": "ml/train-0", "container": "trainer", "open": ["/dev/nvidia0"]}]
    spec = {
        "cdiVersion": "0.6.0",
        "kind": GPU,
        "devices": [
            {"name": f"GPU-{i}", "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{i}"}]}} for i in range(8)
        ],
    }
    with running_sim(short_root, parse_scenario(data)):
        (short_root / "etc" / "cdi").mkdir(parents=True, exist_ok=True)
        (short_root / "etc" / "cdi" / "nvidia.yaml").write_text(yaml.safe_dump(spec))
        r = devctl(short_root, "who", "/dev/nvidia0", "-o", "json")
        doctor = devctl(short_root, "doctor", "-o", "json")
    assert r.exit_code == 0, r.stderr
    assert {(h["kind"], h["device"], h["command"], h["container"], h["allocated"]) for h in r.json["holders"]} == {
        ("device-plugin", "GPU-0", "cuda-app", "trainer", True)
    }
    assert "device-used-not-allocated" not in {f["code"] for f in doctor.json["findings"]}


def test_who_by_device_node_and_device_id(sim_node):
    by_path = devctl(sim_node.root, "who", "/dev/foo-0", "-o", "json").json["holders"]
    assert [(h["device"], h["pod"]["name"]) for h in by_path] == [("foo-0", "serve-1")]
    by_id = devctl(sim_node.root, "who", "GPU-4", "-q")
    assert by_id.stdout.split() == [by_id.stdout.split()[0]]  # one process


def test_who_unknown_name_exits_1_with_a_suggestion(sim_node):
    r = devctl(sim_node.root, "who", "nvidia.com/gpus")
    assert r.exit_code == 1
    assert "did you mean nvidia.com/gpu?" in r.stderr


def test_devices_wide_counts_processes(sim_node):
    r = devctl(sim_node.root, "devices", GPU, "-o", "wide")
    rows = {line.split()[1]: line.split()[-1] for line in r.stdout.splitlines()[1:]}
    assert r.stdout.splitlines()[0].split()[-1] == "PROCS"
    # GPU-7 is free: no Allocate reply or CDI spec names a node of its own, so who holds it is unknown.
    assert rows["GPU-0"] == "1" and rows["GPU-7"] == "?"


def test_doctor_on_the_default_node_has_no_holder_findings(sim_node):
    r = devctl(sim_node.root, "doctor", "-o", "json")
    codes = {f["code"] for f in r.json["findings"]}
    assert not codes & {"device-used-not-allocated", "device-used-outside-pods", "allocated-device-idle"}


# --- planted processes -------------------------------------------------------------------------


def _planted() -> dict:
    data = yaml.safe_load(resources.files("devctl.lab.sim").joinpath("scenarios/default.yaml").read_text())
    data["processes"] = [
        {"command": "node_exporter --collector.gpu", "pod": "monitoring/node-exporter-7xk2p",
         "container": "node-exporter", "open": "all"},
        {"command": "python leftover.py", "open": ["/dev/nvidia-uvm"]},
        {"command": "sleep infinity", "pod": "ml/train-1", "container": "trainer", "open": []},
    ]  # fmt: skip
    return data


def test_doctor_finds_a_privileged_process_a_leftover_and_an_idle_container(short_root):
    with running_sim(short_root, parse_scenario(_planted())):
        r = devctl(short_root, "doctor", "-o", "json")
        who = devctl(short_root, "who", "-o", "json").json["holders"]
    assert r.exit_code == 1
    found = {(f["code"], f["severity"], f["subject"]) for f in r.json["findings"]}
    assert ("device-used-not-allocated", "error", "monitoring/node-exporter-7xk2p/node-exporter") in found
    assert any(code == "device-used-outside-pods" and sev == "warning" for code, sev, _ in found)
    assert ("allocated-device-idle", "info", "ml/train-1/trainer") in found
    exporter = [h for h in who if h["container"] == "node-exporter"]
    assert exporter and not any(h["allocated"] for h in exporter)
    assert {h["device"] for h in exporter if h["resource"] == GPU} == {
        "GPU-0",
        "GPU-1",
        "GPU-2",
        "GPU-3",
        "GPU-4",
        "GPU-6",
    }


def test_scenario_processes_are_checked():
    from devctl.lab.sim.scenario import ScenarioError

    for bad in (
        [{"pod": "ml/train-0", "container": "trainer"}],
        [{"command": "x", "pod": "train-0", "container": "trainer"}],
        [{"command": "x", "pod": "ml/train-0"}],
        [{"command": "x", "open": ["dev/nvidia0"]}],
        [{"command": "x", "open": "some"}],
    ):
        with pytest.raises(ScenarioError):
            parse_scenario({"processes": bad})


# --- the TUI's container detail ----------------------------------------------------------------


def test_tui_container_detail_lists_its_holders(sim_node):
    from datetime import datetime, timezone

    from devctl.analyze.holders import container_holders
    from devctl.core.collect import collect
    from devctl.model import ALL_SOURCES, HOLDER_SOURCES
    from devctl.tui.screens.detail import detail_text
    from devctl.tui.state import build_view

    snapshot = asyncio.run(collect(sim_node.paths, 2.0, want=ALL_SOURCES | HOLDER_SOURCES))
    view = build_view(snapshot, [], datetime.now(timezone.utc))
    detail = view.container("ml/train-1/trainer")
    assert detail is not None
    rows = container_holders(snapshot, "ml", "train-1", "trainer")
    assert rows is not None and {r.pid for r in rows} == {1001}
    text = detail_text(detail, rows).plain
    assert "Processes holding devices" in text
    assert "/bin/trainer: /dev/nvidiactl (nvidia.com/gpu GPU-4, GPU-6)" in text
    assert container_holders(replace(snapshot, procs=None), "ml", "train-1", "trainer") is None


# --- snapshots ---------------------------------------------------------------------------------


def test_snapshot_carries_holders_and_redact_hides_commands_and_env_values(sim_node, tmp_path):
    plain, hidden = tmp_path / "plain.json", tmp_path / "hidden.json"
    assert devctl(sim_node.root, "snapshot", "-f", str(plain)).exit_code == 0
    assert devctl(sim_node.root, "snapshot", "--redact", "-f", str(hidden)).exit_code == 0
    text = hidden.read_text()
    assert "/bin/trainer" in plain.read_text() and "/bin/trainer" not in text
    assert "GPU-0,GPU-1" in plain.read_text() and "NVIDIA_VISIBLE_DEVICES" in text and "GPU-0,GPU-1" not in text
    # Read back anywhere: who answers from the file as on the node.
    back = devctl(sim_node.root, "--from", str(plain), "who", GPU, "-o", "json").json["holders"]
    live = devctl(sim_node.root, "who", GPU, "-o", "json").json["holders"]
    assert back == live


def test_cri_socket_of_another_api_is_named_so_and_the_rest_still_shows(sim_node):
    # The pod-resources socket answers gRPC, but not RuntimeService.
    other = str(sim_node.root / "var/lib/kubelet/pod-resources/kubelet.sock")
    r = devctl(sim_node.root, "--runtime-endpoint", other, "who", GPU, "-o", "json")
    assert r.exit_code == 0
    [error] = r.json["errors"]
    assert (error["source"], error["kind"]) == ("runtime", "unimplemented")
    assert {h["pod"]["name"] for h in r.json["holders"]} == {"train-0", "train-1"}
