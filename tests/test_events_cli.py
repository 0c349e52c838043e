"""``devctl events`` as a person runs it: the journal and a saved kernel log merged, filtered, shown once.

Each node here is a fake root under tmp_path: ``<root>/proc/stat`` gives the boot time (so kernel
records have a wall time), a saved kernel log in kmsg's record format is passed with ``--kmsg``, and
a journal is written with the journal's own writer.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from helpers import DEVCTL, devctl_env, invoke

from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.node.journal import JournalWriter

BOOT = int(time.time()) - 3600  # booted an hour ago
XID_USEC = 3_000_000_000  # 50 minutes after boot: ten minutes ago
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
KMSG = (
    "6,1,1000,-;Linux version 6.8.0 (a line naming no device)\n"
    f"3,2,{XID_USEC},-;{XID}\n"
    f"3,3,{XID_USEC + 1_000_000},-;mlx5_core 0000:5e:00.0: mlx5_health_try_recover: health recovery flow aborted\n"
)


def _node(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "node"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "stat").write_text(f"cpu 1 2 3\nbtime {BOOT}\nprocesses 9\n")
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(KMSG)
    return root, kmsg


def _journal(root: Path, events: list[NodeEvent]) -> Path:
    path = root / "var" / "lib" / "devctl" / "journal"
    path.parent.mkdir(parents=True, exist_ok=True)
    with JournalWriter.open(str(path)) as writer:
        writer.append_many(events)
    return path


def _ago(minutes: float) -> datetime:
    return datetime.now(timezone.utc) - timedelta(minutes=minutes)


def _health(device: str, minutes: float, pod: str = "train-0") -> NodeEvent:
    return NodeEvent(
        _ago(minutes),
        EventSource.PLUGIN,
        "health",
        "nvidia.com/gpu",
        device,
        holders=(Holder("ml", pod, "trainer"),),
        what="Healthy -> Unhealthy",
    )


def _events(root: Path, *args: str) -> tuple[int, str, str]:
    result = invoke("--root", str(root), "events", *args)
    return result.exit_code, result.stdout, result.stderr


def test_without_a_journal_it_says_so_once_and_shows_the_kernel_log(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    code, out, err = _events(root, "--kmsg", str(kmsg), "-o", "json")
    assert code == 0
    assert err.count("no journal at") == 1 and "showing the kernel log only" in err
    doc = json.loads(out)
    assert set(doc) == {"events", "journal", "errors"}
    kinds = [(e["source"], e["kind"], e["pci"]) for e in doc["events"]]
    assert kinds == [("kernel", "xid", "0000:3b:00.0"), ("kernel", "pci", "0000:5e:00.0")]
    xid = doc["events"][0]
    assert xid["what"].startswith("Xid 79")
    assert set(xid) >= {"time", "source", "kind", "resource", "device", "pci", "holders", "what"}
    # The record's time is the boot time plus its microseconds since boot.
    assert xid["time"].startswith(datetime.fromtimestamp(BOOT + 3000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    assert doc["journal"]["records"] is None  # no journal read: unknown, not 0


def test_the_journal_and_the_kernel_log_merge_in_time_order_and_a_recorded_kernel_line_shows_once(
    tmp_path: Path,
) -> None:
    root, kmsg = _node(tmp_path)
    xid_time = datetime.fromtimestamp(BOOT, timezone.utc) + timedelta(microseconds=XID_USEC)
    recorded_xid = NodeEvent(
        xid_time, EventSource.KERNEL, "xid", pci="0000:3b:00.0", what="Xid 79: GPU has fallen off the bus"
    )
    # What the recorder writes for that line, with the words analyze.kernel gives it.
    from devctl.analyze.kernel import recognise

    mention = recognise(XID)
    assert mention is not None
    recorded_xid = NodeEvent(xid_time, EventSource.KERNEL, mention.kind, pci=mention.pci, what=mention.what)
    _journal(root, [_health("GPU-0", 20), recorded_xid, _health("GPU-1", 5)])
    code, out, err = _events(root, "--kmsg", str(kmsg), "-o", "json")
    assert code == 0, err
    assert "no journal" not in err
    rows = [(e["source"], e["kind"], e["device"] or e["pci"]) for e in json.loads(out)["events"]]
    assert rows == [
        ("plugin", "health", "GPU-0"),
        ("kernel", "xid", "0000:3b:00.0"),
        ("kernel", "pci", "0000:5e:00.0"),
        ("plugin", "health", "GPU-1"),
    ]


def test_since_and_until_narrow_the_time(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    _journal(root, [_health("GPU-0", 120), _health("GPU-1", 5)])
    code, out, _ = _events(root, "--kmsg", str(kmsg), "--since", "30m", "-o", "json")
    assert code == 0
    assert [e["device"] for e in json.loads(out)["events"] if e["source"] == "plugin"] == ["GPU-1"]
    until = _ago(60).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, out, _ = _events(root, "--kmsg", str(kmsg), "--until", until, "-o", "json")
    assert [e["device"] for e in json.loads(out)["events"]] == ["GPU-0"]
    code, _, err = _events(root, "--since", "yesterday-ish")
    assert code == 2 and "neither a duration" in err


def test_subjects_narrow_to_a_device_a_pod_a_pci_address_or_a_resource(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    _journal(root, [_health("GPU-0", 20, pod="train-0"), _health("GPU-1", 10, pod="train-1")])

    def shown(*subjects: str) -> list[str]:
        code, out, err = _events(root, "--kmsg", str(kmsg), "-o", "json", *subjects)
        assert code == 0, err
        return [e["device"] or e["pci"] for e in json.loads(out)["events"]]

    assert shown("GPU-1") == ["GPU-1"]
    assert shown("ml/train-0") == ["GPU-0"]
    assert shown("train-1") == ["GPU-1"]
    assert shown("0000:3b:00.0") == ["0000:3b:00.0"]
    assert shown("nvidia.com/gpu") == ["GPU-0", "GPU-1"]
    assert shown("GPU-0", "0000:5e:00.0") == ["GPU-0", "0000:5e:00.0"]
    code, _, err = _events(root, "--kmsg", str(kmsg), "GPU-9")
    assert code == 1 and "no events of GPU-9" in err


def test_the_table_fits_80_columns_and_wide_shows_the_holders(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    long = NodeEvent(
        _ago(3),
        EventSource.PLUGIN,
        "health",
        "vendor.example.com/a-rather-long-resource-name",
        "device-with-a-very-long-identifier-0123456789",
        holders=(Holder("ml", "train-0", "trainer"),),
        what="Healthy -> Unhealthy: the driver said something long about the device " * 2,
    )
    _journal(root, [long])
    code, out, _ = _events(root, "--kmsg", str(kmsg))
    assert code == 0
    lines = out.splitlines()
    # The long device leaves WHAT no room on its row: its header and its lines go under SOURCE.
    assert lines[0].split() == ["TIME", "SOURCE", "KIND", "DEVICE/PCI", "HOLDER"]
    assert lines[1].split() == ["WHAT"] and lines[1].index("WHAT") == lines[0].index("SOURCE")
    assert all(len(line) <= 80 for line in lines) and "ml/train-0" in out
    assert long.what.strip() in " ".join(" ".join(lines).split())  # WHAT wrapped, never cut
    code, out, _ = _events(root, "--kmsg", str(kmsg), "-o", "wide", "device-with-a-very-long-identifier-0123456789")
    assert "HOLDERS" in out.splitlines()[0] and "ml/train-0/trainer" in out


def test_a_control_character_from_the_journal_never_reaches_the_terminal(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    _journal(root, [NodeEvent(_ago(1), EventSource.PLUGIN, "health", "r/x", "GPU-\x1b[31m", what="bad\x07")])
    code, out, _ = _events(root, "--kmsg", str(kmsg))
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out


def test_neither_a_journal_nor_a_kernel_log_is_exit_3(tmp_path: Path) -> None:
    root, _ = _node(tmp_path)
    code, _, err = _events(root, "--kmsg", str(tmp_path / "absent"))
    assert code == 3
    assert "no journal at" in err and "absent: no such file" in err


def test_a_journal_of_another_format_is_one_line_and_left_as_it_is(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    path = root / "not-a-journal"
    path.write_bytes(b"hello, I am a text file\n" * 10)
    code, out, err = _events(root, "--journal", str(path), "--kmsg", str(kmsg), "-o", "json")
    assert code == 0  # the kernel log still answers
    assert [e["kind"] for e in json.loads(out)["events"]] == ["xid", "pci"]
    assert len([line for line in err.splitlines() if "not-a-journal" in line]) == 1
    assert path.read_bytes() == b"hello, I am a text file\n" * 10


def test_watch_follows_the_journal_as_it_is_written(tmp_path: Path) -> None:
    root, kmsg = _node(tmp_path)
    path = _journal(root, [_health("GPU-0", 5)])
    proc = subprocess.Popen(
        [*DEVCTL, "events", "-w", "-o", "json", "--kmsg", str(kmsg)],
        env=devctl_env(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()

    def until(found: str) -> str:
        text = ""
        deadline = time.monotonic() + 30
        while found not in text:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, f"devctl ended; stdout so far: {text!r}"
            text += line
        return text

    try:
        assert "GPU-0" in until('"errors"')  # the answer so far, then it follows
        with JournalWriter.open(str(path)) as writer:
            writer.append(_health("GPU-7", 0))
        line = until('"GPU-7"').splitlines()[-1]
        assert json.loads(line)["device"] == "GPU-7"
    finally:
        proc.send_signal(2)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0
    assert os.path.exists(path)


async def test_the_follow_goes_on_from_the_answer_s_last_kernel_record(tmp_path: Path) -> None:
    """`events -w` prints the answer, then follows: a kernel line written between the two (after the answer read
    the log, before the follow opened it) is shown, not skipped; one the answer showed is not shown again."""
    import asyncio
    import contextlib

    from devctl.core.history import follow_events, read_events
    from devctl.node.paths import resolve_paths

    root, kmsg = _node(tmp_path)
    paths = resolve_paths(root=str(root), env={})
    answer = read_events(paths, kmsg=str(kmsg))
    assert answer.kernel_seq == 3 and [e.pci for e in answer.events] == ["0000:3b:00.0", "0000:5e:00.0"]
    late = f"3,4,{XID_USEC + 2_000_000},-;NVRM: Xid (PCI:0000:86:00): 48, pid=9, name=x, DBE.\n"
    with kmsg.open("a") as f:
        f.write(late)  # the window: after the answer, before the follow
    async with contextlib.aclosing(
        follow_events(paths, kmsg=str(kmsg), kernel_after=answer.kernel_seq, poll=0.05)
    ) as items:
        first = await asyncio.wait_for(items.__anext__(), 10)
    assert isinstance(first, NodeEvent) and first.pci == "0000:86:00.0" and first.what.startswith("Xid 48")
