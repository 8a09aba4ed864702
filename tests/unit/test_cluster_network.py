"""Pure pieces of a local cluster's Services and DNS (``infra.local_cluster.network``) and a kubelet's DNS settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.local_cluster.network import (
    DNS_SERVICE,
    corefile,
    dns_endpoint_slice,
    dns_service,
    dns_service_address,
    kube_proxy_configuration,
)
from infra.local_cluster.real_node import _cluster_dns


@pytest.mark.parametrize(
    ("kubernetes_service", "dns"),
    [("10.0.0.1", "10.0.0.10"), ("10.96.0.1", "10.96.0.10"), ("172.20.0.1", "172.20.0.10")],
)
def test_cluster_dns_is_the_tenth_address_of_the_service_range(kubernetes_service: str, dns: str) -> None:
    assert dns_service_address(kubernetes_service) == dns


def test_the_dns_service_has_no_selector_and_its_slice_names_coredns_on_this_machine() -> None:
    service = dns_service("10.0.0.10")
    endpoint_slice = dns_endpoint_slice("192.0.2.2", 40053)

    assert (service["metadata"]["namespace"], service["metadata"]["name"]) == DNS_SERVICE
    assert "selector" not in service["spec"], "the endpoints are CoreDNS's, not pods'"
    assert service["spec"]["clusterIP"] == "10.0.0.10"
    assert {(p["protocol"], p["port"]) for p in service["spec"]["ports"]} == {("UDP", 53), ("TCP", 53)}
    labels = endpoint_slice["metadata"]["labels"]
    assert labels["kubernetes.io/service-name"] == DNS_SERVICE[1]
    assert labels["endpointslice.kubernetes.io/managed-by"] != "endpointslice-controller.k8s.io"
    assert endpoint_slice["metadata"]["namespace"] == DNS_SERVICE[0]
    assert endpoint_slice["endpoints"] == [{"addresses": ["192.0.2.2"], "conditions": {"ready": True}}]
    # kube-proxy pairs a Service's ports with its slices' by name and protocol.
    service_ports = {(p["name"], p["protocol"]) for p in service["spec"]["ports"]}
    assert {(p["name"], p["protocol"]) for p in endpoint_slice["ports"]} == service_ports
    assert {p["port"] for p in endpoint_slice["ports"]} == {40053}


def test_corefile_serves_the_cluster_domain_from_the_cluster_and_forwards_the_rest() -> None:
    text = corefile("192.0.2.2", 40053, 40054, Path("/c/kubeconfig.yaml"), upstream=Path("/etc/resolv.conf"))

    assert text.startswith(".:40053 {")
    assert "bind 192.0.2.2" in text
    assert "ready 127.0.0.1:40054" in text
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa {" in text
    assert "kubeconfig /c/kubeconfig.yaml" in text
    assert "forward . /etc/resolv.conf" in text
    assert text.count("{") == text.count("}")


def test_kube_proxy_runs_iptables_mode_for_the_pod_network_and_leaves_the_machines_sysctls_alone() -> None:
    config = kube_proxy_configuration(
        kubeconfig=Path("/c/kubeconfig.yaml"), node="real-0", healthz_port=41000, metrics_port=41001
    )

    assert (config["apiVersion"], config["kind"]) == ("kubeproxy.config.k8s.io/v1alpha1", "KubeProxyConfiguration")
    assert (config["mode"], config["clusterCIDR"], config["detectLocalMode"]) == (
        "iptables",
        "10.88.0.0/16",
        "ClusterCIDR",
    )
    assert config["hostnameOverride"] == "real-0"
    assert config["clientConnection"] == {"kubeconfig": "/c/kubeconfig.yaml"}
    assert (config["healthzBindAddress"], config["metricsBindAddress"]) == ("127.0.0.1:41000", "127.0.0.1:41001")
    # Zero (or false) is "leave it as it is": nf_conntrack_max, its timeouts and route_localnet stay untouched.
    assert config["conntrack"]["maxPerCore"] == 0
    assert all(config["conntrack"][k] == "0s" for k in config["conntrack"] if k.endswith("Timeout"))
    assert config["iptables"]["localhostNodePorts"] is False


def test_a_kubelet_points_pods_at_cluster_dns_only_when_given_one() -> None:
    assert _cluster_dns(None) == {}
    assert _cluster_dns("10.0.0.10") == {"clusterDNS": ["10.0.0.10"], "clusterDomain": "cluster.local"}
