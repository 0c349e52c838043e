"""The JSON-lines control socket that the plugins and the simulator share: every failure is one line."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import socket
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devctl.lab.lineserver import LineServer
from devctl.node.control import AccessDenied, ControlSocketError, NotListening, request


async def echo(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("op") == "boom":
        raise RuntimeError("it broke")
    return {"ok": True, "got": message}


@pytest.fixture
async def served(short_root: Path) -> AsyncIterator[str]:
    server = LineServer(str(short_root / "run" / "x.ctl"), echo)
    await server.start()
    try:
        yield server.path
    finally:
        await server.stop()


async def test_a_request_gets_its_answer(served: str) -> None:
    assert await request(served, {"op": "hello", "n": 1}, 2) == {"ok": True, "got": {"op": "hello", "n": 1}}


async def test_bad_lines_and_failing_answers_are_replies_and_the_connection_stays(served: str) -> None:
    reader, writer = await asyncio.open_unix_connection(served)
    try:
        writer.write(b'not json\n[1]\n{"op": "boom"}\n{"op": "after"}\n')
        replies = [json.loads(await asyncio.wait_for(reader.readline(), 2)) for _ in range(4)]
    finally:
        writer.close()
    assert replies == [
        {"ok": False, "error": "not a JSON line"},
        {"ok": False, "error": "a request is a JSON object"},
        {"ok": False, "error": "RuntimeError: it broke"},
        {"ok": True, "got": {"op": "after"}},
    ]


async def test_stop_removes_the_socket_and_start_replaces_a_stale_socket(short_root: Path) -> None:
    path = short_root / "x.ctl"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))  # left by a process that was killed: nothing listens
    stale.close()
    server = LineServer(str(path), echo)
    await server.start()
    assert (await request(str(path), {}, 2))["ok"]
    await server.stop()
    assert not path.exists()


@pytest.mark.parametrize("kind", ["file", "dir", "symlink", "live"])
async def test_start_never_removes_what_it_did_not_make(short_root: Path, kind: str) -> None:
    """A regular file, a directory, a symlink or another process' live socket at the path stays; start refuses."""
    path = short_root / "x.ctl"
    other = None
    if kind == "file":
        path.write_text("precious")
    elif kind == "dir":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(short_root / "elsewhere")
    else:
        other = LineServer(str(path), echo)
        await other.start()
    before = os.lstat(path)
    server = LineServer(str(path), echo)
    try:
        with pytest.raises(OSError) as caught:
            await server.start()
        after = os.lstat(path)
        assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
        assert str(caught.value).startswith(f"{path} is taken: ")
        if kind == "file":
            assert path.read_text() == "precious"
    finally:
        if other is not None:
            await other.stop()


async def test_stop_leaves_a_socket_that_is_not_the_one_it_bound(short_root: Path) -> None:
    path = short_root / "x.ctl"
    server = LineServer(str(path), echo)
    await server.start()
    os.unlink(path)
    replacement = socket.socket(socket.AF_UNIX)
    replacement.bind(str(path))  # someone else's socket now sits at the path
    try:
        await server.stop()
        assert path.is_socket()
    finally:
        replacement.close()


async def test_the_socket_is_the_owners_alone_whatever_the_umask(short_root: Path) -> None:
    path = short_root / "run" / "devctl" / "x.ctl"
    (short_root / "run").mkdir(mode=0o777)
    os.chmod(short_root / "run", 0o777)  # a directory others may enter is tightened, not trusted
    old = os.umask(0)
    try:
        server = LineServer(str(path), echo)
        await server.start()
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    finally:
        await server.stop()


async def test_no_socket_is_not_listening(short_root: Path) -> None:
    path = str(short_root / "none.ctl")
    with pytest.raises(NotListening) as caught:
        await request(path, {}, 1)
    assert str(caught.value) == f"{path}: no such socket"


async def test_a_stale_socket_is_not_listening(short_root: Path) -> None:
    path = str(short_root / "stale.ctl")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()
    with pytest.raises(NotListening) as caught:
        await request(path, {}, 1)
    assert str(caught.value) == f"{path}: connection refused (nothing listens)"


async def reply_with(path: str, answer: bytes | None) -> asyncio.AbstractServer:
    """A server that reads one line and sends ``answer`` raw (None: says nothing until the client hangs up)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        if answer is None:
            await reader.read()
        writer.write(answer or b"")
        await writer.drain()
        writer.close()

    return await asyncio.start_unix_server(serve, path)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (None, "no answer within 0.3s"),
        (b"", "closed without an answer"),
        (b"{oops\n", "the answer is not JSON"),
        (b"[1, 2]\n", "the answer is not a JSON object"),
    ],
)
async def test_a_bad_answer_is_one_line(short_root: Path, answer: bytes | None, reason: str) -> None:
    path = str(short_root / "bad.ctl")
    server = await reply_with(path, answer)
    try:
        with pytest.raises(ControlSocketError) as caught:
            await asyncio.wait_for(request(path, {"op": "info"}, 0.3), 3)
    finally:
        server.close()
    assert type(caught.value) is ControlSocketError
    assert str(caught.value) == f"{path}: {reason}"


def _request_as_nobody(path: str, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    os.setgid(65534)
    os.setuid(65534)
    try:
        results.put(("ok", str(asyncio.run(request(path, {}, 2)))))
    except ControlSocketError as e:
        results.put((type(e).__name__, str(e)))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
async def test_permission_denied_is_said_apart(served: str, short_root: Path) -> None:
    # GIVEN a socket others may reach but not write to (srwxr-xr-x), as root's plugins leave it
    for directory in (short_root, short_root / "run"):
        directory.chmod(0o755)
    os.chmod(served, 0o755)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_request_as_nobody, args=(served, results))
    child.start()
    try:
        kind, message = await asyncio.wait_for(asyncio.to_thread(results.get, True, 20), 25)
    finally:
        await asyncio.to_thread(child.join, 5)
    assert (kind, message) == (AccessDenied.__name__, f"{served}: permission denied")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
async def test_another_user_is_refused_by_peer_credentials(
    served: str, short_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a socket that file modes would let anyone reach (someone chmodded it all open)
    for path in (short_root, short_root / "run", Path(served)):
        path.chmod(0o777)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_request_as_nobody, args=(served, results))
    child.start()
    try:
        kind, message = await asyncio.wait_for(asyncio.to_thread(results.get, True, 20), 25)
    finally:
        await asyncio.to_thread(child.join, 5)
    # THEN the server still refuses uid 65534, says why, and logs it once
    assert (kind, message) == (
        AccessDenied.__name__,
        f"{served}: permission denied: only uid 0 and root may use this socket",
    )
    refusals = [r.getMessage() for r in caplog.records if r.name == "devctl.lab.lineserver"]
    assert len(refusals) == 1
    assert refusals[0].startswith(f"{served}: refused a connection of uid 65534 (pid ")
