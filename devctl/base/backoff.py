"""The one backoff: growing delays with jitter, capped — a restarting plugin retried soon, a flapping one not
hammered, the kubelet's rate limit waited out, a socket that will not answer dialled less often. Standard library
only, so node/, core/ and the lab share it."""

from __future__ import annotations

import random


class Backoff:
    """Exponential reconnect delays with jitter, capped, so a restarting plugin is not hammered."""

    def __init__(self, first: float = 0.1, cap: float = 2.0, factor: float = 2.0, jitter: float = 0.2):
        self.first = first
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._next = first

    def next(self) -> float:
        """The delay before the next attempt; each call grows the following one up to ``cap``."""
        delay = self._next
        self._next = min(self._next * self.factor, self.cap)
        return min(self.cap, delay * (1 + self.jitter * (2 * random.random() - 1)))

    def reset(self) -> None:
        self._next = self.first
