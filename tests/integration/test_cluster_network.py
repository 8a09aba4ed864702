"""Services and cluster DNS for real nodes (``infra.local_cluster.network``): kube-proxy and CoreDNS of a cluster of
its own, with two real nodes whose kubelets point pods at the cluster DNS.

A pod on one node reaches the API server through the ``kubernetes`` Service (the in-cluster configuration's
``KUBERNETES_SERVICE_HOST``), resolves a Service by its full name and reaches the pod behind it on the other
node; a pod beside that pod reaches it by the Service's short name; this machine reaches a ClusterIP; a
second kube-proxy is refused; and the cluster's deletion leaves no iptables chain and no process behind.

One test, in an xdist group of its own: a kube-proxy per machine, so no other test may start one meanwhile,
and the steps share one cluster, which the last deletes (pytest 9 ignores xdist 3.8's groups, so one test is
what keeps them together).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra import images
from infra.local_cluster import LocalCluster, process_alive
from infra.local_cluster.network import COREDNS, KUBE_PROXY, ClusterNetwork, ClusterNetworkError
from infra.local_cluster.real_node import RealNode, RealNodeSpec, unavailable_reason
from tests.integration.kube import create_in, namespace_manifest, wait_for

if (reason := unavailable_reason()) is not None:
    pytest.skip(reason, allow_module_level=True)

pytestmark = pytest.mark.xdist_group("cluster-network")

NAMESPACE = "web"
SERVICE = "hello"
GREETING = "hello from a pod behind a Service"
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# Retries what the first packets may miss: kube-proxy and CoreDNS follow a new Service's endpoints within a second.
RETRY = 'retry() { n=0; until "$@"; do n=$((n + 1)); [ "$n" -lt 20 ] || return 1; sleep 1; done; }\n'


@dataclass(frozen=True)
class Network:
    cluster: LocalCluster
    client: RealNode  # where the pods asking run
    server: RealNode  # where the pod behind the Service runs
    started: dict[str, int]  # the pids of kube-proxy and CoreDNS


def pinned(name: str, node: RealNode, script: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A busybox pod on ``node`` running ``script`` (``sh -c``)."""
    container = {"name": "main", "image": images.busybox_image().reference, "args": [script]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}},
        "spec": {
            "nodeName": node.name,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
        },
    }


def phase(cluster: LocalCluster, pod: str) -> str:
    return cluster.kubectl("get", "pod", pod, "-n", NAMESPACE, "-o", "jsonpath={.status.phase}")


def run_to_the_end(network: Network, name: str, node: RealNode, script: str) -> str:
    """Run ``script`` in a pod on ``node`` until it ends; its output, the test failing with it if the pod failed."""
    create_in(network.cluster, NAMESPACE, pinned(name, node, "set -e\n" + RETRY + script))
    wait_for(f"pod {name} to end", lambda: phase(network.cluster, name) in ("Succeeded", "Failed"), 90)
    logs = "".join(p.read_text() for p in node.pod_logs.glob(f"{NAMESPACE}_{name}_*/main/*.log"))
    assert phase(network.cluster, name) == "Succeeded", logs
    return logs


def cluster_ip(cluster: LocalCluster, namespace: str, name: str) -> str:
    return cluster.kubectl("get", "service", name, "-n", namespace, "-o", "jsonpath={.spec.clusterIP}")


@pytest.fixture
def network(tmp_path: Path, record_property: Callable[[str, object], None]) -> Iterator[Network]:
    cluster = LocalCluster("network", workdir=tmp_path / "kwok")
    try:
        cluster.create()
        cluster_network = ClusterNetwork(cluster)
        dns = cluster_network.dns_address()
        client, server = (
            RealNode(cluster, RealNodeSpec(f"net-{role}", cpu="500m", memory="512Mi", cluster_dns=dns))
            for role in ("client", "server")
        )
        for node in (client, server):
            node.start()
            images.import_image(images.busybox_image(), node.containerd_socket)
        started = time.monotonic()
        cluster_network.start(proxy_node=client.name)
        record_property("figure", f"kube-proxy and CoreDNS ready in {time.monotonic() - started:.1f}s")
        pids = {
            name: int((cluster.directory / "processes" / f"{name}.pid").read_text()) for name in (KUBE_PROXY, COREDNS)
        }
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(namespace_manifest(NAMESPACE).to_dict()))
        wait_for("the namespace's default service account", lambda: _has_default_account(cluster))
        serve = (
            f"mkdir -p /tmp/www && echo '{GREETING}' >/tmp/www/index.html && exec busybox httpd -f -p 8080 -h /tmp/www"
        )
        create_in(cluster, NAMESPACE, pinned("web", server, serve, labels={"app": SERVICE}))
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            "spec": {"selector": {"app": SERVICE}, "ports": [{"port": 80, "targetPort": 8080}]},
        }
        create_in(cluster, NAMESPACE, service)
        wait_for("the web pod to run", lambda: phase(cluster, "web") == "Running")
        yield Network(cluster, client, server, pids)
    finally:
        cluster.delete()


def _has_default_account(cluster: LocalCluster) -> bool:
    return bool(cluster.kubectl("get", "serviceaccounts", "-n", NAMESPACE, "-o", "name").strip())


def check_a_pod_reaches_the_api_server_through_the_kubernetes_service(network: Network) -> None:
    # What in-cluster configuration does: the kubernetes Service's ClusterIP and port from the environment.
    script = (
        f'retry wget -q -O - --no-check-certificate --header "Authorization: Bearer $(cat {SERVICE_ACCOUNT}/token)" '
        "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/version\n"
        'echo "via $KUBERNETES_SERVICE_HOST"\n'
    )
    logs = run_to_the_end(network, "in-cluster", network.client, script)

    assert '"gitVersion": "v' in logs
    assert f"via {cluster_ip(network.cluster, 'default', 'kubernetes')}" in logs


def check_a_pod_resolves_a_service_by_name_and_reaches_the_pod_behind_it_on_another_node(network: Network) -> None:
    full_name = f"{SERVICE}.{NAMESPACE}.svc.cluster.local"
    script = f"cat /etc/resolv.conf\nretry busybox nslookup {full_name}\nretry wget -q -O - http://{full_name}/\n"
    logs = run_to_the_end(network, "by-full-name", network.client, script)

    dns = ClusterNetwork(network.cluster).dns_address()
    assert f"nameserver {dns}" in logs, "the kubelet points pods at the cluster DNS"
    assert f"search {NAMESPACE}.svc.cluster.local svc.cluster.local cluster.local" in logs
    assert cluster_ip(network.cluster, NAMESPACE, SERVICE) in logs, "the name resolves to the Service's ClusterIP"
    assert GREETING in logs


def check_a_pod_beside_the_one_behind_a_service_reaches_it_by_the_short_name(network: Network) -> None:
    # Through the Service back onto its own bridge: the reply is un-NATed only if bridged frames pass iptables.
    logs = run_to_the_end(network, "by-short-name", network.server, f"retry wget -q -O - http://{SERVICE}/\n")

    assert GREETING in logs


def check_this_machine_reaches_a_cluster_ip(network: Network) -> None:
    url = f"http://{cluster_ip(network.cluster, NAMESPACE, SERVICE)}/"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert GREETING in response.read().decode()


def check_a_second_kube_proxy_on_the_machine_is_refused(tmp_path: Path) -> None:
    other = LocalCluster("other", workdir=tmp_path / "kwok")

    with pytest.raises(ClusterNetworkError, match=r"another kube-proxy runs on this machine \(pid \d+") as refused:
        ClusterNetwork(other).start(proxy_node="any")

    assert "One kube-proxy per machine" in str(refused.value)
    assert not (other.directory / "network").exists(), "refused before anything was written or started"


def kube_chains() -> list[str]:
    """The KUBE- lines of the machine's IPv4 and IPv6 rules."""
    lines = []
    for save in ("iptables-save", "ip6tables-save"):
        dump = subprocess.run([save], capture_output=True, text=True, check=True).stdout
        lines += [line for line in dump.splitlines() if "KUBE-" in line]
    return lines


def processes_naming(directory: Path) -> list[str]:
    """The command lines of the machine's processes that name ``directory`` (or a path under it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            command = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if str(directory) in command:
                found.append(command)
    return found


def check_deleting_the_cluster_leaves_no_chain_and_no_process(network: Network) -> None:
    assert kube_chains(), "kube-proxy's chains while it runs"

    network.cluster.delete()

    assert kube_chains() == []
    assert [name for name, pid in network.started.items() if process_alive(pid)] == []
    assert processes_naming(network.cluster.directory) == []


def test_pods_on_real_nodes_reach_services_by_name_and_deleting_the_cluster_leaves_nothing(
    network: Network, tmp_path: Path
) -> None:
    check_a_pod_reaches_the_api_server_through_the_kubernetes_service(network)
    check_a_pod_resolves_a_service_by_name_and_reaches_the_pod_behind_it_on_another_node(network)
    check_a_pod_beside_the_one_behind_a_service_reaches_it_by_the_short_name(network)
    check_this_machine_reaches_a_cluster_ip(network)
    check_a_second_kube_proxy_on_the_machine_is_refused(tmp_path)
    check_deleting_the_cluster_leaves_no_chain_and_no_process(network)
