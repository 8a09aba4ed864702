"""Services and cluster DNS for a local cluster's real nodes: one kube-proxy and one CoreDNS, as its processes.

Real nodes (``infra.local_cluster.real_node``) share the machine's network namespace, each pod on a node's bridge in
``10.88.0.0/16``. ``ClusterNetwork.start`` gives the cluster what a real cluster's nodes have:

- **Services:** a kube-proxy (toolchain ``kubernetes``) in iptables mode, with the cluster's admin kubeconfig,
  running as one of the real nodes (``proxy_node``) and serving all of them: they share the machine's
  iptables. Pods reach ClusterIPs (the ``kubernetes`` Service's included, so in-cluster configuration works),
  and so does this machine. It touches no sysctl (no conntrack sizing or timeouts, no ``route_localnet``);
  its health and metrics listen on free loopback ports.
- **Cluster DNS:** a CoreDNS (toolchain ``coredns``) with the ``kubernetes`` plugin for ``cluster.local``
  reading the cluster through the same kubeconfig, anything else forwarded to the machine's resolv.conf. It
  listens on a free port of the API server's advertised address, the machine address pods already reach;
  the selector-less Service ``kube-system/kube-dns`` (port 53, UDP and TCP) at the Service range's tenth
  address, as kubeadm places it, has an EndpointSlice naming that address and port, so kube-proxy routes
  ``<ClusterIP>:53`` to CoreDNS. Real nodes started with ``RealNodeSpec.cluster_dns = dns_address()`` put it
  in their pods' resolv.conf.

Pod → ClusterIP → pod on the same bridge needs the bridge's frames to pass iptables
(``net.bridge.bridge-nf-call-iptables``, br_netfilter) for the reply to be un-NATed, and the bridge's hairpin
mode for a pod reaching itself through its Service; ``start`` refuses a machine without the former (it
changes no sysctl), the node's CNI configuration sets the latter. kube-proxy masquerades what comes from
outside the pod network.

**One kube-proxy per machine.** Every kube-proxy owns the same iptables chains (``KUBE-SERVICES``, ...), and
two local clusters hand out the same ClusterIPs: a second one would rewrite the first's rules. ``start``
refuses while any kube-proxy runs on the machine, naming it; ``stop`` (also done by ``LocalCluster.stop`` and
``LocalCluster.delete``) ends both processes and removes the chains (``kube-proxy --cleanup``, and the
``KUBE-FIREWALL`` chain it leaves).

Files: ``<cluster>/network/`` holds kube-proxy's configuration and CoreDNS's Corefile; the logs are
``logs/kube-proxy.log`` and ``logs/coredns.log``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import subprocess
from pathlib import Path
from typing import Any, Final

from infra import toolchain
from infra.local_cluster.control_plane import CLUSTER_DOMAIN, ClusterError, ControlPlane, free_port, process_alive
from infra.local_cluster.real_node import POD_NETWORK, SHORT_ROOT, advertised_address, unavailable_reason
from infra.local_cluster.supervise import STOP_GRACE, supervised
from infra.toolchain import commands

__all__ = [
    "DNS_SERVICE",
    "ClusterNetwork",
    "ClusterNetworkError",
    "corefile",
    "dns_endpoint_slice",
    "dns_service",
    "dns_service_address",
    "kube_proxy_configuration",
]

DNS_SERVICE: Final = ("kube-system", "kube-dns")  # namespace, name: where clients look for cluster DNS
DNS_PORT: Final = 53
KUBE_PROXY: Final = "kube-proxy"  # process names, and their logs' names
COREDNS: Final = "coredns"
MANAGED_BY: Final = "esi-cluster-network"  # the EndpointSlice's manager: not the endpointslice controller
PROXY_LOCK: Final = SHORT_ROOT / "kube-proxy.lock"
BRIDGE_NF_CALL_IPTABLES: Final = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
RESOLV_CONF: Final = Path("/etc/resolv.conf")
FIREWALL_CHAIN: Final = "KUBE-FIREWALL"


class ClusterNetworkError(ClusterError):
    """Starting or stopping a cluster's kube-proxy or CoreDNS failed, or another kube-proxy runs on the machine."""


def dns_service_address(kubernetes_service_ip: str) -> str:
    """The cluster DNS's ClusterIP: the tenth address of the Service range, whose first the ``kubernetes``
    Service holds (the lower band the API server keeps for addresses asked for by name)."""
    return str(ipaddress.ip_address(kubernetes_service_ip) + 9)


def dns_service(cluster_ip: str) -> dict[str, Any]:
    """``kube-system/kube-dns``: no selector, its endpoints are CoreDNS's (``dns_endpoint_slice``)."""
    namespace, name = DNS_SERVICE
    ports = [
        {"name": "dns", "port": DNS_PORT, "protocol": "UDP"},
        {"name": "dns-tcp", "port": DNS_PORT, "protocol": "TCP"},
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": {"k8s-app": "kube-dns"}},
        "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "ports": ports},
    }


def dns_endpoint_slice(address: str, port: int) -> dict[str, Any]:
    """The ``kube-dns`` Service's one endpoint: CoreDNS at ``address:port`` on this machine (ports named as the
    Service's, which is how kube-proxy pairs them)."""
    namespace, name = DNS_SERVICE
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-coredns",
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": MANAGED_BY},
        },
        "addressType": "IPv6" if ":" in address else "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [
            {"name": "dns", "port": port, "protocol": "UDP"},
            {"name": "dns-tcp", "port": port, "protocol": "TCP"},
        ],
    }


def corefile(address: str, port: int, ready_port: int, kubeconfig: Path, upstream: Path = RESOLV_CONF) -> str:
    """CoreDNS's configuration: ``cluster.local`` (and reverse lookups of its addresses) from the cluster, the
    rest forwarded to the nameservers of ``upstream``; ``/ready`` on ``127.0.0.1:ready_port`` once the
    ``kubernetes`` plugin has read the cluster."""
    return f"""\
.:{port} {{
    bind {address}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    forward . {upstream}
    cache 30
    loop
}}
"""


def kube_proxy_configuration(*, kubeconfig: Path, node: str, healthz_port: int, metrics_port: int) -> dict[str, Any]:
    """kube-proxy's KubeProxyConfiguration: iptables mode for the pod network, running as ``node``.

    Zero conntrack settings and ``localhostNodePorts: false`` keep it from writing sysctls
    (``nf_conntrack_max``, its timeouts, ``route_localnet``) that belong to the machine, not to a test cluster.
    """
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node,
        "mode": "iptables",
        "clusterCIDR": str(POD_NETWORK),
        "detectLocalMode": "ClusterCIDR",
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "nodePortAddresses": ["primary"],
        "iptables": {"localhostNodePorts": False, "minSyncPeriod": "1s"},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
    }


def _free_port_on(address: str) -> int:
    """A port free for both TCP and UDP on ``address`` right now (DNS answers on both)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    for _ in range(20):
        port = free_port()
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_STREAM) as tcp:
            tcp.bind((address, port))
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.bind((address, port))
                return port
    raise ClusterNetworkError(f"no port is free for TCP and UDP on {address}")


def _kube_proxies() -> dict[int, str]:
    """Every kube-proxy running on the machine (a kube-proxy binary, not a supervisor naming it): pid → command."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if Path(argv[0].decode()).name == KUBE_PROXY and process_alive(int(proc.name)):
                    found[int(proc.name)] = " ".join(a.decode() for a in argv if a)
    return found


def _routed(cluster_ip: str) -> bool:
    """Whether the machine's NAT rules send traffic for ``cluster_ip`` somewhere (kube-proxy has synced)."""
    rules = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True, check=False).stdout
    return f"-d {cluster_ip}/32" in rules


def _remove_firewall_chain() -> None:
    """Remove ``KUBE-FIREWALL`` and the jumps to it, which kube-proxy makes at start and ``--cleanup`` leaves
    (the chain is also a kubelet's; the kubelets of real nodes make none, ``makeIPTablesUtilChains: false``)."""
    for iptables in ("iptables", "ip6tables"):
        for hook in ("INPUT", "OUTPUT"):
            for _ in range(10):  # once per jump: a chain hooked twice is unhooked twice
                if _iptables(iptables, "-D", hook, "-j", FIREWALL_CHAIN) != 0:
                    break
        _iptables(iptables, "-F", FIREWALL_CHAIN)
        _iptables(iptables, "-X", FIREWALL_CHAIN)


def _iptables(iptables: str, *args: str) -> int:
    """Change the filter table; the exit status (not zero: there was nothing to change)."""
    return subprocess.run([iptables, "-w", "-t", "filter", *args], capture_output=True, check=False).returncode


def _bridge_frames_pass_iptables() -> bool:
    try:
        return BRIDGE_NF_CALL_IPTABLES.read_text().strip() == "1"
    except OSError:
        return False


class ClusterNetwork:
    """kube-proxy and CoreDNS of one local cluster, for the pods on its real nodes."""

    def __init__(self, cluster: ControlPlane) -> None:
        self.cluster = cluster

    @property
    def directory(self) -> Path:
        return self.cluster.directory / "network"

    @property
    def _proxy_config(self) -> Path:
        """Present from the start of its kube-proxy until its chains are removed (what ``stop`` cleans up)."""
        return self.directory / "kube-proxy.json"

    def dns_address(self) -> str:
        """The ClusterIP of the cluster's DNS (``kube-system/kube-dns``), for ``RealNodeSpec.cluster_dns``."""
        return dns_service_address(
            self.cluster.kubectl("get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")
        )

    def running(self) -> bool:
        return self.cluster.process_running(KUBE_PROXY) and self.cluster.process_running(COREDNS)

    def start(self, proxy_node: str, *, supervise: bool = False, timeout: float = 60) -> None:
        """Start CoreDNS and kube-proxy (each unless it runs; ``supervise``: started again whenever it exits) and
        return once CoreDNS has read the cluster and kube-proxy has written its rules.

        ``proxy_node`` is the real node kube-proxy runs as: it reads that Node's addresses when it starts
        (waiting up to 30 s for it to register). ``ClusterNetworkError`` when another kube-proxy runs on this
        machine, or bridged frames bypass iptables.
        """
        if reason := unavailable_reason():
            raise ClusterNetworkError(f"cluster {self.cluster.name}: Services for real nodes: {reason}")
        if not _bridge_frames_pass_iptables():
            raise ClusterNetworkError(
                f"cluster {self.cluster.name}: {BRIDGE_NF_CALL_IPTABLES} is not 1 (load br_netfilter and set "
                "net.bridge.bridge-nf-call-iptables=1): a pod's reply to another pod reached through a Service "
                "would bypass the Service's NAT"
            )
        if not self.cluster.process_running(KUBE_PROXY):
            self._refuse_a_second_kube_proxy()
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.cluster.process_running(COREDNS):
            self._start_coredns(supervise, timeout)
        if not self.cluster.process_running(KUBE_PROXY):
            self._start_kube_proxy(proxy_node, supervise, timeout)

    def _start_coredns(self, supervise: bool, timeout: float) -> None:
        address = advertised_address(self.cluster)
        port, ready_port = _free_port_on(address), free_port()
        config = self.directory / "Corefile"
        config.write_text(corefile(address, port, ready_port, self.cluster.kubeconfig))
        self.cluster.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", "-",
            input_text=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "List",
                    "items": [dns_service(self.dns_address()), dns_endpoint_slice(address, port)],
                }
            ),
        )  # fmt: skip
        argv = [str(toolchain.binary("coredns")), "-conf", str(config)]
        self.cluster.start_process(COREDNS, supervised(COREDNS, argv) if supervise else argv)
        ready = f"http://127.0.0.1:{ready_port}/ready"
        self.cluster.await_process(COREDNS, lambda: commands.answers(ready), timeout=timeout, what="CoreDNS")

    def _start_kube_proxy(self, node: str, supervise: bool, timeout: float) -> None:
        healthz_port = free_port()
        config = kube_proxy_configuration(
            kubeconfig=self.cluster.kubeconfig, node=node, healthz_port=healthz_port, metrics_port=free_port()
        )
        argv = [str(toolchain.binary(KUBE_PROXY)), f"--config={self._proxy_config}"]
        # Checked and started under one machine-wide lock: two clusters starting at once see each other.
        with commands.exclusive(PROXY_LOCK):
            self._refuse_a_second_kube_proxy()
            self._proxy_config.write_text(json.dumps(config, indent=2) + "\n")
            self.cluster.start_process(KUBE_PROXY, supervised(KUBE_PROXY, argv) if supervise else argv)
        healthz, dns = f"http://127.0.0.1:{healthz_port}/healthz", self.dns_address()
        self.cluster.await_process(
            KUBE_PROXY, lambda: commands.answers(healthz) and _routed(dns), timeout=timeout, what="kube-proxy"
        )

    def _refuse_a_second_kube_proxy(self) -> None:
        if others := _kube_proxies():
            running = "; ".join(f"pid {pid}: {command}" for pid, command in sorted(others.items()))
            raise ClusterNetworkError(
                f"cluster {self.cluster.name}: another kube-proxy runs on this machine ({running}). One kube-proxy "
                "per machine: every kube-proxy owns the same iptables chains and local clusters hand out the same "
                "ClusterIPs, so a second one would rewrite the first's rules. Stop the other cluster's network "
                "(ClusterNetwork.stop, or delete that cluster) first."
            )

    def stop(self) -> None:
        """Stop kube-proxy and remove its iptables chains, stop CoreDNS; nothing when the network never ran."""
        self.cluster.stop_process(KUBE_PROXY, timeout=STOP_GRACE + 5)  # a supervisor gives it STOP_GRACE
        if self._proxy_config.is_file():
            with commands.exclusive(PROXY_LOCK):
                # Another cluster's kube-proxy may have started since ours ended: its chains are not ours to remove.
                if not _kube_proxies():
                    commands.run(
                        [toolchain.binary(KUBE_PROXY), "--cleanup"],
                        error=ClusterNetworkError,
                        what=f"cluster {self.cluster.name}: remove kube-proxy's iptables chains",
                        timeout=60,
                    )
                    _remove_firewall_chain()
                self._proxy_config.unlink()
        self.cluster.stop_process(COREDNS)
