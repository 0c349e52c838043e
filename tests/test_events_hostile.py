"""``devctl events`` against hostile or missing journals: a count that rests on an unread journal is unknown.

cli.md: "a number that depends on a source that failed is unknown, never 0" (``null`` in JSON). Each node
is a fake root under tmp_path with a saved kernel log, so that the kernel side still answers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from helpers import invoke

BOOT = int(time.time()) - 3600
KMSG = "3,2,3000000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"


def _node(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "node"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "stat").write_text(f"cpu 1 2 3\nbtime {BOOT}\n")
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(KMSG)
    return root, kmsg


def test_no_journal_counts_its_records_and_drops_as_unknown_not_zero(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    result = invoke("--root", str(root), "events", "--kmsg", str(kmsg), "-o", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["journal"]["records"] is None and doc["journal"]["dropped"] is None
    assert doc["journal"]["from"] is None
    assert [e["kind"] for e in doc["events"]] == ["xid"]  # the kernel log still answers
    out = invoke("--root", str(root), "events", "--kmsg", str(kmsg), "-o", "yaml").stdout
    journal = yaml.safe_load(out)["journal"]
    assert journal["records"] is None and journal["dropped"] is None


def test_an_unreadable_journal_counts_as_unknown_and_says_why_once(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    bad = tmp_path / "not-a-journal"
    bad.write_bytes(b"plain text, not a journal\n" * 4)
    result = invoke("--root", str(root), "events", "--journal", str(bad), "--kmsg", str(kmsg), "-o", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["journal"]["records"] is None and doc["journal"]["dropped"] is None
    assert [e["source"] for e in doc["errors"]] == ["journal"]


def test_the_table_without_a_journal_shows_no_invented_count(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    result = invoke("--root", str(root), "events", "--kmsg", str(kmsg))
    assert result.exit_code == 0
    assert "xid" in result.stdout.lower()
    assert "0 records" not in result.stdout + result.stderr and "0 dropped" not in result.stdout + result.stderr
    assert result.stderr.count("no journal at") == 1
