"""A Pod manifest on stdin that never ends (``devctl fit -f -`` on a pipe left open): a deadline and a bound.

The hostile stdin is a real pipe whose write end the test holds open (``cat | devctl fit -f -`` never
closed, or a writer that stalls half-way); the command must end by itself with one line and exit 2.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from pathlib import Path

from helpers import DEVCTL, devctl_env

from devctl.node.stdin_read import read_within

POD = b"""apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers:
  - name: c
    resources:
      limits: {cpu: "1", memory: 1Gi}
"""


def _fit_on_open_pipe(root: Path, written: bytes, *args: str, command: str = "fit") -> tuple[int, str]:
    """``devctl fit -f - ARGS`` (or ``command``) with ``written`` on a stdin pipe that stays open; exit and stderr."""
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [*DEVCTL, "--root", str(root), command, "-f", "-", *args],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=devctl_env(),
        )
        os.close(read_end)
        os.write(write_end, written)
        try:
            _, err = proc.communicate(timeout=60)  # "does not hang": far above the deadline asked for
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"{command} -f - still waits on stdin after 60 s") from None
    finally:
        os.close(write_end)
    return proc.returncode, err.decode()


def test_fit_on_a_stdin_never_closed_ends_with_one_line_and_exit_2(tmp_path: Path) -> None:
    code, err = _fit_on_open_pipe(tmp_path, b"", "--timeout", "1")
    assert code == 2
    assert err.strip().splitlines() == ["devctl: no pod manifest on stdin within 1s"]


def test_fit_on_a_manifest_that_stalls_half_way_ends_the_same(tmp_path: Path) -> None:
    code, err = _fit_on_open_pipe(tmp_path, POD[:40], "--timeout", "0.5")
    assert code == 2
    assert err.strip().splitlines() == ["devctl: no pod manifest on stdin within 0.5s"]


def test_why_on_a_stdin_never_closed_ends_the_same(tmp_path: Path) -> None:
    """`why -f -` reads its manifest through the same reader, under the same deadline."""
    code, err = _fit_on_open_pipe(tmp_path, b"", "--timeout", "1", command="why")
    assert code == 2
    assert err.strip().splitlines() == ["devctl: no pod manifest on stdin within 1s"]


def test_a_closed_pipe_is_read_whole_within_the_deadline() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, POD)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        assert read_within(stream, 1 << 20, 5.0) == (POD, True)


def test_an_open_pipe_gives_what_came_and_says_it_did_not_end() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"kind: Po")
        start = time.monotonic()
        with os.fdopen(read_end, "rb") as stream:
            assert read_within(stream, 1 << 20, 0.2) == (b"kind: Po", False)
        assert time.monotonic() - start < 30  # does not hang
    finally:
        os.close(write_end)


def test_the_bound_stops_reading_whatever_keeps_coming() -> None:
    """A writer that never stops (``yes | devctl fit -f -``): at most the bound is read, never further."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"x" * 10_000)
        with os.fdopen(read_end, "rb") as stream:
            data, ended = read_within(stream, 4096, None)
        assert (len(data), ended) == (4096, False)
    finally:
        os.close(write_end)


def test_a_stream_without_a_descriptor_is_read_to_the_bound() -> None:
    assert read_within(io.BytesIO(POD), 1 << 20, 0.1) == (POD, True)
    assert read_within(io.BytesIO(b"y" * 100), 10, 0.1) == (b"y" * 10, False)


def test_a_whole_manifest_on_a_closed_pipe_is_still_answered(tmp_path: Path) -> None:
    """The deadline ends only a stdin that does not end: a piped Pod gets its (here unknown: no sysfs) verdict."""
    proc = subprocess.run(
        [*DEVCTL, "--root", str(tmp_path), "fit", "-f", "-", "--timeout", "5", "-o", "json"],
        input=POD,
        capture_output=True,
        env=devctl_env(),
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    assert json.loads(proc.stdout)["admit"] is None
    assert b"no pod manifest" not in proc.stderr
