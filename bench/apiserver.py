"""What a local cluster's API server has done, read from its ``/metrics``: the writes it answered and the watch
events it sent — every write is sent to every watcher of its resource, so writes are what a benchmark's way
costs the API server beyond its own requests; and a bare client to time the API server's own answers."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from typing import Any

from lightkube import KubeConfig
from lightkube.config.client_adapter import verify_cluster

from infra.local_cluster import LocalCluster

__all__ = ["BareApi", "api_requests", "metric_labels", "request_table"]

_LABEL = re.compile(r'(?P<name>\w+)="(?P<value>[^"]*)"')
_REQUESTS = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<count>\S+)$", re.MULTILINE)
_WATCH_EVENTS = re.compile(
    r"^apiserver_watch_events_(?P<what>total|sizes_sum)\{(?P<labels>[^}]*)\} (?P<count>\S+)$", re.MULTILINE
)


def metric_labels(text: str) -> dict[str, str]:
    """The labels of a Prometheus sample, from the text between its braces."""
    return {label["name"]: label["value"] for label in _LABEL.finditer(text)}


def api_requests(cluster: LocalCluster) -> dict[str, float]:
    """What the API server has done so far: writes answered per verb, resource and subresource ("PATCH
    pods/status"), and watch events sent per resource, counted ("watch events pods") and in bytes ("watch
    KiB pods")."""
    metrics = cluster.kubectl("get", "--raw", "/metrics")
    counts: dict[str, float] = {}
    for match in _REQUESTS.finditer(metrics):
        labels = metric_labels(match["labels"])
        if labels.get("verb") in {"WATCH", "LIST", "GET"}:
            continue
        resource = "/".join(part for part in (labels.get("resource"), labels.get("subresource")) if part)
        key = f"{labels.get('verb')} {resource}"
        counts[key] = counts.get(key, 0.0) + float(match["count"])
    for match in _WATCH_EVENTS.finditer(metrics):
        labels = metric_labels(match["labels"])
        key = f"watch {'events' if match['what'] == 'total' else 'KiB'} {labels.get('resource')}"
        counts[key] = counts.get(key, 0.0) + float(match["count"]) / (1 if match["what"] == "total" else 1024)
    return counts


def request_table(before: dict[str, float], after: dict[str, float], count: int, unit: str) -> str:
    """The writes the API server answered between two readings, most first, and per ``unit`` (``count`` of
    them); then the watch events it sent for pods and Testbeds."""
    made = {key: after[key] - before.get(key, 0.0) for key in after}
    writes = {key: n for key, n in made.items() if not key.startswith("watch ")}
    lines = [
        f"    {key:<40} {int(n):6d}  ({n / count:4.2f} per {unit})"
        for key, n in sorted(writes.items(), key=lambda item: -item[1])
        if n > 0
    ]
    total = sum(writes.values())
    lines.append(f"    {'all writes':<40} {int(total):6d}  ({total / count:4.2f} per {unit})")
    for kind in ("pods", "testbeds"):
        events, kib = made.get(f"watch events {kind}", 0.0), made.get(f"watch KiB {kind}", 0.0)
        what = f"watch events sent, {kind}"
        lines.append(f"    {what:<40} {int(events):6d}  ({events / count:4.2f} per {unit}, {kib:,.0f} KiB)")
    return "\n".join(lines)


class BareApi:
    """One keep-alive TLS connection to a local cluster's API server as its kubeconfig's user, with nothing of
    a client library in between: what a request costs the API server itself, and the network, alone."""

    def __init__(self, cluster: LocalCluster) -> None:
        config = KubeConfig.from_file(cluster.kubeconfig).get()
        user = None if config is None else config.user
        if config is None or user is None or not (user.client_cert or user.client_cert_data):
            raise ValueError(f"{cluster.kubeconfig}: no user with a client certificate")
        context = verify_cluster(config.cluster, user, config.abs_file)  # the CA and the certificate, as lightkube
        server = urllib.parse.urlsplit(config.cluster.server)
        self._connection = http.client.HTTPSConnection(server.hostname or "", server.port, context=context)

    def close(self) -> None:
        self._connection.close()

    def send(self, method: str, path: str, body: dict[str, Any]) -> None:
        """``method`` ``path`` with ``body`` as JSON; raises if the answer is not a success."""
        self._connection.request(method, path, json.dumps(body), {"Content-Type": "application/json"})
        answer = self._connection.getresponse()
        text = answer.read()
        if answer.status >= 300:
            raise RuntimeError(f"{method} {path}: {answer.status} {text[:300]!r}")
