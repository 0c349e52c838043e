"""What a final review of ``devctl fit`` found (full-HD): a wrong choice is one line, exit 2."""

from __future__ import annotations

from tests.helpers import devctl


def test_a_wrong_policy_is_one_line_exit_2(tmp_path):
    r = devctl(tmp_path, "fit", "--policy", "wrong", "cpu=1")
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        "devctl: --policy: 'wrong' is not one of none, best-effort, restricted, single-numa-node"
    ]
    assert r.stdout == ""


def test_a_wrong_memory_policy_is_one_line(tmp_path):
    r = devctl(tmp_path, "fit", "--memory-policy", "dynamic", "cpu=1")
    assert r.exit_code == 2
    assert r.stderr.strip() == "devctl: --memory-policy: 'dynamic' is not one of None, Static"
