"""How the long-running commands end: on SIGINT, SIGTERM or SIGHUP, at any moment, exactly once.

``plugin serve``, ``sim``, ``demo`` and ``tui --plugin`` hold sockets and
temporary roots that must go when they end, however they end: Ctrl-C
(SIGINT), a ``kill`` or a stopping service manager (SIGTERM), or a dropped SSH
session (SIGHUP). ``run_until_signal`` installs one handler for all three as
the first thing its event loop does; the first signal, whenever it comes
(during start-up too), asks the command to stop: by default it cancels the
command's main task, so its ``finally`` blocks remove what it made; a command
may set another action for a phase (the TUI exits its app so that the
terminal is restored; ``sim -- CMD`` passes the signal to CMD). An action
that can be lost (the TUI's exit, asked before the app has started to read its
messages) is repeated every RECANCEL seconds until the command says it is
stopping, and after GIVE_UP seconds the main task is cancelled instead, so a
hang-up during start-up still ends the command. Signals that
follow while it stops are ignored, so cleanup is never cut short. A signal
before the loop runs ends the process before anything was made: commands
call ``catch_early()`` first thing, so a signal that comes while they import
and read their input is recorded rather than raised (a KeyboardInterrupt
raised inside a C extension's import, as gRPC's, can be swallowed there, and
the command then ran on as if never interrupted), and ``run_until_signal``
acts on it as soon as its loop runs.

A cancellation can be lost: ``asyncio.wait_for`` in Python 3.11 swallows it
when the awaited thing finishes at the same moment (the "first Ctrl-C lost"
of ``sim`` start-up). So the stopper cancels again every RECANCEL seconds until
the command says it is stopping (``stopping()``, first thing in its cleanup).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RECANCEL = 0.5
GIVE_UP = 5.0

Action = Callable[[signal.Signals], None]


class Stopper:
    """The stop signals of one command's event loop; see the module docstring."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None  # the first stop signal, once one came
        self._action: Action | None = None
        self._repeat = False
        self._task: asyncio.Task[object] | None = None

    def install(self) -> None:
        """Catch the stop signals on the running loop, for the task that calls this."""
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._receive, sig)

    def uninstall(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)

    def on_signal(self, action: Action | None, *, repeat: bool = False) -> None:
        """From now on call ``action(sig)`` on each stop signal; None: cancel the main task on the first.

        With ``repeat``, the first signal's action is repeated until ``stopping()`` (see the module docstring).
        """
        self._action = action
        self._repeat = repeat

    def stopping(self) -> None:
        """The command is cleaning up: later signals are ignored and nothing is cancelled again."""
        self._action = _ignore

    def _receive(self, sig: signal.Signals) -> None:
        first = self.received is None
        if first:
            self.received = sig
        if self._action is not None:
            self._action(sig)
            if first and self._repeat:
                loop = asyncio.get_running_loop()
                loop.call_later(RECANCEL, self._again, self._action, sig, loop.time() + GIVE_UP)
        elif first:
            self._cancel()

    def _again(self, action: Action, sig: signal.Signals, give_up_at: float) -> None:
        """Repeat ``action`` until the command is stopping; past ``give_up_at``, cancel the main task."""
        loop = asyncio.get_running_loop()
        if self._action is not action:
            return  # stopping, or another phase with its own action
        if loop.time() >= give_up_at:
            self._action = None
            self._cancel()
            return
        action(sig)
        loop.call_later(RECANCEL, self._again, action, sig, give_up_at)

    def _cancel(self) -> None:
        task = self._task
        if task is None or task.done() or self._action is not None:
            return
        task.cancel()
        asyncio.get_running_loop().call_later(RECANCEL, self._cancel)  # in case this one is swallowed

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a command a signal ended (0 before any signal)."""
        return 128 + int(self.received) if self.received is not None else 0


def _ignore(sig: signal.Signals) -> None:
    pass


_early: list[signal.Signals] = []


def catch_early() -> None:
    """Record the stop signals that come before ``run_until_signal`` runs; it acts on the first (module docstring)."""

    def record(signum: int, frame: object) -> None:
        _early.append(signal.Signals(signum))

    if threading.current_thread() is not threading.main_thread():
        return  # run in-process by a test's thread: signals go to the main thread, not here
    for sig in STOP_SIGNALS:
        signal.signal(sig, record)


def run_until_signal(main: Callable[[Stopper], Awaitable[int]]) -> int:
    """``asyncio.run(main(stopper))`` with the stop signals handled; the exit code it returns.

    When a stop signal cancels ``main``, the code is ``stopper.exit_code``
    (``main`` may return 0 itself for a stop it expects, such as Ctrl-C on a
    running simulator).
    """

    async def guarded() -> int:
        stopper = Stopper()
        stopper.install()  # before any await: from here on no signal can slip past
        if _early:
            # It came while the command was starting, before anything was made: end here. Handed to main as a
            # cancellation, it could be swallowed at main's first await (asyncio.wait_for in 3.11 returns the
            # result of what finished meanwhile), and the whole start-up ran before the next try stopped it.
            stopper.received = _early[0]
            stopper.uninstall()
            return stopper.exit_code
        try:
            return await main(stopper)
        except asyncio.CancelledError:
            if stopper.received is None:
                raise  # not ours (asyncio.run's own Ctrl-C before we installed): it ends as KeyboardInterrupt
            return stopper.exit_code
        finally:
            stopper.stopping()
            stopper.uninstall()

    return asyncio.run(guarded())
