"""The main screen's answers: `:fit REQUEST` and `:why POD` in a text screen, the journal's history in the
Events view, and a device's own timeline in its detail (issues 31 and 32).

Every question runs in a thread worker on a loop of its own (``tui/answers.py``), under the command's
timeout; the screen never waits for it. A failure is one toast line.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from rich.text import Text
from textual import work
from textual.message import Message

from devctl.analyze import DeviceRow
from devctl.base.escape import escape
from devctl.model import HEALTHY, NodePaths
from devctl.tui import answers
from devctl.tui.answers import SLACK, AnswerInputError, History, Job
from devctl.tui.feeds import Feed
from devctl.tui.screens.node_keys import PluginKeys
from devctl.tui.screens.text import TextScreen
from devctl.tui.source import utc_now
from devctl.tui.widgets.events import EventsPane

QUESTIONS = ("fit", "why")
# The text screen's room: at most 100 columns, less its border, padding and scroll bar.
TEXT_MAX, TEXT_FRAME = 100, 6
SAY_ASKING_AFTER = 1.0  # seconds: an answer slower than this gets a toast saying it is on its way


class HistoryRead(Message):
    """The journal's last 24 h, read in a thread when the screen opened."""

    def __init__(self, history: History, now: datetime) -> None:
        super().__init__()
        self.history = history
        self.now = now


class Answered(Message):
    """A `:fit` or `:why` answer (its text as the CLI prints it), or the one line saying why there is none."""

    def __init__(self, title: str, text: str | None, error: str | None) -> None:
        super().__init__()
        self.title = title
        self.text = text
        self.error = error


class NodeAnswers(PluginKeys):
    """The base of the main screen that asks the node questions beside its live views."""

    feed: Feed
    history: History | None = None  # the journal as read when the screen opened (None: not read, or no feed paths)
    asking: str | None = None  # the question being answered now

    def _node(self) -> tuple[NodePaths, float] | None:
        """The live node's paths and the command's timeout; None for a snapshot file (or a test's feed)."""
        paths, timeout = getattr(self.feed, "paths", None), getattr(self.feed, "timeout", None)
        if isinstance(paths, NodePaths) and isinstance(timeout, int | float):
            return paths, float(timeout)
        return None

    # --- the journal ---------------------------------------------------------------------------

    def load_history(self) -> None:
        node = self._node()
        if node is not None:
            self._read_history(*node)

    @work(thread=True, group="history", exit_on_error=False, description="read the node journal's last 24 h")
    def _read_history(self, paths: NodePaths, timeout: float) -> None:
        now = utc_now()
        try:
            history = answers.read_history(paths, now, timeout)
        except Exception as e:  # a bug in a reader must not stop the screen: one line in the log
            history = History(notices=(f"journal: {type(e).__name__}: {e}",), journal_found=True)
        self.post_message(HistoryRead(history, now))

    def on_history_read(self, message: HistoryRead) -> None:
        history, first = message.history, self.history is None
        fresh = answers.new_events(self.history, history)  # `r` reads again: only what came since is added
        self.history = history
        pane = self.query_one(EventsPane)
        pane.add_history((answers.history_line(e), e) for e in fresh)
        if first and history.journal_found and history.notices:
            pane.add([answers.history_notice(message.now, " ".join(n.split())) for n in history.notices])

    def device_timeline(self, resource: str, row: DeviceRow) -> str | None:
        """The device's own events from the journal (newest last), with its story when unhealthy."""
        if self.history is None or not self.history.events:
            return None
        unhealthy = None if row.health is None else row.health != HEALTHY
        return answers.device_timeline(self.history.events, resource, row.id, utc_now(), unhealthy=unhealthy)

    # --- :fit and :why -----------------------------------------------------------------------

    def answer_command(self, words: list[str]) -> bool:
        """`:fit REQUEST...` or `:why POD`: asked in a thread, shown when answered. False for other words."""
        head = words[0].lower() if words else ""
        if head not in QUESTIONS:
            return False
        node = self._node()
        if node is None:
            self.tell(f"{head} reads the live node: not offered on a snapshot file", severity="error", timeout=4)
            return True
        try:
            job = answers.fit_job(words[1:]) if head == "fit" else answers.why_job(words[1:])
        except AnswerInputError as e:
            self.tell(str(e), severity="error", timeout=5)
            return True
        title = " ".join([head, *words[1:]])
        self.asking = title
        self.set_timer(SAY_ASKING_AFTER, lambda: self._still_asking(title))
        width = max(min(self.app.size.width, TEXT_MAX) - TEXT_FRAME, 40)
        self._ask(title, job, *node, width)
        return True

    def _still_asking(self, title: str) -> None:
        if self.asking == title:
            self.tell(f"{title}: asking the node", timeout=3)

    @work(thread=True, group="answer", exit_on_error=False, description="a question asked with :fit or :why")
    def _ask(self, title: str, job: Job, paths: NodePaths, timeout: float, width: int) -> None:
        text, error = None, None
        try:
            text = job(paths, timeout, width)
        except asyncio.TimeoutError:
            error = f"{title}: no answer within {timeout + SLACK:g}s"
        except Exception as e:  # one line, whatever went wrong; the screen goes on
            error = f"{title}: {type(e).__name__}: {e}"
        self.post_message(Answered(title, text, error))

    def on_answered(self, message: Answered) -> None:
        if self.asking == message.title:
            self.asking = None
        if message.error is not None or message.text is None:
            self.tell(" ".join((message.error or f"{message.title}: no answer").split()), severity="error", timeout=6)
            return
        self.app.push_screen(TextScreen(Text(message.text), title=escape(message.title)))
