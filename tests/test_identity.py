"""Pod identities from the node's disk: the kubelet's pod log directories and its per-pod directories."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from helpers import call_as_nobody

from devctl.model import PodIdentity, SourceError
from devctl.node.identity import read_pod_identities

UUID_A = "0f6c3a52-6c1d-4d4e-9a51-3f1a2b9c7d10"
UUID_B = "7a0d1e44-2b3c-4f5a-8e6d-9c0b1a2f3e4d"
STATIC_UID = "5c1a9e7b3d2f4a6b8c0d1e2f3a4b5c6d"  # a static pod: hex hash of its manifest


def node(root: Path, log_dirs: Sequence[str] = (), pod_dirs: Sequence[str] = ()) -> tuple[str, str]:
    logs, kubelet = root / "var/log/pods", root / "var/lib/kubelet"
    for name in log_dirs:
        (logs / name).mkdir(parents=True)
    for uid in pod_dirs:
        (kubelet / "pods" / uid).mkdir(parents=True)
    return str(logs), str(kubelet)


def test_log_directories_name_their_pods(tmp_path: Path) -> None:
    logs, kubelet = node(
        tmp_path,
        log_dirs=[
            f"ml_train-0_{UUID_A}",
            f"kube-system_kube-apiserver-node-1.example_{STATIC_UID}",
            f"default_{'x' * 100}_{UUID_B}",  # a pod name is a subdomain: one long label is fine
        ],
    )
    identities, errors = read_pod_identities(logs, kubelet)
    assert errors == ()
    assert identities == (
        PodIdentity(UUID_B, "default", "x" * 100),
        PodIdentity(STATIC_UID, "kube-system", "kube-apiserver-node-1.example"),
        PodIdentity(UUID_A, "ml", "train-0"),
    )


def test_malformed_log_directories_are_ignored(tmp_path: Path) -> None:
    logs, kubelet = node(
        tmp_path,
        log_dirs=[
            UUID_A,  # the pre-1.14 layout: a bare UID
            "ns_name",
            "ns_name_uid_extra",
            f"Default_web_{UUID_A}",  # upper case is not a DNS name
            f"ns__{UUID_A}",
            "ns_web_",
            f"ns_-web_{UUID_A}",
            f"ns_web._{UUID_A}",
            f"{'n' * 64}_web_{UUID_A}",  # a namespace is a label: at most 63 characters
            f"ns_web_{UUID_A}.bak",
            f"ok_web_{UUID_B}",
        ],
    )
    Path(logs, f"ns_file_{UUID_A}").write_text("")  # a file, not a pod's directory
    identities, errors = read_pod_identities(logs, kubelet)
    assert identities == (PodIdentity(UUID_B, "ok", "web"),)
    assert errors == ()


def test_uids_only_the_kubelet_pods_dir_knows_come_without_a_name(tmp_path: Path) -> None:
    logs, kubelet = node(tmp_path, log_dirs=[f"ml_train-0_{UUID_A}"], pod_dirs=[UUID_A, UUID_B, STATIC_UID])
    Path(kubelet, "pods", "not-a-pod.txt").write_text("")
    Path(kubelet, "pods", ".hidden").mkdir()
    identities, errors = read_pod_identities(logs, kubelet)
    assert errors == ()
    assert identities == (
        PodIdentity(UUID_A, "ml", "train-0"),  # once, with its name
        PodIdentity(STATIC_UID, "", ""),
        PodIdentity(UUID_B, "", ""),
    )


def test_missing_directories_are_an_empty_answer_not_an_error(tmp_path: Path) -> None:
    assert read_pod_identities(str(tmp_path / "no-logs"), str(tmp_path / "no-kubelet")) == ((), ())
    logs, kubelet = node(tmp_path, pod_dirs=[UUID_B])
    assert read_pod_identities(logs, kubelet) == ((PodIdentity(UUID_B, "", ""),), ())


def test_a_file_where_a_directory_should_be_is_a_source_error(tmp_path: Path) -> None:
    logs = tmp_path / "pods.log"
    logs.write_text("")
    _, kubelet = node(tmp_path, pod_dirs=[UUID_B])
    identities, errors = read_pod_identities(str(logs), kubelet)
    assert identities == (PodIdentity(UUID_B, "", ""),)
    assert errors == (SourceError(str(logs), "not a directory"),)


def read_as_nobody(pod_logs: str, kubelet_dir: str) -> tuple[list, list]:
    """read_pod_identities as user 65534, its answer as plain lists."""

    def read() -> list:
        identities, errors = read_pod_identities(pod_logs, kubelet_dir)
        return [[[p.uid, p.namespace, p.name] for p in identities], [[e.source, e.message] for e in errors]]

    identities, errors = call_as_nobody(read)["value"]
    return identities, errors


def test_an_unreadable_directory_is_a_source_error_and_the_other_still_answers(short_root: Path) -> None:
    logs, kubelet = node(short_root, log_dirs=[f"ml_train-0_{UUID_A}"], pod_dirs=[UUID_B])
    for path in (short_root, *short_root.rglob("*")):
        path.chmod(0o755)
    Path(logs).chmod(0o700 if os.geteuid() == 0 else 0o000)  # root's own: closed to everyone else
    identities, errors = read_as_nobody(logs, kubelet)
    assert identities == [[UUID_B, "", ""]]
    assert errors == [[logs, "permission denied"]]
