"""``kubectl devctl`` against a cluster that holds look-alikes (issue 28 item 6, issue 29 item 10).

Only the DaemonSet's own pod is exec'd into: a tenant pod wearing its label in
another namespace, or a pod in its namespace that it does not control, is never
chosen (``tui`` would hand it the operator's terminal). NODE is a node name or
a usage error before kubectl runs; a pod list that cannot be read is one line
and exit 3, never a silent debug pod; whatever kubectl writes on stderr is
escaped; devctl is exec'd as an argv, with no shell in the image.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_kubectl_plugin import daemonset, pod, run_plugin, runs

REAL = ["-n", "devctl", "devctl-exporter-x7k2p", "-c", "exporter", "--", "devctl", "--root", "/host"]


def test_a_tenant_pod_with_the_label_in_another_namespace_is_never_chosen(tmp_path: Path) -> None:
    # aaa-tenant/evil wears the label and claims a DaemonSet of the same name (its own namespace's), listed first
    evil = pod("evil", namespace="aaa-tenant")
    code, calls, _ = run_plugin(tmp_path, "node-a", "tui", pods=[evil, pod()])
    assert code == 0
    assert runs(calls) == [["exec", "-it", *REAL, "tui"]]
    code, calls, err = run_plugin(tmp_path, "node-a", "tui", pods=[evil])
    assert code == 1 and runs(calls) == []
    assert "no running pod of DaemonSet devctl/devctl-exporter on node node-a" in err


@pytest.mark.parametrize(
    "impostor",
    [
        pod("no-owner", owner=None),
        pod("other-daemonset", owner="devctl-exporter-2"),
        pod("not-controller", controller=False),
        pod("forged-uid", owner_uid="00000000-0000-0000-0000-000000000000"),
        {
            **pod("replicaset"),
            "metadata": {
                **pod("replicaset")["metadata"],
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "devctl-exporter", "controller": True}
                ],
            },
        },
        pod("-it"),  # not a pod name the API server would give: never an argument of kubectl's
    ],
    ids=["no-owner", "other-daemonset", "not-controller", "forged-uid", "replicaset", "bad-name"],
)
def test_a_pod_with_the_label_not_controlled_by_the_daemonset_is_never_chosen(tmp_path: Path, impostor: dict) -> None:
    code, calls, _ = run_plugin(tmp_path, "node-a", "doctor", pods=[impostor])
    assert code == 1 and runs(calls) == []
    code, calls, _ = run_plugin(tmp_path, "node-a", "doctor", pods=[impostor, pod()])
    assert code == 0 and runs(calls) == [["exec", *REAL, "doctor"]]


def test_no_pod_is_chosen_when_the_daemonset_cannot_be_read(tmp_path: Path) -> None:
    # RBAC may forbid reading the DaemonSet: a pod's owner name alone is no proof (anyone who may create pods
    # in the namespace can write it), so nothing runs, and one line says why.
    code, calls, err = run_plugin(
        tmp_path, "node-a", "doctor", pods=[pod("other", owner="x"), pod()], FAKE_DS_FAILS="1"
    )
    assert code == 3 and runs(calls) == []
    assert len(err.splitlines()) == 1 and "cannot read daemonset devctl/devctl-exporter" in err
    # a DaemonSet of another namespace answering is no uid to trust either
    code, calls, err = run_plugin(
        tmp_path, "node-a", "doctor", pods=[pod()], ds=daemonset(namespace="aaa-tenant", uid="x")
    )
    assert code == 3 and runs(calls) == [] and "answered another object" in err


@pytest.mark.parametrize(
    "node",
    [
        "node-a,spec.nodeName!=zzz",
        "Node-A",
        "node_a",
        "node a",
        "node-a.",
        ".node-a",
        "../node-a",
        "node-a\x1b[2J",
        "a" * 254,
        "",
    ],
)
def test_a_bad_node_is_a_usage_error_before_kubectl_runs(tmp_path: Path, node: str) -> None:
    code, calls, err = run_plugin(tmp_path, node, "ls", pods=[pod()])
    assert code == 2 and calls == []
    assert "is not a node name" in err and "\x1b" not in err


def test_the_longest_node_name_is_a_node_name(tmp_path: Path) -> None:
    node = ".".join(["a" * 63] * 4)[:253]
    code, calls, _ = run_plugin(tmp_path, node, "ls", pods=[pod(node=node)])
    assert code == 0 and f"spec.nodeName={node}" in calls[1]


@pytest.mark.parametrize("option", [["-n", "Devctl"], ["-n", "a,b"], ["--daemonset", "x,y=z"], ["--context", ""]])
def test_a_bad_namespace_or_daemonset_is_a_usage_error(tmp_path: Path, option: list[str]) -> None:
    code, calls, _ = run_plugin(tmp_path, *option, "node-a", "ls", pods=[pod()])
    assert code == 2 and calls == []


@pytest.mark.parametrize("failure", [{"FAKE_GET_FAILS": "1"}, {"raw_pods": "<html>502 Bad Gateway</html>"}])
def test_an_unreadable_pod_list_never_falls_back_to_a_debug_pod(tmp_path: Path, failure: dict) -> None:
    for extra in ([], ["--debug-image", "registry.example/devctl:1"]):
        code, calls, err = run_plugin(tmp_path, *extra, "node-a", "ls", **failure)
        assert code == 3 and runs(calls) == []
        assert err.count("\n") == 1 and err.startswith("kubectl devctl: cannot list the pods of devctl/devctl-exporter")


def test_kubectls_stderr_is_escaped_when_listing_fails(tmp_path: Path) -> None:
    hostile = "error: \x1b]52;c;cm0gLXJmIH4K\x07 denied \x1b[2J\u202e\n"
    code, _, err = run_plugin(tmp_path, "node-a", "ls", FAKE_GET_FAILS="1", FAKE_GET_STDERR=hostile)
    assert code == 3 and err.count("\n") == 1
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07 denied \\x1b[2J\\u202e" in err


def test_kubectls_stderr_is_escaped_when_it_runs_devctl(tmp_path: Path) -> None:
    hostile = "Error from server: \x1b[2Jpod \x1b]0;pwned\x07 gone\rforged line\nsecond\n"
    code, _, err = run_plugin(tmp_path, "node-a", "ls", pods=[pod()], FAKE_STDERR=hostile, FAKE_STATUS="1")
    assert code == 1
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err
    assert err.splitlines() == ["Error from server: \\x1b[2Jpod \\x1b]0;pwned\\x07 gone\\rforged line", "second"]


@pytest.mark.parametrize("args", [["doctor"], ["tui"], ["ls", "; reboot", "$(id)", "`id`"]])
def test_devctl_is_execd_as_an_argv_without_a_shell(tmp_path: Path, args: list[str]) -> None:
    code, calls, _ = run_plugin(tmp_path, "node-a", *args, pods=[pod()])
    assert code == 0
    (run,) = runs(calls)
    after = run[run.index("--") + 1 :]
    assert after == ["devctl", "--root", "/host", *args]
    assert not {"sh", "/bin/sh", "bash", "/bin/bash", "-c"} & set(after)  # exec runs devctl itself


def test_the_pod_list_asked_for_is_the_daemonsets_namespace_on_the_node(tmp_path: Path) -> None:
    _, calls, _ = run_plugin(tmp_path, "node-a", "ls", pods=[pod()])
    get_pods = calls[1]
    assert get_pods[get_pods.index("--field-selector") + 1] == "spec.nodeName=node-a"
    assert "--namespace=devctl" in get_pods and "--all-namespaces" not in get_pods
    assert json.dumps(get_pods).count("node-a") == 1
