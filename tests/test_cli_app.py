"""The root command: every command listed with its help, converted only when used, usage errors exit 2."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from devctl.cli.app import app

COMMANDS = {
    "call", "checkpoint", "completion", "demo", "devices", "doctor", "get", "ls", "plugin", "plugins",
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
