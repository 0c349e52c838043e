"""Instant PromQL queries over Prometheus' HTTP API (``/api/v1/query``), with a deadline on every request.

The standard library's urllib is enough for one GET per query, and keeps
``devctl fleet`` free of any HTTP dependency. A view's queries go out at once
(``query_all``, a thread each: a thread waiting on its socket lets the others
decode), so a view costs its slowest query, not their sum. Every way a query can fail —
nothing listening, a timeout, an HTTP error, a reply that is not Prometheus'
JSON, a query Prometheus refuses — is one ``PrometheusError`` with a one-line
message, so the command can print it and exit 3.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Prometheus answers an instant query in milliseconds; a reply this big is not one.
MAX_REPLY_BYTES = 256 * 1024 * 1024


class PrometheusError(Exception):
    """A query that got no usable answer; the message is one line naming the server."""


@dataclass(frozen=True)
class Sample:
    """One element of an instant vector: its labels and its value."""

    labels: dict[str, str]
    value: float


def _base(url: str) -> str:
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}"
    return url.rstrip("/")


class Prometheus:
    """A Prometheus server (or anything serving its query API: Thanos, Mimir, VictoriaMetrics)."""

    def __init__(self, url: str, timeout: float = 5.0):
        self.url = _base(url)
        self.timeout = timeout

    def query_all(self, queries: Sequence[str]) -> list[list[Sample]]:
        """Each query's instant vector, asked concurrently; the first failure raises PrometheusError."""
        if len(queries) == 1:
            return [self.query(queries[0])]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(queries), thread_name_prefix="devctl-promql") as pool:
            return list(pool.map(self.query, queries))

    def query(self, promql: str) -> list[Sample]:
        """The instant vector ``promql`` evaluates to now; raises PrometheusError."""
        params = urllib.parse.urlencode({"query": promql, "timeout": f"{self.timeout:g}s"})
        request = urllib.request.Request(f"{self.url}/api/v1/query?{params}", headers={"Accept": "application/json"})
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                body = reply.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as e:
            raise PrometheusError(self._http_error(e)) from None
        except TimeoutError:
            raise PrometheusError(f"{self.url}: no answer within {self.timeout:g}s") from None
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                raise PrometheusError(f"{self.url}: no answer within {self.timeout:g}s") from None
            reason = e.reason.strerror if isinstance(e.reason, OSError) and e.reason.strerror else e.reason
            raise PrometheusError(f"{self.url}: cannot reach Prometheus: {reason}") from None
        except (OSError, ValueError) as e:  # a reset connection, a malformed URL
            raise PrometheusError(f"{self.url}: cannot reach Prometheus: {e}") from None
        finally:
            log.debug("query %s %r in %.1f ms", self.url, promql, (time.perf_counter() - started) * 1000)
        if len(body) > MAX_REPLY_BYTES:
            raise PrometheusError(f"{self.url}: the reply is larger than {MAX_REPLY_BYTES // 2**20} MiB")
        return self._vector(body)

    def _http_error(self, e: urllib.error.HTTPError) -> str:
        try:
            detail = json.loads(e.read(65536)).get("error")
        except (ValueError, AttributeError, OSError):
            detail = None
        return f"{self.url}: HTTP {e.code}" + (f": {detail}" if isinstance(detail, str) else f" {e.reason}")

    def _vector(self, body: bytes) -> list[Sample]:
        garbage = PrometheusError(f"{self.url}: the reply is not Prometheus' query API (is this a Prometheus URL?)")
        try:
            doc: Any = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise garbage from None
        if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
            raise garbage
        if doc["status"] == "error":
            raise PrometheusError(f"{self.url}: the query failed: {doc.get('error', 'no reason given')}")
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            raise garbage
        try:
            samples = [Sample(item["metric"], float(item["value"][1])) for item in data["result"]]
            # Label values are strings in Prometheus' API: one pass over all of them, in C, says so.
            if not all(type(s.labels) is dict for s in samples) or not {
                type(v) for s in samples for v in s.labels.values()
            } <= {str}:
                raise TypeError
        except (KeyError, TypeError, ValueError, IndexError):
            raise garbage from None
        return samples
