"""The root command: every command listed with its help, converted only when used, usage errors exit 2."""

from __future__ import annotations

import re

from helpers import run_devctl
from typer.testing import CliRunner

from devctl.cli.app import app

COMMANDS = {
    "call", "cdi", "checkpoint", "claims", "completion", "demo", "devices", "doctor", "exporter", "fleet", "get",
    "ls", "plugin", "plugins",
    "pods", "sim", "snapshot", "topo", "tui", "watch", "who",
}  # fmt: skip


def test_help_lists_every_command_with_its_first_line_of_help():
    result = CliRunner().invoke(app, ["--help"], prog_name="devctl")
    assert result.exit_code == 0
    listed = dict(re.findall(r"^  ([a-z-]+)\s+(\S.*)$", result.output.split("Commands:")[1], re.M))
    assert set(listed) == COMMANDS
    assert listed["ls"].startswith("One row per extended resource")
    assert listed["sim"].startswith("Run a simulated node")
    assert "shouldn't use this class" not in result.output


def test_group_and_command_help_still_work():
    runner = CliRunner()
    plugin = runner.invoke(app, ["plugin", "--help"], prog_name="devctl")
    assert plugin.exit_code == 0
    assert "set-health" in plugin.output
    ls = runner.invoke(app, ["ls", "--help"], prog_name="devctl")
    assert ls.exit_code == 0
    assert "--output" in ls.output


def test_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(app, ["lss"], prog_name="devctl")
    assert result.exit_code == 2


def test_a_timeout_must_be_a_deadline():
    # Every RPC has a deadline: no NaN, no infinity, none gRPC cannot keep.
    for value in ("nan", "inf", "1e10", "0"):
        result = CliRunner().invoke(app, ["--timeout", value, "ls"], prog_name="devctl")
        assert result.exit_code == 2, value
        assert "Invalid value for '--timeout'" in result.output


def test_verbose_logs_devctl_s_own_rpcs_with_durations_and_nothing_of_grpc_or_asyncio(sim_node) -> None:

    # GIVEN a simulated node; WHEN `ls` and a watch run with -v
    ls = run_devctl("-v", "ls", root=sim_node.root)
    watched = run_devctl("-v", "watch", "nvidia.com/gpu", "--count", "1", root=sim_node.root)
    assert ls.exit_code == 0 and watched.exit_code == 0, (ls.stderr, watched.stderr)
    lines = (ls.stderr + watched.stderr).splitlines()

    def logged(pattern: str) -> bool:
        return any(re.search(pattern, x) for x in lines)

    # THEN each RPC is one line of devctl's: target, method, outcome, duration ...
    pod_resources = str(sim_node.root / "var/lib/kubelet/pod-resources/kubelet.sock")
    for method in ("List", "GetAllocatableResources"):
        assert any(
            re.search(rf"devctl\.rpc: rpc {re.escape(pod_resources)} {method}: ok in [\d.]+ ms$", x) for x in lines
        )
    assert any(re.search(r"devctl\.rpc: rpc \S+\.sock ListAndWatch \(first list\): ok in [\d.]+ ms$", x) for x in lines)
    assert any(
        re.search(r"ListAndWatch \S+nvidia-gpu\.sock: first list \(\d+ devices\) in [\d.]+ ms$", x) for x in lines
    )
    # ... each source its time ...
    assert logged(r"devctl\.collect: read pod-resources in [\d.]+ ms$")
    # ... and no line comes from gRPC's or asyncio's loggers
    names = {m.group(1) for x in lines if (m := re.match(r"\S+ \S+ (\S+): ", x))}
    assert names and all(n.startswith("devctl") for n in names), names
