"""``devctl record``: the node journal written from the simulated node, refused twice, bounded under a flood.

The recorder runs as a real process against the default simulated node (``sim_node``); each wait is
bounded by looking at the journal until the event is there, never by sleeping a guessed time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from helpers import DEVCTL, devctl_env, run_devctl

from devctl.core.recorder import Coalescer, Recorder, allocation_events
from devctl.lab.sim.thread import SimHandle
from devctl.model.history import EventSource, Holder, NodeEvent
from devctl.node.journal import JournalFull, JournalWriter, read_journal

GPU = "nvidia.com/gpu"


def _recorder(root: Path, journal: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*DEVCTL, "record", "--journal", str(journal), *args],
        env=devctl_env(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(journal: Path, found, what: str, timeout: float = 30.0) -> list[NodeEvent]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = list(read_journal(str(journal)).events) if journal.exists() else []
        if found(events):
            return events
        time.sleep(0.1)
    raise AssertionError(f"{what}: not in {journal} within {timeout}s")


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


def _holder_of(sim: SimHandle, device: str) -> tuple[str, str, str]:
    for pod in sim.pods():
        for c in pod.containers:
            for d in c.devices:
                if d.resource == GPU and device in d.ids:
                    return pod.namespace, pod.name, c.name
    raise AssertionError(f"nobody holds {device}")


def test_a_health_flip_recorded_survives_a_restart_and_events_shows_it_with_its_holder(
    sim_node: SimHandle, tmp_path: Path
) -> None:
    root = sim_node.root
    journal = tmp_path / "journal"
    device = next(d for c in sim_node.pods()[0].containers for r in c.devices if r.resource == GPU for d in r.ids)
    holder = _holder_of(sim_node, device)

    first = _recorder(root, journal)
    _until(journal, lambda es: any(e.kind == "snapshot" and e.resource == GPU for e in es), "the GPU plugin's snapshot")
    # A second recorder of the same journal is refused with one line, and the first goes on.
    second = run_devctl("record", "--journal", str(journal), root=root, timeout=30)
    assert second.exit_code == 1
    assert len(second.stderr.strip().splitlines()) == 1 and "already being recorded" in second.stderr

    sim_node.set_health(GPU, device, "Unhealthy")
    _until(journal, lambda es: any(e.kind == "health" and e.device == device for e in es), "the health flip")
    code, err = _stop(first)
    assert code == 0, err

    again = _recorder(root, journal)  # restarted: the journal keeps what it had and goes on
    _until(journal, lambda es: sum(e.kind == "snapshot" and e.resource == GPU for e in es) >= 2, "the second snapshot")
    assert _stop(again)[0] == 0

    result = run_devctl("events", "--since", "10m", "--journal", str(journal), "-o", "json", root=root)
    assert result.exit_code == 0, result.stderr
    health = [e for e in json.loads(result.stdout)["events"] if e["kind"] == "health" and e["device"] == device]
    assert len(health) == 1
    assert health[0]["source"] == "plugin" and health[0]["resource"] == GPU
    assert health[0]["holders"] == [{"namespace": holder[0], "pod": holder[1], "container": holder[2]}]
    assert "Unhealthy" in health[0]["what"]


def _flap(i: int) -> NodeEvent:
    t = datetime(2026, 12, 3, 2, 47, tzinfo=timezone.utc) + timedelta(microseconds=100 * i)
    health = "Unhealthy" if i % 2 else "Healthy"
    return NodeEvent(t, EventSource.PLUGIN, "health", GPU, "GPU-3", what=f"-> {health}")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_ten_thousand_flaps_in_a_second_are_one_event_with_their_count(tmp_path: Path) -> None:
    clock = _Clock()
    with JournalWriter.open(str(tmp_path / "journal")) as writer:
        recorder = Recorder(writer, coalescer=Coalescer(window=1.0, clock=clock))
        for i in range(10_000):
            clock.now = i / 10_000  # 10,000 events over one second
            recorder.add(_flap(i))
            if i % 2500 == 0:
                recorder.flush()
        assert len(recorder.coalescer) == 1  # one waiting event, whatever the flood
        clock.now = 1.5
        recorder.flush()
    events = read_journal(str(tmp_path / "journal")).events
    assert [(e.device, e.count) for e in events] == [("GPU-3", 10_000)]
    assert events[0].time == _flap(0).time  # the first flap's time, the last one's words
    assert events[0].what == "-> Unhealthy"


def test_too_many_distinct_events_at_once_are_dropped_and_counted_never_queued(tmp_path: Path) -> None:
    clock = _Clock()
    notices: list[str] = []
    with JournalWriter.open(str(tmp_path / "journal")) as writer:
        recorder = Recorder(writer, coalescer=Coalescer(max_pending=100, clock=clock), on_notice=notices.append)
        for i in range(10_000):
            recorder.add(NodeEvent(_flap(0).time, EventSource.PLUGIN, "health", GPU, f"GPU-{i}", what="x"))
        assert len(recorder.coalescer) == 100
        recorder.flush(everything=True)
        assert recorder.stats().dropped == 9_900
    assert read_journal(str(tmp_path / "journal")).records == 100
    assert notices == ["recording falls behind: 9900 events dropped"]


class _FullWriter:
    path = "/full/journal"

    def append_many(self, events: object) -> None:
        raise JournalFull(self.path, "no space left on device")

    def close(self) -> None:
        pass


def test_a_full_disk_stops_recording_with_the_failure_kept_not_raised() -> None:
    recorder = Recorder(_FullWriter(), coalescer=Coalescer(window=0.0))  # type: ignore[arg-type]
    recorder.add(_flap(0))
    recorder.flush()
    assert isinstance(recorder.failure, JournalFull)
    assert "recording stopped: no space left on device" in str(recorder.failure)
    recorder.add(_flap(1))  # nothing more is taken
    assert len(recorder.coalescer) == 0


def test_allocations_and_frees_between_two_lists_name_their_holders() -> None:
    a, b = Holder("ml", "train-0", "trainer"), Holder("ml", "train-1", "trainer")
    before = {(GPU, "GPU-0"): (a,), (GPU, "GPU-1"): (a,)}
    after = {(GPU, "GPU-1"): (a,), (GPU, "GPU-2"): (b,)}
    at = datetime(2026, 12, 3, tzinfo=timezone.utc)
    got = [(e.source, e.kind, e.device, e.holders) for e in allocation_events(before, after, at)]
    assert got == [
        (EventSource.KUBELET, "allocated", "GPU-2", (b,)),
        (EventSource.KUBELET, "freed", "GPU-0", (a,)),
    ]


def test_a_bad_max_size_and_a_file_that_is_not_a_journal_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("keep me\n" * 100)
    result = run_devctl("record", "--journal", str(other), root=tmp_path)
    assert result.exit_code == 1 and "refused, left as it is" in result.stderr
    assert other.read_text() == "keep me\n" * 100
    result = run_devctl("record", "--journal", str(tmp_path / "j"), "--max-size", "lots", root=tmp_path)
    assert result.exit_code == 2 and "--max-size lots" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM])
def test_sigterm_flushes_and_exits_0(sim_node: SimHandle, tmp_path: Path, signum: int) -> None:
    journal = tmp_path / "journal"
    proc = _recorder(sim_node.root, journal)
    _until(journal, lambda es: any(e.kind == "snapshot" for e in es), "a snapshot")
    sim_node.set_health(GPU, "GPU-7", "Unhealthy")
    time.sleep(0.2)  # the flip reaches the recorder; it is then within its one-second window, not yet written
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert any(e.kind == "health" and e.device == "GPU-7" for e in read_journal(str(journal)).events)


def test_the_exporter_records_while_it_serves(sim_node: SimHandle, tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    proc = subprocess.Popen(
        [*DEVCTL, "--root", str(sim_node.root), "exporter", "--listen", "127.0.0.1:0", "--journal", str(journal)],
        env=devctl_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _until(journal, lambda es: any(e.kind == "snapshot" and e.resource == GPU for e in es), "a snapshot")
        refused = run_devctl("record", "--journal", str(journal), root=sim_node.root)
        assert refused.exit_code == 1 and "already being recorded" in refused.stderr, refused
        sim_node.set_health(GPU, "GPU-6", "Unhealthy")
        _until(journal, lambda es: any(e.kind == "health" and e.device == "GPU-6" for e in es), "the health flip")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, err


def _holder_of_id(sim: SimHandle, resource: str, device: str) -> dict[str, str]:
    for pod in sim.pods():
        for c in pod.containers:
            for d in c.devices:
                if d.resource == resource and device in d.ids:
                    return {"namespace": pod.namespace, "pod": pod.name, "container": c.name}
    raise AssertionError(f"nobody holds {device}")


def test_kernel_lines_then_a_flip_then_a_restart_show_once_each_in_order(sim_node: SimHandle, tmp_path: Path) -> None:
    """Issue 32's "done when", with the simulated node's kernel log (``devctl sim kmsg``).

    The NIC's line joins to the SR-IOV VF whose device-plugin ID is its PCI address, and to its holder.
    """
    root, journal = sim_node.root, tmp_path / "journal"
    vf = "0000:3b:02.0"
    holder = _holder_of_id(sim_node, "intel.com/sriov_netdevice", vf)
    first = _recorder(root, journal)
    _until(journal, lambda es: any(e.kind == "snapshot" and e.resource == GPU for e in es), "the GPU plugin's snapshot")
    for text in (
        f"mlx5_core {vf}: mlx5_health_try_recover: health recovery flow aborted",
        "NVRM: Xid (PCI:0000:17:00): 79, pid=1, GPU has fallen off the bus.",
    ):
        assert run_devctl("sim", "kmsg", text, root=root).exit_code == 0
    _until(journal, lambda es: any(e.kind == "xid" for e in es), "the Xid")
    sim_node.set_health(GPU, "GPU-2", "Unhealthy")
    _until(journal, lambda es: any(e.kind == "health" and e.device == "GPU-2" for e in es), "the health flip")
    assert _stop(first)[0] == 0
    again = _recorder(root, journal)
    _until(journal, lambda es: sum(e.kind == "snapshot" and e.resource == GPU for e in es) >= 2, "the second snapshot")
    assert _stop(again)[0] == 0

    result = run_devctl("events", "--since", "10m", "--journal", str(journal), "-o", "json", root=root)
    assert result.exit_code == 0, result.stderr
    events = json.loads(result.stdout)["events"]
    mine = [
        e
        for e in events
        if e["pci"] == vf or (e["kind"] == "xid" and e["pci"] == "0000:17:00.0") or e["kind"] == "health"
    ]
    assert [(e["source"], e["kind"]) for e in mine] == [("kernel", "pci"), ("kernel", "xid"), ("plugin", "health")]
    assert mine[0]["holders"] == [holder] and mine[0]["device"] == vf
    assert mine[1]["what"] == "Xid 79: GPU has fallen off the bus"
    assert mine[2]["device"] == "GPU-2" and mine[2]["holders"]


# The child's files may grow to 600 bytes (EFBIG past it, as a full disk says ENOSPC), SIGXFSZ ignored; set in
# the child itself: a preexec_fn would run Python in a fork of this threaded process (the simulated node's thread).
SMALL_FILES = (
    "import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600)); sys.argv = ['devctl', *sys.argv[1:]]; "
    "runpy.run_module('devctl', run_name='__main__')"
)


def test_a_full_disk_stops_recording_with_one_line_and_exit_1_and_the_journal_stays_readable(
    sim_node: SimHandle, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    proc = subprocess.Popen(
        [sys.executable, "-c", SMALL_FILES, "record", "--journal", str(journal)],
        env=devctl_env(sim_node.root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=45)  # it ends by itself: the first snapshots pass 600 bytes
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 1, err
    stopped = [line for line in err.splitlines() if "recording stopped" in line]
    assert len(stopped) == 1 and str(journal) in stopped[0]
    read = read_journal(str(journal))
    assert read.error is None and read.records >= 1  # what fitted is there, whole


def test_claims_prepared_and_unprepared_between_two_checkpoint_reads() -> None:
    from devctl.core.recorder import claim_events

    at = datetime(2026, 12, 3, tzinfo=timezone.utc)
    before = {
        ("ml", "train-1-gpus", "gpu.example.com", "pool-a/gpu-2"),
        ("ml", "old", "gpu.example.com", "pool-a/gpu-1"),
    }
    after = {
        ("ml", "train-1-gpus", "gpu.example.com", "pool-a/gpu-2"),
        ("ml", "new", "gpu.example.com", "pool-a/gpu-0"),
    }
    got = [(e.source, e.kind, e.driver, e.device, e.what) for e in claim_events(before, after, at)]
    assert got == [
        (EventSource.DRA, "prepared", "gpu.example.com", "pool-a/gpu-0", "claim ml/new prepared"),
        (EventSource.DRA, "unprepared", "gpu.example.com", "pool-a/gpu-1", "claim ml/old unprepared"),
    ]
