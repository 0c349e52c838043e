"""The simulated node's kernel log (devctl.lab.sim.kmsg): written as /dev/kmsg's records, read back by node/kmsg."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import run_devctl

from devctl.analyze.history import from_kernel
from devctl.analyze.kernel import describe
from devctl.core.collect import collect
from devctl.lab.sim.kmsg import KernelLine, format_record, parse_kernel
from devctl.lab.sim.scenario import ScenarioError, default_scenario, parse_scenario
from devctl.lab.sim.thread import running_sim
from devctl.model.history import Holder
from devctl.node.kmsg import read_kmsg


def kmsg_of(root: Path):
    return read_kmsg(str(root / "dev" / "kmsg"), proc=str(root / "proc"))


def test_default_node_logs_an_xid_on_the_held_unhealthy_gpu_and_it_joins_to_gpu_and_pod(sim_node) -> None:
    """issue 32's demo: the Xid the default node logs names the function of gpu-3, which ml/train-1 holds."""
    assert (sim_node.root / "dev" / "kmsg").is_file()  # a regular file, never a device
    read = kmsg_of(sim_node.root)
    assert read.error is None and read.lost == () and read.skipped == 0 and read.boot_time is not None
    xids = [r for r in map(describe, read.records) if r.device is not None and r.device.kind == "xid"]
    assert [(x.device.xid, x.device.pci) for x in xids if x.device] == [(79, "0000:e0:01.0")]
    assert xids[0].time is not None and abs(xids[0].time.timestamp() - time.time()) < 600  # stamped at start
    snapshot = asyncio.run(collect(sim_node.paths, timeout=10.0))
    event = from_kernel(xids[0], snapshot)
    assert event is not None and (event.driver, event.device) == ("gpu.example.com", "sim-node/gpu-3")
    assert event.holders == (Holder("ml", "train-1", "trainer"),)


def test_devctl_sim_kmsg_appends_one_record_live(sim_node) -> None:
    before = kmsg_of(sim_node.root).records
    text = "mlx5_core 0000:3b:02.1: port module event: module 0, Cable unplugged\nsecond line"
    result = run_devctl("--root", str(sim_node.root), "sim", "kmsg", text, "--level", "3")
    assert result.exit_code == 0, result.stderr
    assert "record 3 appended" in result.stdout
    after = kmsg_of(sim_node.root).records
    assert len(after) == len(before) + 1 and after[-1].seq == before[-1].seq + 1
    last = describe(after[-1])
    assert last.level == 3 and last.facility == 0 and last.device is not None
    assert last.device.pci == "0000:3b:02.1" and last.text.endswith("Cable unplugged\\x0asecond line")


def test_devctl_sim_kmsg_without_a_node_says_so_in_one_line(short_root: Path) -> None:
    result = run_devctl("--root", str(short_root), "sim", "kmsg", "hello")
    assert result.exit_code == 3 and "no simulated node runs at" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_delayed_line_is_written_in_its_time_and_the_log_is_gone_after_stop(short_root: Path) -> None:
    scenario = replace(
        parse_scenario({"numa_nodes": [{"id": 0, "cpus": "0-1"}]}),
        kernel=(KernelLine("at start"), KernelLine("pcieport 0000:00:03.0: AER: Corrected error received", after=0.3)),
    )
    with running_sim(short_root, scenario):
        texts = [r.text for r in kmsg_of(short_root).records]
        assert texts[0] == "at start"
        deadline = time.monotonic() + 20  # does not hang; the line is due 0.3 s after start
        while len(texts) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            texts = [r.text for r in kmsg_of(short_root).records]
        assert texts == ["at start", "pcieport 0000:00:03.0: AER: Corrected error received"]
    assert not os.path.exists(short_root / "dev" / "kmsg") and not os.path.exists(short_root / "proc" / "stat")


def test_records_are_kmsg_format_with_dictionary_lines() -> None:
    line = KernelLine("pci 0000:3b:00.0: [10de:2330]", level=6, fields=(("SUBSYSTEM", "pci"),))
    assert format_record(7, 1500, line) == b"6,7,1500,-;pci 0000:3b:00.0: [10de:2330]\n SUBSYSTEM=pci\n"
    assert format_record(8, 1, KernelLine("a\\b")).startswith(b"4,8,1,-;a\\x5cb\n")


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ([{"after": 3}], "kernel[0].text"),
        (["ok", {"text": "x", "after": "soon"}], "kernel[1].after"),
        ([{"text": "x", "level": 9}], "kernel[0].level"),
        ([{"text": "x", "colour": "red"}], "unknown field 'colour'"),
        ("not a list", "kernel: a list"),
    ],
)
def test_bad_kernel_entries_are_refused_in_one_line_naming_the_field(entry: object, words: str) -> None:
    with pytest.raises(ScenarioError) as failure:
        parse_scenario({"numa_nodes": [{"id": 0, "cpus": "0-1"}], "kernel": entry})
    assert words in str(failure.value) and "\n" not in str(failure.value)


def test_kernel_entries_parse_strings_delays_and_levels() -> None:
    assert parse_kernel(["x", {"text": "y", "after": "250ms", "level": 2}]) == (
        KernelLine("x"),
        KernelLine("y", after=0.25, level=2),
    )
    assert default_scenario().kernel and all(line.after == 0 for line in default_scenario().kernel)
