"""Latency histograms read from a component's Prometheus ``/metrics``: esi's extender handler time per verb, the
second scheduler's own latencies; p50 and p99 between two readings, as the buckets' bounds allow."""

from __future__ import annotations

import re
import ssl
import urllib.request

from bench.apiserver import metric_labels
from infra.stacks.second_scheduler import SecondScheduler

__all__ = [
    "EXTENDER_HISTOGRAMS",
    "SCHEDULER_HISTOGRAMS",
    "Histograms",
    "extender_buckets",
    "handler_times",
    "scheduler_buckets",
    "scrape",
]

_BUCKET_LINE = re.compile(r"^(?P<metric>\w+)_bucket\{(?P<labels>[^}]*)\} (?P<count>\S+)$", re.MULTILINE)
# Histograms read, and the label naming each series: the extender's handler time per verb; the second
# scheduler's time to find a node for a pod (its filter plugins and the extender's filter call, as the scheduler
# sees it) and a pod's time from entering its queue to bound (every attempt, the extender's bind call included).
EXTENDER_HISTOGRAMS = {"esi_extender_request_duration_seconds": "route"}
SCHEDULER_HISTOGRAMS = {
    "scheduler_scheduling_algorithm_duration_seconds": "",
    "scheduler_pod_scheduling_sli_duration_seconds": "",
}

Histograms = dict[tuple[str, float], float]


def scrape(url: str, histograms: dict[str, str], context: ssl.SSLContext | None = None) -> Histograms:
    """The ``histograms`` (metric -> the label naming its series, "" for one series) served at ``url``:
    (series, bucket bound) -> count so far, series summed over their other labels."""
    with urllib.request.urlopen(url, timeout=10, context=context) as response:  # noqa: S310 (our own URL)
        text = response.read().decode()
    counts: Histograms = {}
    for match in _BUCKET_LINE.finditer(text):
        if match["metric"] not in histograms:
            continue
        labels = metric_labels(match["labels"])
        series_label = histograms[match["metric"]]
        series = labels.get(series_label, "") if series_label else match["metric"].removeprefix("scheduler_")
        key = (series, float("inf") if labels["le"] == "+Inf" else float(labels["le"]))
        counts[key] = counts.get(key, 0.0) + float(match["count"])
    return counts


def extender_buckets(api_url: str) -> Histograms:
    return scrape(f"{api_url}/metrics", EXTENDER_HISTOGRAMS)


def scheduler_buckets(scheduler: SecondScheduler) -> Histograms:
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed; loopback only
    return scrape(f"https://127.0.0.1:{scheduler.port}/metrics", SCHEDULER_HISTOGRAMS, insecure)


def handler_times(before: Histograms, after: Histograms) -> str:
    """p50 and p99 of each series between two scrapes, as the histogram's bucket bounds allow (<=)."""
    lines = []
    for series in sorted({series for series, _ in after}):
        bounds = sorted(le for s, le in after if s == series)
        counts = [after[(series, le)] - before.get((series, le), 0.0) for le in bounds]
        if not counts or counts[-1] == 0:
            continue
        quantiles = [next(le for le, c in zip(bounds, counts, strict=True) if c >= q * counts[-1]) for q in (0.5, 0.99)]
        p50, p99 = (q * 1000 for q in quantiles)
        lines.append(f"    {series:<40} {int(counts[-1]):6d}  p50 <= {p50:g} ms  p99 <= {p99:g} ms")
    return "\n".join(lines)
