"""The JSON-lines control socket that the plugins and the simulator share: every failure is one line."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devctl.control import AccessDenied, ControlSocketError, LineServer, NotListening, request


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


async def test_stop_removes_the_socket_and_start_replaces_a_leftover_file(short_root: Path) -> None:
    path = short_root / "x.ctl"
    path.write_text("left behind")
    server = LineServer(str(path), echo)
    await server.start()
    assert (await request(str(path), {}, 2))["ok"]
    await server.stop()
    assert not path.exists()


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
