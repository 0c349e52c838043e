"""The pod-resources rate limit: a token bucket that behaves like the kubelet's.

The kubelet guards its pod-resources socket with one ``golang.org/x/time/rate``
limiter of 100 tokens/s and burst 10, shared by every client of the node
(pkg/kubelet/apis/podresources/grpc/ratelimit.go). The simulator applies the same
rule so that clients meet ``RESOURCE_EXHAUSTED`` here before they meet it on a
real node.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# pkg/kubelet/apis/podresources/grpc/ratelimit.go: DefaultQPS and DefaultBurstTokens.
DEFAULT_RATE = 100.0
DEFAULT_BURST = 10


class TokenBucket:
    """``burst`` tokens at most, refilled at ``rate`` tokens per second; each call takes one.

    Like ``rate.NewLimiter`` the bucket starts full, so a quiet node accepts a
    burst at once. ``clock`` is injectable so tests can step time by hand. Not
    thread-safe: it lives on the server's event loop.
    """

    def __init__(
        self, rate: float = DEFAULT_RATE, burst: int = DEFAULT_BURST, clock: Callable[[], float] = time.monotonic
    ):
        if rate < 0 or burst < 0:
            raise ValueError(f"rate and burst must not be negative (rate={rate}, burst={burst})")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def allow(self) -> bool:
        """Take one token if there is one; False means the call is to be refused."""
        now = self._clock()
        # A clock that steps back refills nothing, and time counts on from the new
        # reading (x/time/rate's advance() does the same).
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False
