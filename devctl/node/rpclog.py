"""One ``-v`` line per RPC devctl makes: target, method, outcome, duration (as crictl's ``--debug`` does).

The lines go to devctl's own logger (``devctl.rpc``); ``-v`` turns on devctl's
loggers only, so gRPC's and asyncio's internals stay out of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator

import grpc

log = logging.getLogger("devctl.rpc")


def outcome(error: BaseException) -> str:
    """How an RPC ended, in a word or two: the gRPC status code, or the failure's own kind."""
    if isinstance(error, grpc.aio.AioRpcError):
        return str(error.code().name)
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    kind = getattr(error, "kind", None)  # an RpcFailure raised on the way (an undecodable reply)
    return f"failed ({kind.value})" if kind is not None else f"failed ({type(error).__name__})"


def since(start: float) -> str:
    return f"{(time.perf_counter() - start) * 1000:.1f} ms"


@contextlib.contextmanager
def logged(target: str, method: str) -> Iterator[None]:
    """Log the call made inside the block: ``rpc TARGET METHOD: ok in 1.2 ms``, or how it failed."""
    if not log.isEnabledFor(logging.DEBUG):
        yield
        return
    start = time.perf_counter()
    try:
        yield
    except BaseException as e:
        log.debug("rpc %s %s: %s in %s", target, method, outcome(e), since(start))
        raise
    log.debug("rpc %s %s: ok in %s", target, method, since(start))
