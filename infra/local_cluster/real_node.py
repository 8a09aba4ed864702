"""Real nodes in the local cluster: a kubelet with a containerd of its own, beside the KWOK nodes.

A ``RealNode`` joins the control plane of a local cluster (``ControlPlane``) and runs real containers (runc, overlayfs,
CNI), so what a kubelet decides (admission by allocatable resources, OutOfcpu, the pod lifecycle) happens
for real. It needs root and Debian's packages (``python -m infra.toolchain.node_packages ensure``); the kubelet comes
from the toolchain (``kubernetes``), the sandbox image from ``infra.images``.

**Identity.** The kwokctl API server authorizes with ``Node,RBAC``; the kubelet authenticates with a client
certificate for ``system:node:<name>`` in the group ``system:nodes``, signed by the cluster's CA (its
``pki/``), so the Node authorizer grants it exactly a kubelet's rights. Its own serving certificate is
self-signed; it accepts clients with certificates of the cluster's CA and asks the API server to authorize
them (so ``kubectl logs``/``exec`` are refused: the API server presents no client certificate to kubelets;
container logs are in ``<node>/pod-logs``).

**Networking.** Each node has a bridge (``esi-<id>``) and a /24 of ``10.88.0.0/16`` of its own (the
lowest one no route uses, chosen at the first start), through a bridge + host-local + loopback conflist;
no masquerading and no port mapping, so no iptables rule is made. The kubelet registers with the address
the API server advertises (the ``kubernetes`` EndpointSlice's, which kwokctl puts in the serving
certificate); pods reach the API server at ``pod_api_server_url`` (that address and the secure port),
with valid TLS against the cluster CA. Services and cluster DNS are the cluster's, not a node's
(``infra.local_cluster.network``): a node given ``RealNodeSpec.cluster_dns`` points its pods' resolv.conf at that
address; without them the ``kubernetes`` Service's ClusterIP does not answer, and clients in pods are given
the URL explicitly.

**Resources.** The kubelet sees the whole machine; ``RealNodeSpec.cpu``/``memory`` are what the node
offers (allocatable): the rest is ``systemReserved`` (memory also keeps the hard eviction threshold
aside). Pods' cgroups are limited to allocatable (``enforceNodeAllocatable: [pods]``), under a
``cgroupRoot`` of the node's own.

**Cleanup.** ``stop`` ends the kubelet and containerd and leaves containers running (a restarted node
adopts them); ``delete`` drains the node through the API (the kubelet stops the sandboxes, which tears
down their networks), stops both, kills whatever still runs in the node's cgroups and every shim of its
containerd, unmounts everything under its directories, removes its cgroups from every hierarchy, its
bridge and leftover veths, its Node object and its files. ``LocalCluster.delete`` deletes every real node.

Layout: ``<cluster>/real-nodes/<name>/`` holds containerd's root, state and config, the CNI config and IPAM
state, the kubelet's config, kubeconfig and certificate, and the pod logs. containerd's socket and the
kubelet's root dir (which holds the kubelet's own sockets) are in ``/var/lib/esi/<id>/``: a unix socket's
path must stay under 108 bytes, and a cluster's directory can be deep.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esi.objects.ghosts import GHOST_IMAGE
from infra import images, toolchain
from infra.local_cluster.control_plane import CLUSTER_DOMAIN, ClusterError, ControlPlane, free_port, process_alive
from infra.toolchain import commands
from infra.toolchain.node_packages import CNI_BIN_DIR, missing
from kube.resources import API_SERVER_SLICE, api_server_for_pods

__all__ = [
    "POD_NETWORK",
    "SHORT_ROOT",
    "RealNode",
    "RealNodeError",
    "RealNodeSpec",
    "advertised_address",
    "pod_api_server_url",
    "real_nodes_of",
    "unavailable_reason",
]

REAL_NODES_DIR = "real-nodes"
SHORT_ROOT = Path("/var/lib/esi")
CGROUP_ROOT = Path("/sys/fs/cgroup")
CNI_RESULTS = Path("/var/lib/cni/results")
SHIM_SOCKETS = Path("/run/containerd/s")  # containerd 1.6 puts every shim's socket here, whatever its state dir
POD_NETWORK = ipaddress.IPv4Network("10.88.0.0/16")
EVICTION_MEMORY = 100 * 2**20  # memory.available hard eviction threshold, kept out of allocatable
DRAIN_TIMEOUT = 60.0
_QUANTITY = re.compile(r"(?P<number>[0-9.]+)(?P<suffix>m|Ki|Mi|Gi|Ti|k|M|G|T)?")
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


class RealNodeError(ClusterError):
    """Starting, using or deleting a real node failed; the message names the node and what went wrong."""


@dataclass(frozen=True)
class RealNodeSpec:
    """A real node: its name, what it offers to pods (Kubernetes quantities), its labels and taints.

    ``taints`` are written as ``key=value:Effect`` (or ``key:Effect``), as ``kubectl taint`` takes them.
    ``cluster_dns`` is the ClusterIP of the cluster's DNS (``infra.local_cluster.network``), for pods' resolv.conf
    (domain ``cluster.local``); None: pods get the machine's resolv.conf, as without cluster DNS.
    """

    name: str
    cpu: str = "1"
    memory: str = "2Gi"
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[str] = ()
    cluster_dns: str | None = None


def unavailable_reason() -> str | None:
    """Why real nodes cannot run on this machine, or None when they can."""
    if os.geteuid() != 0:
        return "real nodes need root (containerd, runc, cgroups, network devices)"
    absent = missing()
    if absent:
        return f"real nodes need Debian's {', '.join(absent)} (make node-packages)"
    if not (CGROUP_ROOT / "cpu").is_dir() and not (CGROUP_ROOT / "cgroup.controllers").is_file():
        return f"no cgroup hierarchy is mounted at {CGROUP_ROOT}"
    return None


def _millicores(quantity: str) -> int:
    match = _QUANTITY.fullmatch(quantity)
    if not match or match["suffix"] not in (None, "m"):
        raise RealNodeError(f"{quantity!r} is not a cpu quantity")
    number = float(match["number"])
    return round(number if match["suffix"] == "m" else number * 1000)


def _bytes(quantity: str) -> int:
    match = _QUANTITY.fullmatch(quantity)
    if not match or match["suffix"] == "m":
        raise RealNodeError(f"{quantity!r} is not a memory quantity")
    return round(float(match["number"]) * _SUFFIX[match["suffix"] or ""])


def _machine_memory() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise RealNodeError("/proc/meminfo has no MemTotal")


def _reserved(spec: RealNodeSpec) -> dict[str, str]:
    """``systemReserved`` that leaves the node offering exactly ``spec.cpu`` and ``spec.memory``."""
    cpu = (os.cpu_count() or 1) * 1000 - _millicores(spec.cpu)
    memory = _machine_memory() - EVICTION_MEMORY - _bytes(spec.memory)
    if cpu < 0 or memory < 0:
        raise RealNodeError(
            f"real node {spec.name}: cannot offer cpu {spec.cpu} and memory {spec.memory}; the machine has "
            f"{os.cpu_count()} cpus and {_machine_memory() // 2**20}Mi (less {EVICTION_MEMORY // 2**20}Mi "
            "kept for eviction)"
        )
    return {"cpu": f"{cpu}m", "memory": str(memory)}


def pod_api_server_url(cluster: ControlPlane) -> str:
    """The API server's URL for clients in pods on real nodes: the advertised address, the secure port.

    The address is the ``kubernetes`` EndpointSlice's (the API server's advertise address, reachable from
    the pod network through the bridge's gateway and named in the serving certificate).
    """
    namespace, name = API_SERVER_SLICE
    return api_server_for_pods(json.loads(cluster.kubectl("get", "endpointslice", name, "-n", namespace, "-o", "json")))


def advertised_address(cluster: ControlPlane) -> str:
    """The API server's advertised address: the machine's address pods on real nodes reach it at."""
    host = pod_api_server_url(cluster).removeprefix("https://").rsplit(":", 1)[0]
    return host.strip("[]")


def _run(cmd: Sequence[str | Path], what: str, *, timeout: float = 60, check: bool = True) -> str:
    return commands.run(cmd, error=RealNodeError, what=what, timeout=timeout, check=check)


def _routed_networks() -> list[ipaddress.IPv4Network]:
    routes = json.loads(_run(["ip", "-j", "-4", "route", "show", "table", "all"], "list routes"))
    networks = []
    for route in routes:
        with contextlib.suppress(ValueError):
            if route.get("dst", "default") != "default":
                networks.append(ipaddress.IPv4Network(route["dst"], strict=False))
    return networks


def _mount_points() -> list[Path]:
    """Mount points of this mount namespace, in mount order (``\\040`` and friends decoded)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        raw = line.split()[4]
        points.append(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), raw)))
    return points


def _cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (each v1 controller's, the named ones and the unified one)."""
    hierarchies = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        if right.split()[0] in ("cgroup", "cgroup2"):
            hierarchies.append(Path(left.split()[4]))
    return hierarchies


class RealNode:
    """One real node of ``cluster``: files under ``<cluster>/real-nodes/<name>/``, processes via ``start_process``."""

    def __init__(self, cluster: ControlPlane, spec: RealNodeSpec) -> None:
        self.cluster = cluster
        self.spec = spec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def directory(self) -> Path:
        return self.cluster.directory / REAL_NODES_DIR / self.name

    @property
    def id(self) -> str:
        """Short and unique on this machine: names the bridge, the cgroup root and the socket directory."""
        return hashlib.sha256(str(self.directory.resolve()).encode()).hexdigest()[:8]

    @property
    def bridge(self) -> str:
        return f"esi-{self.id}"

    @property
    def cgroup_root(self) -> str:
        return f"/esi-{self.id}"

    @property
    def short_dir(self) -> Path:
        """The node's directory at a short path: sockets (containerd's, the kubelet's) and the kubelet's root."""
        return SHORT_ROOT / self.id

    @property
    def containerd_socket(self) -> Path:
        return self.short_dir / "containerd.sock"

    @property
    def pod_logs(self) -> Path:
        """Container logs, ``<namespace>_<pod>_<uid>/<container>/<restart>.log`` (no ``kubectl logs`` here)."""
        return self.directory / "pod-logs"

    @property
    def _containerd_process(self) -> str:
        return f"{self.name}-containerd"

    @property
    def _kubelet_process(self) -> str:
        return f"{self.name}-kubelet"

    def running(self) -> bool:
        return self.cluster.process_running(self._kubelet_process)

    def kubelet_paused(self) -> contextlib.AbstractContextManager[None]:
        """Its kubelet frozen for the body and let go on after it (``ControlPlane.paused``)."""
        return self.cluster.paused(self._kubelet_process)

    # -- start ----------------------------------------------------------------------------------------------

    def start(self, *, timeout: float = 120) -> None:
        """Start containerd and the kubelet (writing their configuration first) and wait until the node is Ready."""
        if reason := unavailable_reason():
            raise RealNodeError(f"real node {self.name}: {reason}")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.short_dir.mkdir(parents=True, exist_ok=True)
        pause = images.pause_image()
        subnet = self._subnet()
        self._write_cni(subnet)
        self._write_containerd_config(pause.reference)
        if not self.cluster.process_running(self._containerd_process):
            self.containerd_socket.unlink(missing_ok=True)
            self.cluster.start_process(
                self._containerd_process, ["/usr/bin/containerd", "--config", str(self.directory / "containerd.toml")]
            )
        self._wait(self._cri_serving, "containerd's CRI plugin to serve", 30)
        images.import_image(pause, self.containerd_socket)
        # A ghost runs the pause image under its upstream name, which a real node has and this one cannot pull.
        images.alias_image(pause, GHOST_IMAGE, self.containerd_socket)
        self._write_kubelet_files()
        self._make_cgroups()
        if not self.running():
            self.cluster.start_process(self._kubelet_process, self._kubelet_argv())
        self._wait(self._registered, "the kubelet to register the node", timeout)
        self.cluster.kubectl(
            "wait", "--for=condition=Ready", f"node/{self.name}", f"--timeout={int(timeout)}s", timeout=timeout + 10
        )

    def _wait(self, condition: Any, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise RealNodeError(
                    f"real node {self.name}: timed out after {timeout:.0f}s waiting for {what} "
                    f"(logs: {self.cluster.logs_dir}/{self._containerd_process}.log, {self._kubelet_process}.log)"
                )
            if not self.cluster.process_running(self._containerd_process):
                log = self.cluster.logs_dir / f"{self._containerd_process}.log"
                raise RealNodeError(f"real node {self.name}: containerd exited (log: {log})")
            time.sleep(0.2)

    def _cri_serving(self) -> bool:
        if not self.containerd_socket.is_socket():
            return False
        listed = _run(["ctr", "-a", self.containerd_socket, "plugins", "ls"], f"real node {self.name}: containerd")
        cri = [line.split() for line in listed.splitlines() if " cri " in f" {line} "]
        if cri and cri[0][-1] != "ok":
            raise RealNodeError(
                f"real node {self.name}: containerd's CRI plugin did not load "
                f"(log: {self.cluster.logs_dir}/{self._containerd_process}.log)"
            )
        return bool(cri)

    def _registered(self) -> bool:
        if not self.running():
            raise RealNodeError(
                f"real node {self.name}: the kubelet exited (log: {self.cluster.logs_dir}/{self._kubelet_process}.log)"
            )
        return bool(
            self.cluster.kubectl("get", "nodes", "--field-selector", f"metadata.name={self.name}", "-o", "name")
        )

    def _subnet(self) -> ipaddress.IPv4Network:
        """The node's pod subnet: chosen once (the lowest /24 of POD_NETWORK no route uses), then kept."""
        recorded = self.directory / "subnet"
        if recorded.is_file():
            return ipaddress.IPv4Network(recorded.read_text().strip())
        # Subnets are chosen machine-wide (several test sessions' clusters and the local stack side by side).
        with commands.exclusive(SHORT_ROOT / "subnets.lock"):
            taken = _routed_networks()
            taken += [ipaddress.IPv4Network(p.read_text().strip()) for p in SHORT_ROOT.glob("*/subnet")]
            for candidate in POD_NETWORK.subnets(new_prefix=24):
                if not any(candidate.overlaps(network) for network in taken):
                    # Recorded machine-wide too, so a node not started yet keeps its claim.
                    (self.short_dir / "subnet").write_text(f"{candidate}\n")
                    recorded.write_text(f"{candidate}\n")
                    return candidate
        raise RealNodeError(f"real node {self.name}: every /24 of {POD_NETWORK} is in use")

    def _write_cni(self, subnet: ipaddress.IPv4Network) -> None:
        conf_dir = self.directory / "cni" / "net.d"
        conf_dir.mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "1.0.0",
            "name": f"esi-{self.id}",  # also names its entries in CNI_RESULTS
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": str(subnet)}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.directory / "cni" / "ipam"),
                    },
                },
                {"type": "loopback"},
            ],
        }
        (conf_dir / "10-esi.conflist").write_text(json.dumps(conflist, indent=2) + "\n")

    def _write_containerd_config(self, sandbox_image: str) -> None:
        root, state = self.directory / "containerd" / "root", self.directory / "containerd" / "state"

        def q(value: object) -> str:
            return json.dumps(str(value))  # a TOML basic string

        config = f"""\
version = 2
root = {q(root)}
state = {q(state)}
# Plugins this node does not use, some of which would touch paths shared with other containerds.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = {q(self.containerd_socket)}

[plugins."io.containerd.internal.v1.opt"]
  path = {q(self.directory / "containerd" / "opt")}

[plugins."io.containerd.runtime.v1.linux"]
  runtime_root = {q(state / "runc-v1")}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = {q(sandbox_image)}
  # Without CAP_SYS_RESOURCE the sandbox's oom_score_adj of -998 is refused and every sandbox fails.
  restrict_oom_score_adj = true
  # Network namespaces under this node's state, so deleting the node finds and unmounts them.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = {q(state / "runc")}
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {q(CNI_BIN_DIR)}
    conf_dir = {q(self.directory / "cni" / "net.d")}
"""
        (self.directory / "containerd.toml").write_text(config)

    def _write_kubelet_files(self) -> None:
        pki = self.directory / "pki"
        pki.mkdir(exist_ok=True)
        cluster_pki = self.cluster.directory / "pki"
        cert, key = pki / "kubelet-client.crt", pki / "kubelet-client.key"
        if not cert.is_file():
            self._issue_client_certificate(cluster_pki, cert, key)
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.cluster.server(), "certificate-authority": str(cluster_pki / "ca.crt")},
                }
            ],
            "users": [{"name": self.name, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "node", "context": {"cluster": "local", "user": self.name}}],
            "current-context": "node",
        }
        (self.directory / "kubeconfig.json").write_text(json.dumps(kubeconfig, indent=2) + "\n")
        config_path = self.directory / "kubelet.json"
        if config_path.is_file():
            config = json.loads(config_path.read_text())
            ports = {k: config[k] for k in ("port", "healthzPort")}
        else:
            ports = {"port": free_port(), "healthzPort": free_port()}
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            **ports,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "cgroupsPerQOS": True,
            # cgroup v1 (these machines): refused by default from Kubernetes 1.35 on, warned about before.
            "failCgroupV1": False,
            "failSwapOn": False,
            # kube-proxy (local_cluster.network) makes the chains it needs itself; the kubelet's would stay behind.
            "makeIPTablesUtilChains": False,
            "enforceNodeAllocatable": ["pods"],
            "systemReserved": _reserved(self.spec),
            "evictionHard": {
                "memory.available": str(EVICTION_MEMORY),
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            # Images cannot be pulled again here: the image garbage collector must never remove one.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "maxPods": self.spec.pods,
            "podLogsDir": str(self.pod_logs),
            "volumePluginDir": str(self.short_dir / "kubelet" / "volume-plugins"),
            "registerWithTaints": [_taint(t) for t in self.spec.taints],
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(cluster_pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            **_cluster_dns(self.spec.cluster_dns),
        }
        config_path.write_text(json.dumps(config, indent=2) + "\n")

    def _issue_client_certificate(self, cluster_pki: Path, cert: Path, key: Path) -> None:
        """A client certificate for ``system:node:<name>`` (group ``system:nodes``), signed by the cluster CA."""
        csr = cert.with_suffix(".csr")
        subject = f"/O=system:nodes/CN=system:node:{self.name}"
        what = f"real node {self.name}: client certificate"
        _run(
            ["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-subj", subject, "-out", csr],
            what,
        )
        _run(
            [
                "openssl", "x509", "-req", "-in", csr, "-CA", cluster_pki / "ca.crt", "-CAkey", cluster_pki / "ca.key",
                "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "3650", "-out", cert,
            ],
            what,
        )  # fmt: skip
        csr.unlink()

    def _make_cgroups(self) -> None:
        """The kubelet's ``cgroupRoot`` must exist in every hierarchy before it starts."""
        for hierarchy in _cgroup_hierarchies():
            cgroup = hierarchy / self.cgroup_root.lstrip("/")
            cgroup.mkdir(exist_ok=True)
            # A v1 cpuset cgroup starts with no cpus and no memory nodes: nothing could run in it.
            for setting in ("cpuset.cpus", "cpuset.mems"):
                if (cgroup / setting).is_file() and not (cgroup / setting).read_text().strip():
                    (cgroup / setting).write_text((hierarchy / setting).read_text())

    def _kubelet_argv(self) -> list[str]:
        labels = {"type": "real", "kubernetes.io/hostname": self.name, **self.spec.labels}
        return [
            str(toolchain.binary("kubelet")),
            f"--config={self.directory / 'kubelet.json'}",
            f"--kubeconfig={self.directory / 'kubeconfig.json'}",
            f"--root-dir={self.short_dir / 'kubelet'}",
            f"--cert-dir={self.short_dir / 'kubelet' / 'pki'}",
            f"--hostname-override={self.name}",
            f"--node-ip={advertised_address(self.cluster)}",
            f"--node-labels={','.join(f'{k}={v}' for k, v in labels.items())}",
        ]

    # -- stop and delete ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the kubelet and containerd; containers keep running, and a started node adopts them again."""
        self.cluster.stop_process(self._kubelet_process)
        self.cluster.stop_process(self._containerd_process)

    def delete(self) -> None:
        """Remove the node: no process, mount, cgroup, network device, Node object or file of it is left."""
        serving = self.cluster.serving()
        if serving and self.running():
            self._drain()
        self.stop()
        self._kill_leftovers()
        self._unmount()
        self._remove_cgroups()
        self._remove_network()
        self._remove_cni_results()
        if serving:
            # What could not be drained (the kubelet was stopped) no longer runs anywhere: remove it at once.
            self.cluster.kubectl(
                "delete", "pods", "--all-namespaces", "--field-selector", f"spec.nodeName={self.name}",
                "--force", "--grace-period=0", "--wait=false",
            )  # fmt: skip
            self.cluster.kubectl("delete", "node", self.name, "--ignore-not-found", "--wait=false")
        self._remove_legacy_log_links()
        shutil.rmtree(self.directory, ignore_errors=True)
        shutil.rmtree(self.short_dir, ignore_errors=True)

    def _drain(self) -> None:
        """Delete the node's pods and wait until the kubelet has stopped their sandboxes (networks torn down) and
        they are gone. Pods made again meanwhile (a Testbed's ghosts, a Deployment's) are not waited for: they are
        killed with what else is left."""
        selector = f"spec.nodeName={self.name}"

        def pods_here() -> set[str]:
            uids = self.cluster.kubectl(
                "get", "pods", "-A", "--field-selector", selector, "-o", "jsonpath={.items[*].metadata.uid}"
            )
            return set(uids.split())

        with contextlib.suppress(ClusterError):
            draining = pods_here()
            self.cluster.kubectl(
                "delete", "pods", "--all-namespaces", "--field-selector", selector, "--grace-period=1", "--wait=false"
            )
            deadline = time.monotonic() + DRAIN_TIMEOUT
            while draining & pods_here():
                if time.monotonic() > deadline:
                    break  # what still runs is killed below
                time.sleep(0.5)

    def _node_cgroups(self) -> list[Path]:
        return [
            h / self.cgroup_root.lstrip("/")
            for h in _cgroup_hierarchies()
            if (h / self.cgroup_root.lstrip("/")).is_dir()
        ]

    def _shims(self) -> dict[int, str]:
        """The shims serving this node's containerd (they outlive it), by pid: the container id each serves."""
        shims = {}
        marker = str(self.containerd_socket).encode()
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    argv = (proc / "cmdline").read_bytes().split(b"\0")
                    if marker in argv:
                        shims[int(proc.name)] = argv[argv.index(b"-id") + 1].decode()
        return shims

    def _leftover_pids(self) -> set[int]:
        """Processes in the node's cgroups, and its containerd's shims (wherever their cgroup is)."""
        pids = set(self._shims())
        for cgroup in self._node_cgroups():
            for procs in cgroup.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in procs.read_text().split())
        pids.discard(os.getpid())
        return {pid for pid in pids if process_alive(pid)}

    def _kill_leftovers(self) -> None:
        containers = set(self._shims().values())
        deadline = time.monotonic() + 10
        while pids := self._leftover_pids():
            if time.monotonic() > deadline:
                raise RealNodeError(f"real node {self.name}: processes {sorted(pids)} do not end")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        # A killed shim leaves its socket, named as containerd names it: the hash of address, namespace, id.
        for container in containers:
            key = f"{self.containerd_socket}/{images.CRI_NAMESPACE}/{container}"
            (SHIM_SOCKETS / hashlib.sha256(key.encode()).hexdigest()).unlink(missing_ok=True)

    def _unmount(self) -> None:
        prefixes = [self.directory.resolve(), self.short_dir]
        mounted = [p for p in _mount_points() if any(p == d or d in p.parents for d in prefixes)]
        # Deepest first; a path mounted several times is unmounted as often.
        for point in sorted(mounted, key=lambda p: len(p.parts), reverse=True):
            _run(["umount", "--lazy", point], f"real node {self.name}: unmount", check=False)
        left = [p for p in _mount_points() if any(p == d or d in p.parents for d in prefixes)]
        if left:
            raise RealNodeError(f"real node {self.name}: still mounted: {', '.join(map(str, left))}")

    def _remove_cgroups(self) -> None:
        for cgroup in self._node_cgroups():
            for directory, _, _ in sorted(os.walk(cgroup), key=lambda entry: len(entry[0]), reverse=True):
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(directory)

    def _remove_network(self) -> None:
        links = json.loads(_run(["ip", "-j", "link", "show", "master", self.bridge], "list links", check=False) or "[]")
        for link in links:
            _run(
                ["ip", "link", "delete", link["ifname"]], f"real node {self.name}: delete {link['ifname']}", check=False
            )
        if Path(f"/sys/class/net/{self.bridge}").exists():
            _run(["ip", "link", "delete", self.bridge], f"real node {self.name}: delete bridge {self.bridge}")

    def _remove_cni_results(self) -> None:
        """libcni's cache of what it set up (``/var/lib/cni/results``); a sandbox that was killed keeps its entry."""
        network = f"esi-{self.id}"
        for result in CNI_RESULTS.glob(f"{network}-*-eth0"):
            sandbox = result.name.removeprefix(f"{network}-").removesuffix("-eth0")
            (CNI_RESULTS / f"cni-loopback-{sandbox}-lo").unlink(missing_ok=True)
            result.unlink(missing_ok=True)

    def _remove_legacy_log_links(self) -> None:
        """The kubelet also links every container log from /var/log/containers; its links into our logs go."""
        legacy = Path("/var/log/containers")
        if legacy.is_dir():
            for link in legacy.iterdir():
                with contextlib.suppress(OSError):
                    if link.is_symlink() and Path(os.readlink(link)).is_relative_to(self.pod_logs):
                        link.unlink()


def _cluster_dns(address: str | None) -> dict[str, Any]:
    """The KubeletConfiguration's DNS settings: pods resolve through ``address`` in ``cluster.local``, or, without
    an address, through the machine's resolv.conf (the kubelet's default)."""
    return {} if address is None else {"clusterDNS": [address], "clusterDomain": CLUSTER_DOMAIN}


def _taint(text: str) -> dict[str, str]:
    match = re.fullmatch(r"(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(?P<effect>NoSchedule|PreferNoSchedule|NoExecute)", text)
    if not match:
        raise RealNodeError(f"taint {text!r} is not key=value:Effect")
    taint = {"key": match["key"], "effect": match["effect"]}
    if match["value"]:
        taint["value"] = match["value"]
    return taint


def real_nodes_of(cluster: ControlPlane) -> list[RealNode]:
    """The cluster's real nodes as found on disk (their specs are not kept: enough to stop or delete them)."""
    directory = cluster.directory / REAL_NODES_DIR
    if not directory.is_dir():
        return []
    return [RealNode(cluster, RealNodeSpec(d.name)) for d in sorted(directory.iterdir()) if d.is_dir()]
