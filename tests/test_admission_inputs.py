"""The kubelet's admission settings: its command line under <proc>, its config file, flags over the file (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path

from devctl.model import ErrorKind, NodePaths
from devctl.node.kubeletconfig import find_kubelet, kubelet_flags, read_kubelet_policy
from devctl.node.paths import resolve_paths

Gi = 2**30

CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
topologyManagerPolicyOptions:
  prefer-closest-numa-nodes: "true"
cpuManagerPolicy: none
cpuManagerPolicyOptions:
  full-pcpus-only: true
memoryManagerPolicy: Static
reservedSystemCPUs: "0-1,4"
kubeReserved: {cpu: 500m, memory: 1Gi}
reservedMemory:
- numaNode: 0
  limits: {memory: 1Gi, hugepages-1Gi: 2Gi}
- numaNode: 1
  limits: {memory: 512Mi}
"""


def _node(tmp_path: Path, *processes: tuple[str, list[str]]) -> NodePaths:
    """A root with a fake <proc>: one directory per process, its comm and NUL-separated cmdline."""
    root = tmp_path / "root"
    (root / "var/lib/kubelet").mkdir(parents=True)
    proc = root / "proc"
    proc.mkdir()
    for pid, (comm, argv) in enumerate(processes, start=100):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "comm").write_text(comm + "\n")
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (proc / "self").mkdir()  # not a pid: skipped
    return resolve_paths(root=str(root), env={})


def _write(paths: NodePaths, host_path: str, text: str) -> str:
    path = Path(paths.root) / host_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_the_running_kubelets_config_and_flags_winning_over_it(tmp_path: Path) -> None:
    paths = _node(
        tmp_path,
        ("systemd", ["/sbin/init"]),
        ("bash", ["bash", "-c", "kubelet --config /etc/other.yaml"]),  # mentions kubelet, is not one
        ("kubelet-1.32", ["/usr/bin/kubelet-1.32", "--v=2", "--config", "/etc/kubernetes/kubelet.yaml",
                          "--cpu-manager-policy", "static", "--topology-manager-scope=container"]),
    )  # fmt: skip
    config = _write(paths, "/etc/kubernetes/kubelet.yaml", CONFIG)
    policy, errors = read_kubelet_policy(paths)
    assert errors == ()
    assert policy.topology == "single-numa-node"  # from the file
    assert policy.scope == "container"  # the flag wins over the file's pod
    assert policy.cpu == "static"  # the flag wins over the file's none
    assert policy.options == {"prefer-closest-numa-nodes": "true"}
    assert policy.cpu_options == {"full-pcpus-only": "true"}  # YAML's true as the kubelet's map holds it
    assert policy.memory == "Static"
    assert policy.reserved_cpus == (0, 1, 4)
    # reservedSystemCPUs replaces kubeReserved/systemReserved cpu by its count (cmd/kubelet/app/server.go)
    assert policy.reserved_cpu_quantity_milli == 3000
    assert policy.reserved_memory == {0: {"memory": Gi, "hugepages-1Gi": 2 * Gi}, 1: {"memory": Gi // 2}}
    assert policy.source == f"{config} + flags"
    assert policy.version == "1.32"


def test_map_and_list_flags_replace_the_files(tmp_path: Path) -> None:
    argv = [
        "/usr/local/bin/kubelet",
        "--config=/var/lib/kubelet/config.yaml",
        "--kube-reserved=cpu=100m,memory=1Gi",
        "--system-reserved",
        "cpu=1.5",
        "--reserved-cpus=",
        "--reserved-memory=0:memory=1Gi,hugepages-2Mi=512Mi;1:memory=2Gi",
        "--topology-manager-policy-options=prefer-closest-numa-nodes=true,max-allowable-numa-nodes=16",
    ]
    paths = _node(tmp_path, ("kubelet", argv))
    _write(paths, "/var/lib/kubelet/config.yaml", CONFIG.replace('reservedSystemCPUs: "0-1,4"\n', ""))
    policy, errors = read_kubelet_policy(paths)
    assert errors == ()
    assert policy.reserved_cpus == ()
    assert policy.reserved_cpu_quantity_milli == 100 + 1500
    assert policy.reserved_memory == {0: {"memory": Gi, "hugepages-2Mi": 512 * 2**20}, 1: {"memory": 2 * Gi}}
    assert policy.options == {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "16"}
    assert policy.version is None  # /usr/local/bin/kubelet says nothing


def test_flags_stop_at_double_dash_and_take_the_last_value() -> None:
    argv = ["kubelet", "--cpu-manager-policy=none", "--cpu-manager-policy", "static", "--", "--config=x"]
    assert kubelet_flags(argv) == {"cpu-manager-policy": ["none", "static"]}


def test_a_kubelet_without_config_runs_on_flags_and_defaults(tmp_path: Path) -> None:
    paths = _node(tmp_path, ("kubelet", ["kubelet", "--topology-manager-policy", "restricted"]))
    _write(paths, "/var/lib/kubelet/config.yaml", CONFIG)  # not the running kubelet's: not read
    policy, errors = read_kubelet_policy(paths)
    assert (policy.topology, policy.cpu, policy.source) == ("restricted", "none", "flags")
    assert errors == ()


def test_unknown_version_is_named_and_nothing_of_the_file_is_used(tmp_path: Path) -> None:
    paths = _node(tmp_path, ("kubelet", ["kubelet", "--config", "/etc/k.yaml"]))
    _write(paths, "/etc/k.yaml", CONFIG.replace("kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v2"))
    policy, errors = read_kubelet_policy(paths)
    (error,) = errors
    assert error.kind == ErrorKind.WRONG_API
    assert "apiVersion a string kind 'KubeletConfiguration'" in error.message  # an unknown value is not echoed
    assert (policy.topology, policy.source) == ("none", "defaults")


def test_unknown_fields_are_listed_and_the_known_ones_used(tmp_path: Path) -> None:
    paths = _node(tmp_path)  # no kubelet process: kubeadm's config.yaml
    _write(paths, "/var/lib/kubelet/config.yaml", CONFIG + "topologyManagerPolicyy: restricted\ncpuManager: x\n")
    policy, errors = read_kubelet_policy(paths)
    (error,) = errors
    assert error.kind == ErrorKind.MALFORMED
    assert "unknown fields cpuManager, topologyManagerPolicyy" in error.message
    assert policy.topology == "single-numa-node"


def test_a_value_the_kubelet_refuses_is_kept_and_said(tmp_path: Path) -> None:
    paths = _node(tmp_path)
    _write(paths, "/var/lib/kubelet/config.yaml", CONFIG.replace("single-numa-node", "single-numa"))
    policy, errors = read_kubelet_policy(paths)
    assert policy.topology == "single-numa"
    # the value is not echoed (a config may be anything: FX2); the field and the words the kubelet knows are
    assert [e.message for e in errors] == [
        "topologyManagerPolicy: a string of 11 characters that is none of the kubelet's none, best-effort, "
        "restricted, single-numa-node (it would refuse to start)"
    ]


def test_missing_everything_is_defaults_with_a_failure(tmp_path: Path) -> None:
    paths = _node(tmp_path, ("containerd", ["/usr/bin/containerd"]))
    policy, errors = read_kubelet_policy(paths)
    (error,) = errors
    assert error.kind == ErrorKind.MISSING
    assert "--kubelet-config" in error.message
    assert policy.source == "defaults"


def test_the_kubelets_config_file_missing_is_a_failure(tmp_path: Path) -> None:
    paths = _node(tmp_path, ("kubelet", ["kubelet", "--config=/etc/gone.yaml", "--cpu-manager-policy=static"]))
    policy, errors = read_kubelet_policy(paths)
    (error,) = errors
    assert error.kind == ErrorKind.MISSING and "/etc/gone.yaml" in error.message
    assert (policy.cpu, policy.source) == ("static", "flags")


def test_kubeadm_config_then_the_callers_file(tmp_path: Path) -> None:
    paths = _node(tmp_path)
    mine = tmp_path / "mine.json"
    document = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cpuManagerPolicy": "static",
        "systemReserved": {"cpu": "250m"},
    }
    mine.write_text(json.dumps(document, indent="\t"))  # tabs: JSON that YAML would refuse
    policy, errors = read_kubelet_policy(paths, str(mine))
    assert errors == ()
    assert (policy.cpu, policy.reserved_cpu_quantity_milli, policy.source) == ("static", 250, str(mine))
    kubeadm = _write(paths, "/var/lib/kubelet/config.yaml", CONFIG)
    policy, errors = read_kubelet_policy(paths, str(mine))
    assert (policy.cpu, policy.source) == ("none", kubeadm)  # kubeadm's place comes before the caller's file


def test_an_oversized_config_is_refused(tmp_path: Path) -> None:
    paths = _node(tmp_path)
    path = Path(paths.kubelet_dir) / "config.yaml"
    with open(path, "wb") as f:
        f.truncate(50 * 2**20)
    policy, errors = read_kubelet_policy(paths)
    assert [e.kind for e in errors] == [ErrorKind.TOO_LARGE]
    assert policy.source == "defaults"


def test_find_kubelet_takes_the_lowest_pid(tmp_path: Path) -> None:
    paths = _node(tmp_path, ("sh", ["sh"]), ("kubelet", ["/usr/bin/kubelet", "--v=1"]), ("kubelet", ["kubelet"]))
    found = find_kubelet(paths.proc)
    assert found is not None and (found.pid, found.argv) == (101, ("/usr/bin/kubelet", "--v=1"))
    assert find_kubelet(str(tmp_path / "nowhere")) is None
