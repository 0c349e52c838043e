"""The root command: every command listed with its help, converted only when used, usage errors exit 2."""

from __future__ import annotations

import io
import os
import re
from contextlib import redirect_stderr, redirect_stdout
from unittest import mock

from helpers import run_devctl
from typer.testing import CliRunner

from devctl.cli.app import app, run

COMMANDS = {
    "call", "cdi", "checkpoint", "claims", "completion", "demo", "devices", "doctor", "events", "exporter", "fit",
    "fleet", "get", "hw", "ls", "plugin", "plugins",
    "pods", "record", "sim", "snapshot", "topo", "tui", "version", "watch", "who", "why",
}  # fmt: skip


class Ran:
    def __init__(self, exit_code: int, output: str) -> None:
        self.exit_code, self.output = exit_code, output


def devctl_run(*argv: str, columns: str = "80") -> Ran:
    """The `devctl` command line as its entry point runs it (devctl.cli.app.run), in this process."""
    out = io.StringIO()
    with mock.patch.dict(os.environ, {"COLUMNS": columns}), redirect_stdout(out), redirect_stderr(out):
        code = run(list(argv))
    return Ran(code, out.getvalue())


def test_help_lists_every_command_with_its_first_line_of_help():
    result = devctl_run("--help")
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
        result = devctl_run("--timeout", value, "ls")
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
    assert logged(r"devctl\.core\.collect: read pod-resources in [\d.]+ ms$")
    # ... and no line comes from gRPC's or asyncio's loggers
    names = {m.group(1) for x in lines if (m := re.match(r"\S+ \S+ (\S+): ", x))}
    assert names and all(n.startswith("devctl") for n in names), names


def test_global_options_after_the_command_replace_the_groups(sim_node, tmp_path) -> None:
    # GIVEN a simulated node and a snapshot of it; WHEN global options come after the command, kubectl-style
    snap = tmp_path / "node.json"
    assert run_devctl("snapshot", "-f", str(snap), root=sim_node.root).exit_code == 0
    ls = run_devctl("ls", "--root", str(sim_node.root), "-o", "json")
    pods = run_devctl("pods", "--from", str(snap), "-o", "json", env={"DEVCTL_ROOT": str(tmp_path / "nothing")})
    # THEN they apply, over the environment variable too
    assert ls.exit_code == 0, ls.stderr
    assert "nvidia.com/gpu" in {r["name"] for r in ls.json["resources"]}
    assert pods.exit_code == 0, pods.stderr
    assert pods.json["pods"]
    # AND a group's subcommand takes them as well; a bad value is the same usage error as before the command
    bad = devctl_run("ls", "--timeout", "nan")
    assert bad.exit_code == 2 and "Invalid value for '--timeout'" in bad.output


def test_the_cdi_proc_and_runtime_options_after_the_command_too(sim_node, tmp_path) -> None:
    # GIVEN a simulated node; WHEN the paths of who and cdi come after the command
    cdi = run_devctl("cdi", "--cdi-dirs", str(tmp_path), "-o", "json", root=sim_node.root)
    who = run_devctl("who", "--proc", str(tmp_path / "none"), "--runtime-endpoint", str(tmp_path / "x.sock"),
                     "-o", "json", root=sim_node.root)  # fmt: skip
    # THEN they apply, as before the command
    assert cdi.exit_code == 0, cdi.stderr
    assert cdi.json["dirs"] == [str(tmp_path)]
    sources = {e["source"]: e["message"] for e in who.json["errors"]}
    assert str(tmp_path / "none") in sources["procs"] and str(tmp_path / "x.sock") in sources["runtime"]


def test_each_command_s_help_lists_the_global_options_with_what_they_take():
    for argv in (["ls"], ["pods"], ["doctor"], ["plugin", "set-health"], ["call"]):
        text = devctl_run(*argv, "--help").output
        for shown in (
            "--root DIR",
            "--kubelet-dir DIR",
            "--pod-resources PATH",
            "--proc DIR",
            "--runtime-endpoint PATH",
            "--cdi-dirs DIR[:DIR]",
            "--from FILE",
            "--timeout SECONDS",
        ):
            assert shown in text, (argv, shown)
    # and the root's help names what each path option takes too, never TEXT
    assert " TEXT " not in devctl_run("--help").output
    # a command's own option of the same name stays its own
    sim = devctl_run("sim", "--help").output
    assert len(re.findall(r"^  --root", sim, re.M)) == 1


def test_devctl_alone_prints_help_on_stdout_and_exits_0():
    result = run_devctl()
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: devctl") and "Commands:" in result.stdout
    assert result.stderr == ""


def test_version_as_a_command_and_an_option():
    assert run_devctl("version").stdout == run_devctl("--version").stdout != ""


def test_group_listings_show_each_command_s_whole_first_paragraph():
    for group in ("plugin", "sim"):
        text = devctl_run(group, "--help").output
        assert "..." not in text.split("Commands:")[1].split("Examples:")[0], text


def test_each_command_s_help_ends_with_examples_of_itself():
    from devctl.cli.examples import EXAMPLES

    for path, lines in EXAMPLES.items():
        text = devctl_run(*path.split(), "--help").output
        # every line fits the 80 columns of an SSH window, the examples' too (help never wraps a comment)
        assert [line for line in text.splitlines() if len(line) > 80] == [], path
        tail = text.split("Examples:")[-1]
        assert "Examples:" in text and all(line in tail for line in lines), path
        assert all(line.startswith("devctl ") for line in lines), path
    # every command, group and subcommand has some
    assert set(COMMANDS) <= set(EXAMPLES)
