"""The main screen's toasts and the keys that drive a plugin running in this process (h, a, x)."""

from __future__ import annotations

from collections.abc import Callable

from textual.notifications import SeverityLevel
from textual.screen import Screen

from devctl.base.escape import escape
from devctl.tui.feeds import FeedControlError, PluginControls
from devctl.tui.widgets.table import RowTable


class PluginKeys(Screen[None]):
    """The base of the main screen: a toast (``tell``), and health, add and remove on an in-process plugin."""

    controls: PluginControls | None = None
    resource: str | None = None  # the resource whose devices the devices view shows

    def tell(self, message: str, *, title: str = "", severity: SeverityLevel = "information", timeout: float) -> None:
        """A toast. Its text names devices and resources: escaped, and never read as markup
        (``[/`` in a device ID would raise MarkupError, ``[@click=app.quit]`` would be a button)."""
        self.notify(escape(message), title=title, severity=severity, timeout=timeout, markup=False)

    def _controllable(self, resource: str | None) -> bool:
        return self.controls is not None and resource in self.controls.resources()

    def _selected_device(self) -> str | None:
        return self.query_one("#devices-table", RowTable).cursor_key

    def _control(self, what: str, act: Callable[[PluginControls, str], str]) -> None:
        if self.controls is None or self.resource is None:
            return
        try:
            message = act(self.controls, self.resource)
        except (FeedControlError, ValueError) as e:
            self.tell(str(e), severity="error", timeout=4)
            return
        self.tell(message, title=what, timeout=3)

    def action_toggle_health(self) -> None:
        device = self._selected_device()
        if device is not None:
            self._control("health", lambda c, r: f"{device}: {c.toggle_health(r, device)}")

    def action_add_device(self) -> None:
        device = self._selected_device()
        self._control("add", lambda c, r: f"added {c.add_device(r, like=device)}")

    def action_remove_device(self) -> None:
        device = self._selected_device()
        if device is not None:

            def remove(c: PluginControls, r: str) -> str:
                c.remove_device(r, device)
                return f"removed {device}"

            self._control("remove", remove)
