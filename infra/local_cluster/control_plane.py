"""A real Kubernetes control plane on this machine, with simulated nodes.

``ControlPlane`` drives kwokctl's *binary* runtime: etcd, kube-apiserver, kube-controller-manager and the
default kube-scheduler run as local processes from the binaries ``make tools`` built, and the kwok
controller plays kubelet for every node we create (KWOK runs no containers; its stages move pods through
their lifecycle). ``LocalCluster`` (``infra.local_cluster.cluster``) adds its real nodes and
their network; real nodes and the network build on this module.

Processes that belong to the cluster but are not kwokctl's (second schedulers, later esi's own
components) are started with ``start_process``: detached, logging beside the control plane's logs, their
pid recorded, so ``delete`` stops them even when the Python process that started them is gone.

Layout on disk (``workdir`` defaults to ``<repo>/.esi/kwok``): ``clusters/<name>/kubeconfig.yaml``,
``clusters/<name>/logs/<component>.log``, ``clusters/<name>/processes/<component>.pid``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from infra import toolchain
from infra.toolchain import commands

__all__ = [
    "CLUSTER_DOMAIN",
    "CONTROLLER_MANAGER_QPS",
    "DEFAULT_WORKDIR",
    "KWOK_NODE_ANNOTATION",
    "ClusterError",
    "ControlPlane",
    "NodeSpec",
    "free_port",
    "node_manifest",
    "process_alive",
]

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
CLUSTER_DOMAIN = "cluster.local"
# kube-apiserver's default Service range (kwokctl sets none): the `kubernetes` Service is its first address.
KUBERNETES_SERVICE_IP = "10.0.0.1"
# What the API server's certificate must name for clients inside pods, as in any cluster: the `kubernetes`
# Service's ClusterIP (in-cluster configuration) and its DNS names (e.g. Spark's driver, kubernetes.default.svc).
API_SERVER_SERVICE_NAMES = (
    KUBERNETES_SERVICE_IP,
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
)
DEFAULT_WORKDIR = toolchain.REPO_ROOT / ".esi" / "kwok"
# Seconds a first ``create`` waits for the control plane before starting it afresh (it takes about 5).
FIRST_ATTEMPT_TIMEOUT = 60.0
CONTROLLER_MANAGER_QPS = 200  # its client's requests/s (burst twice that); Kubernetes' default is 20
# Held by whoever runs kwokctl create or start on this machine. kwokctl gives a new cluster the highest
# loopback ports below 32767 that nothing listens on, so two creates at once can pick the same port, and a
# create can pick a port of a cluster whose control plane is stopped.
KWOKCTL_LOCK = Path(tempfile.gettempdir()) / "esi-kwokctl-create.lock"
KWOKCTL_BINARIES = {
    "kubeApiserverBinary": "kube-apiserver",
    "kubeControllerManagerBinary": "kube-controller-manager",
    "kubeSchedulerBinary": "kube-scheduler",
    "kubectlBinary": "kubectl",
    "kwokControllerBinary": "kwok",
    "etcdBinary": "etcd",
    "etcdctlBinary": "etcdctl",
}


class ClusterError(RuntimeError):
    """Creating, using or deleting the local cluster failed; the message names the command and its output."""


# Ports free_port handed out on this machine, a line "<port> <time>" each, kept for PORT_HANDOUT_SECONDS.
PORTS_HANDED_OUT = Path(tempfile.gettempdir()) / "esi-ports-handed-out"
# Longer than a caller takes to start what listens on its port (a `pulumi up` takes about a minute).
PORT_HANDOUT_SECONDS = 900.0


# free_port's ports start here and end below the kernel's ephemeral range.
LISTEN_PORTS_FROM = 20000


def free_port() -> int:
    """A TCP port on loopback that nothing is bound to right now, and that no process of this machine was given
    by this function in the last ``PORT_HANDOUT_SECONDS``: a caller picks its ports before it starts what
    listens on them, and two callers (pytest workers) must not be given the same one meanwhile. The port is below
    the kernel's ephemeral range, from which every outgoing connection takes its local port: one there could take
    the port before its listener starts (a watch's connection holds it for minutes)."""
    listen_ports = _listen_ports()
    with commands.exclusive(PORTS_HANDED_OUT.with_suffix(".lock")):
        now = time.time()
        handed: dict[int, float] = {}
        with contextlib.suppress(OSError):
            for line in PORTS_HANDED_OUT.read_text().splitlines():
                number, _, at = line.partition(" ")
                with contextlib.suppress(ValueError):
                    if now - float(at) < PORT_HANDOUT_SECONDS:
                        handed[int(number)] = float(at)
        for _ in range(1000):
            port = secrets.choice(listen_ports) if listen_ports else _any_port()
            if port not in handed and _free_now(port):
                break
        else:
            raise ClusterError(f"no free TCP port on 127.0.0.1 in {listen_ports} after 1000 tries")
        handed[port] = now
        PORTS_HANDED_OUT.write_text("".join(f"{p} {at}\n" for p, at in handed.items()))
        return port


def _listen_ports() -> range:
    """The ports from ``LISTEN_PORTS_FROM`` up to the kernel's ephemeral range (empty where that starts lower)."""
    try:
        ephemeral_from = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_from = 32768  # Linux's default
    return range(LISTEN_PORTS_FROM, max(LISTEN_PORTS_FROM, ephemeral_from))


def _any_port() -> int:
    """A port the kernel gives a socket bound to port 0 on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listen_on(port: int) -> socket.socket | None:
    """A socket listening on loopback ``port``, or None when another process listens there."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port left in TIME_WAIT is free
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError:
        sock.close()
        return None
    return sock


def _free_now(port: int) -> bool:
    """Whether a listener could take loopback ``port`` now (``_listen_on``)."""
    sock = _listen_on(port)
    if sock is None:
        return False
    sock.close()
    return True


@dataclass(frozen=True)
class NodeSpec:
    """A simulated node: its name, allocatable capacity (Kubernetes quantities) and labels."""

    name: str
    cpu: str = "4"
    memory: str = "16Gi"
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)


def node_manifest(spec: NodeSpec) -> dict[str, Any]:
    """The Node object the kwok controller adopts (it manages nodes carrying the KWOK annotation)."""
    resources = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": spec.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **spec.labels,
            },
        },
        "status": {"allocatable": resources, "capacity": resources},
    }


def _run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
    timeout: float = 300,
) -> str:
    return commands.run(cmd, error=ClusterError, timeout=timeout, env=env, input_text=input_text)


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


# Each node's name, the status of its Ready condition and its taints' keys, a line each.
_READY_NODES = (
    'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} '
    '{.spec.taints[*].key}{"\\n"}{end}'
)
# Put on a new node until the controller manager sees it Ready: no pod is scheduled there while it is.
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


class ControlPlane:
    """The control plane of one named local cluster, with its KWOK nodes and local processes. Creating an
    existing cluster is an error; deleting a missing one is not."""

    def __init__(self, name: str, workdir: Path = DEFAULT_WORKDIR, *, node_lease_seconds: int | None = None) -> None:
        """``node_lease_seconds``: the KWOK controller's node leases (None: kwokctl's, 200 s, renewed every 50 s).
        A KWOK controller plays the kubelet of a node only while it holds the node's lease, and one started
        afresh (``restart_control_plane``) takes a node over only once the lease of the one before it expired:
        a cluster whose control plane restarts often wants them short (and then renews them more often)."""
        self.name = name
        self.workdir = workdir
        self.node_lease_seconds = node_lease_seconds

    @property
    def directory(self) -> Path:
        return self.workdir / "clusters" / self.name

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig.yaml"

    @property
    def logs_dir(self) -> Path:
        return self.directory / "logs"

    def exists(self) -> bool:
        return self.kubeconfig.is_file()

    def serving(self) -> bool:
        """Whether its kube-apiserver answers /readyz."""
        try:
            self.kubectl("get", "--raw", "/readyz", timeout=10)
        except ClusterError:
            return False
        return True

    def stop(self) -> None:
        """Stop its processes, keeping its state (etcd data, certificates) for ``start``."""
        for pid_file in sorted(self._processes_dir.glob("*.pid")):
            self.stop_process(pid_file.stem)
        self._stop_control_plane()

    def _stop_control_plane(self) -> None:
        """Stop the control plane's processes and wait until they are gone (a minute, then SIGKILL)."""
        control_plane = self._control_plane_pids()
        _run([toolchain.binary("kwokctl"), "stop", "cluster", "--name", self.name], env=self._kwokctl_env())
        # kwokctl signals them and returns; a kube-apiserver still shutting down holds its port.
        _await_exit(control_plane)

    def start(self, *, timeout: float = 180) -> None:
        """Start the control plane of a cluster that exists but is stopped (``stop``, or a reboot).

        Processes started with ``start_process`` are not restarted: their owners start them again.
        """
        self._start(timeout, held=[])

    def _start(self, timeout: float, held: Sequence[socket.socket]) -> None:
        """Let go of the ``held`` ports and start the control plane on them, before any other kwokctl create
        or start of this machine may pick a port."""
        try:
            with commands.exclusive(KWOKCTL_LOCK):
                for sock in held:
                    sock.close()
                self._check_ports_free()
                _run(
                    [
                        toolchain.binary("kwokctl"),
                        "start",
                        "cluster",
                        "--name",
                        self.name,
                        "--wait",
                        f"{int(timeout)}s",
                    ],
                    env=self._kwokctl_env(),
                    timeout=timeout + 30,
                )
            self._wait_for_api(timeout)
        except ClusterError as err:
            raise ClusterError(f"{err}\n{self.logs_tail()}") from err

    def restart_control_plane(self, *, timeout: float = 180) -> None:
        """Stop its control plane (etcd, kube-apiserver, controller manager, scheduler, KWOK) and start it again,
        as a crash of the control plane would, keeping etcd's data; processes of ``start_process`` keep
        running and see the API server go away and come back."""
        with self.control_plane_down(timeout=timeout):
            pass

    @contextlib.contextmanager
    def control_plane_down(self, *, timeout: float = 180) -> Iterator[None]:
        """Its control plane stopped (etcd's data kept) for the body, started again after it; processes of
        ``start_process`` keep running. Its ports are held meanwhile (``_down``)."""
        with self._down(self._stop_control_plane, timeout):
            yield

    @contextlib.contextmanager
    def stopped(self, *, timeout: float = 180) -> Iterator[None]:
        """Stopped as by ``stop`` for the body, its control plane started again after it (as by ``start``: the
        processes of ``start_process`` are not). Its ports are held meanwhile (``_down``)."""
        with self._down(self.stop, timeout):
            yield

    @contextlib.contextmanager
    def _down(self, stop: Callable[[], None], timeout: float) -> Iterator[None]:
        """``stop()`` for the body, the control plane started again after it.

        While it is down this process listens on its ports, so that no cluster created meanwhile takes one; they
        are stopped and held under the lock of creates, as a component that exits first lets go of its port.
        """
        with commands.exclusive(KWOKCTL_LOCK):
            stop()
            held = self._hold_ports()
        try:
            yield
            self._start(timeout, held)
        finally:
            for sock in held:
                sock.close()

    def _hold_ports(self) -> list[socket.socket]:
        """A listening socket on each of the control plane's ports that nothing else listens on."""
        return [sock for port in self._control_plane_ports().values() if (sock := _listen_on(port)) is not None]

    def _components(self) -> list[dict[str, Any]]:
        """The control plane's components as kwokctl runs them (kwok.yaml): name, binary, args, workDir, ports."""
        config = next(yaml.safe_load_all((self.directory / "kwok.yaml").read_text()))
        return list(config.get("components") or [])

    def _control_plane_ports(self) -> dict[str, int]:
        """The ports kwokctl gave the control plane's components, by ``<component>/<port name>``."""
        return {
            f"{component['name']}/{port.get('name', port['port'])}": int(port["port"])
            for component in self._components()
            for port in component.get("ports") or []
        }

    def _check_ports_free(self) -> None:
        """ClusterError naming each of the control plane's ports another process listens on."""
        taken = [f"{port} ({what})" for what, port in self._control_plane_ports().items() if not _free_now(port)]
        if taken:
            raise ClusterError(
                f"cluster {self.name!r} cannot start: another process listens on its port {', '.join(taken)}; "
                f"stop it (`ss -ltnp` names it), or delete this cluster and create it again"
            )

    def _control_plane_pids(self) -> list[int]:
        """The pids kwokctl recorded for the control plane's components."""
        return [pid for pid_file in self._control_plane_pids_dir.glob("*.pid") if (pid := _read_pid(pid_file))]

    def exited_components(self) -> list[str]:
        """The control plane's components whose process no longer runs: nothing starts one again."""
        return sorted(
            pid_file.stem
            for pid_file in self._control_plane_pids_dir.glob("*.pid")
            if (pid := _read_pid(pid_file)) is None or not process_alive(pid)
        )

    def start_exited_components(self) -> list[str]:
        """Start each of ``exited_components`` again (``_launch_component``); their names."""
        exited = self.exited_components()
        # Under the lock of creates: no cluster created meanwhile takes a port one of them let go.
        with commands.exclusive(KWOKCTL_LOCK):
            for name in exited:
                self._launch_component(name)
        return exited

    def _launch_component(self, name: str) -> None:
        """Start the control plane's component ``name`` as kwokctl starts it (kwok.yaml: its binary, arguments,
        environment and directory; output appended to its log), and record its pid. The caller holds
        ``KWOKCTL_LOCK``."""
        (component,) = [component for component in self._components() if component["name"] == name]
        env = {**os.environ, **{e["name"]: e["value"] for e in component.get("envs") or []}}
        argv = [component["binary"], *(component.get("args") or [])]
        pid = _launch(argv, log=self.logs_dir / f"{name}.log", env=env, cwd=Path(component["workDir"]))
        (self._control_plane_pids_dir / f"{name}.pid").write_text(str(pid))

    @property
    def _control_plane_pids_dir(self) -> Path:
        return self.directory / "pids"

    @contextlib.contextmanager
    def paused(self, component: str) -> Iterator[None]:
        """``component`` (one of the control plane's, e.g. ``kwok-controller``, or one ``start_process``
        started) frozen (SIGSTOP) for the body and let go on (SIGCONT) after it: a component fallen behind,
        which then acts on what it missed meanwhile."""
        pid = self._pid(component) or _read_pid(self._control_plane_pids_dir / f"{component}.pid")
        if pid is None or not process_alive(pid):
            raise ClusterError(f"{component} does not run in cluster {self.name!r}")
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def server(self) -> str:
        """The kube-apiserver URL from the kubeconfig."""
        config = json.loads(self.kubectl("config", "view", "--raw", "-o", "json"))
        return str(config["clusters"][0]["cluster"]["server"])

    def component_logs(self) -> dict[str, Path]:
        """Every component's log file, by component name (etcd, kube-apiserver, ..., second schedulers)."""
        if not self.logs_dir.is_dir():
            return {}
        return {p.stem: p for p in sorted(self.logs_dir.glob("*.log"))}

    def _kwokctl_env(self) -> dict[str, str]:
        # KWOK_RUNTIME: a docker client exists on these machines and kwokctl would otherwise pick it.
        return {**os.environ, "KWOK_WORKDIR": str(self.workdir), "KWOK_RUNTIME": "binary"}

    def _kwokctl_config(self) -> dict[str, Any]:
        pins = toolchain.load_pins()
        options: dict[str, Any] = {
            "runtime": "binary",
            # Decides which flags kwokctl passes; its built-in default is a newer Kubernetes.
            "kubeVersion": "v" + pins["kubernetes"],
            "securePort": True,
            "kubeAuthorization": True,
            "kubeApiserverCertSANs": list(API_SERVER_SERVICE_NAMES),
        }
        # Every binary is ours; an option left out would make kwokctl download a default.
        options.update({option: str(toolchain.binary(name, pins)) for option, name in KWOKCTL_BINARIES.items()})
        # The kwok controller plays kubelet only for the nodes made for it (node_manifest's annotation), never
        # for a real node (infra.local_cluster.real_node), whose kubelet owns its node's and pods' status.
        kwok_only = [
            {"key": "manage-all-nodes", "value": "false", "override": True},
            {"key": "manage-nodes-with-annotation-selector", "value": f"{KWOK_NODE_ANNOTATION}=fake"},
        ]
        if self.node_lease_seconds is not None:
            kwok_only.append(
                {"key": "node-lease-duration-seconds", "value": str(self.node_lease_seconds), "override": True}
            )
        # The controller manager's client is limited to 20 requests/s by default: it lifts the not-ready taint
        # of new nodes one PATCH at a time, and 2,000 new nodes waited 7.5 minutes for it.
        controller_rate = [
            {"key": "kube-api-qps", "value": str(CONTROLLER_MANAGER_QPS)},
            {"key": "kube-api-burst", "value": str(2 * CONTROLLER_MANAGER_QPS)},
        ]
        # One of each runs, so a Lease decides nothing. With leader election, an API server that does not answer
        # for 10 s (a busy machine) makes each exit for good ("leaderelection lost"), and nothing starts it again:
        # the cluster then silently stops scheduling and running its controllers.
        alone = [{"key": "leader-elect", "value": "false"}]
        return {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokctlConfiguration",
            "options": options,
            "componentsPatches": [
                {"name": "kwok-controller", "extraArgs": kwok_only},
                {"name": "kube-controller-manager", "extraArgs": [*controller_rate, *alone]},
                {"name": "kube-scheduler", "extraArgs": alone},
            ],
        }

    def create(self, nodes: Sequence[NodeSpec] = (), *, timeout: float = 180) -> None:
        """Start the control plane, wait until it serves, then add ``nodes`` and wait until they are Ready.

        A control plane that is not ready within a minute (it takes seconds) is deleted and created once
        more with the whole ``timeout``: kwokctl chooses its ports before it starts the components, and any
        process on the machine can take one of them in between. The error of a failed attempt carries the
        end of every component's log.
        """
        if self.exists():
            raise ClusterError(f"cluster {self.name!r} already exists in {self.directory}")
        config_path = self.workdir / f"{self.name}.kwokctl.yaml"
        config_path.parent.mkdir(parents=True, exist_ok=True)
        config_path.write_text(json.dumps(self._kwokctl_config(), indent=2))
        try:
            self._create_control_plane(config_path, min(timeout, FIRST_ATTEMPT_TIMEOUT))
        except ClusterError as first:
            if timeout <= FIRST_ATTEMPT_TIMEOUT:
                raise
            print(f"{self.name}: {first}\ncreating the cluster once more", file=sys.stderr)
            self.delete()
            config_path.write_text(json.dumps(self._kwokctl_config(), indent=2))
            self._create_control_plane(config_path, timeout)
        if nodes:
            self.add_nodes(nodes, timeout=timeout)

    def _create_control_plane(self, config_path: Path, timeout: float) -> None:
        try:
            with commands.exclusive(KWOKCTL_LOCK):
                _run(
                    [
                        toolchain.binary("kwokctl"),
                        "create",
                        "cluster",
                        "--name",
                        self.name,
                        "--config",
                        config_path,
                        "--kubeconfig=",  # leave ~/.kube/config alone; ours is in the cluster directory
                        "--wait",
                        f"{int(timeout)}s",
                    ],
                    env=self._kwokctl_env(),
                    timeout=timeout + 30,
                )
            self._wait_for_api(timeout)
        except ClusterError as err:
            raise ClusterError(f"{err}\n{self.logs_tail()}") from err

    def logs_tail(self, lines: int = 12) -> str:
        """The last ``lines`` lines of every component's log, under the component's name."""
        parts = []
        for component, path in self.component_logs().items():
            try:
                tail = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError as err:
                tail = [f"(unreadable: {err})"]
            parts.append(f"--- {component} ({path}):\n" + "\n".join(tail))
        return "\n".join(parts) if parts else f"(no component logs in {self.logs_dir})"

    def _wait_for_api(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                # The default service account appears once the controller-manager runs: pods can be created.
                self.kubectl("get", "serviceaccount", "default", "-n", "default", timeout=10)
            except ClusterError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
            else:
                return

    def add_nodes(self, nodes: Sequence[NodeSpec], *, timeout: float = 120) -> None:
        """Create ``nodes`` and return once each is Ready and no longer tainted not-ready, so pods can be
        scheduled there (with thousands of nodes the controller manager takes minutes to lift the taints), all
        within ``timeout`` seconds. One list of all nodes per poll: ``kubectl wait`` goes node by node (thousands
        took ten minutes)."""
        deadline = time.monotonic() + timeout
        items = [node_manifest(n) for n in nodes]
        # kubectl creates the nodes one request after another: thousands take minutes on a busy machine.
        manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        self.kubectl("apply", "-f", "-", input_text=manifest, timeout=timeout)
        wanted = {n.name for n in nodes}
        while True:
            listed = self.kubectl("get", "nodes", "-o", _READY_NODES, timeout=timeout)
            lines = (line.split(" ") for line in listed.splitlines() if line)
            pending = wanted - {
                name for name, status, *taints in lines if status == "True" and NOT_READY_TAINT not in taints
            }
            if not pending:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{len(pending)} nodes not Ready (or still tainted {NOT_READY_TAINT}) after {timeout:.0f}s: "
                    f"{', '.join(sorted(pending)[:5])}"
                )
            time.sleep(0.2)

    def delete(self) -> None:
        """Stop every process of the cluster (second schedulers included) and remove its files."""
        for pid_file in sorted(self._processes_dir.glob("*.pid")):
            self.stop_process(pid_file.stem)
        if self.directory.exists():
            control_plane = self._control_plane_pids()
            # kwokctl removes the cluster's context from --kubeconfig (default ~/.kube/config, which it never
            # touched); an empty value is refused, so name the cluster's own kubeconfig, deleted anyway.
            _run(
                [
                    toolchain.binary("kwokctl"),
                    "delete",
                    "cluster",
                    "--name",
                    self.name,
                    f"--kubeconfig={self.kubeconfig}",
                ],
                env=self._kwokctl_env(),
            )
            _await_exit(control_plane)  # kwokctl signals them and returns, as at stop
        (self.workdir / f"{self.name}.kwokctl.yaml").unlink(missing_ok=True)

    def kubectl(self, *args: str, input_text: str | None = None, timeout: float = 60) -> str:
        return _run(
            [toolchain.binary("kubectl"), "--kubeconfig", self.kubeconfig, *args],
            input_text=input_text,
            timeout=timeout,
        )

    def wait_for_crds(self, names: Sequence[str], *, timeout: float = 60) -> None:
        """Return once the API server serves each CRD (``<plural>.<group>``): its condition Established is True.

        Not ``kubectl wait --for=condition=Established``: that fails at once on a CRD whose status has no
        conditions yet (just created, on a busy API server).
        """
        deadline = time.monotonic() + timeout
        while True:
            listed = json.loads(self.kubectl("get", "crd", *names, "-o", "json"))
            crds = listed["items"] if listed.get("kind") == "List" else [listed]  # one name: the object itself
            pending = [crd["metadata"]["name"] for crd in crds if not _established(crd)]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"CRDs not established after {timeout:.0f}s: {', '.join(pending)}")
            time.sleep(0.2)

    @property
    def _processes_dir(self) -> Path:
        return self.directory / "processes"

    def start_process(self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
        """Start a component of this cluster in the background (``_launch``), output to ``logs/<name>.log``; its
        pid."""
        if self.process_running(name):
            raise ClusterError(f"{name} is already running for cluster {self.name!r}")
        self._processes_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        pid = _launch(argv, log=self.logs_dir / f"{name}.log", env=env)
        (self._processes_dir / f"{name}.pid").write_text(str(pid))
        return pid

    def crash_and_restart_api_server(self, *, timeout: float = 60) -> None:
        """Kill its kube-apiserver (SIGKILL: a crash) and start it again (``_launch_component``), the other
        components running on, and wait until it serves: it comes back without the watches it served, and their
        clients must take up again."""
        pid = _read_pid(self._control_plane_pids_dir / "kube-apiserver.pid")
        if pid is None or not process_alive(pid):
            raise ClusterError(f"kube-apiserver does not run in cluster {self.name!r}")
        log = self.logs_dir / "kube-apiserver.log"
        # Under the lock of creates until it serves again: no cluster created meanwhile takes the port it let go.
        with commands.exclusive(KWOKCTL_LOCK):
            os.kill(pid, signal.SIGKILL)
            _await_exit([pid])
            self._launch_component("kube-apiserver")
            try:
                self._wait_for_api(timeout)
            except ClusterError as err:
                raise ClusterError(
                    f"the kube-apiserver of cluster {self.name!r} did not serve again within {timeout:.0f}s of its "
                    f"restart; see {log}\n{err}"
                ) from err

    def await_process(self, name: str, ready: Callable[[], bool], *, timeout: float, what: str) -> None:
        """Wait until ``ready()`` for the process ``name`` (``what`` names it in errors). ``ClusterError`` naming
        its log when it exits first, or when it is not ready within ``timeout`` seconds (it is stopped then)."""
        log = self.logs_dir / f"{name}.log"
        deadline = time.monotonic() + timeout
        while not ready():
            if not self.process_running(name):
                raise ClusterError(f"{what} exited at start; see {log}")
            if time.monotonic() > deadline:
                self.stop_process(name)
                raise ClusterError(f"{what} was not ready in {timeout:.0f}s; see {log}")
            time.sleep(0.2)

    def process_running(self, name: str) -> bool:
        pid = self._pid(name)
        return pid is not None and process_alive(pid)

    def stop_process(self, name: str, *, timeout: float = 10) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; a process that is already gone is fine."""
        pid = self._pid(name)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while process_alive(pid):
                if time.monotonic() > deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    break
                time.sleep(0.05)
        (self._processes_dir / f"{name}.pid").unlink(missing_ok=True)

    def children_of(self, name: str) -> list[int]:
        """The processes component ``name``'s process started: for a supervised component, the component."""
        pid = self._pid(name)
        return [] if pid is None else child_pids(pid)

    def _pid(self, name: str) -> int | None:
        return _read_pid(self._processes_dir / f"{name}.pid")


def _launch(
    argv: Sequence[str | os.PathLike[str]], *, log: Path, env: Mapping[str, str] | None, cwd: Path | None = None
) -> int:
    """Start ``argv`` in the background (in ``cwd``), output appended to ``log``; its pid.

    A shell starts it in a session of its own and exits at once, so the process is nobody's child: it outlives
    this Python process (and its process group), and no zombie of it can linger here.
    """
    # setsid: a session of its own, so that whoever started it (a Pulumi provider plugin, which its host ends
    # with its whole process group) can go without taking it along.
    launcher = 'cd "$1" || exit 1; log=$2; shift 2; setsid "$@" >>"$log" 2>&1 </dev/null & echo $!'
    return int(_run(["sh", "-c", launcher, "sh", cwd or Path.cwd(), log, *argv], env=env))


def _read_pid(pid_file: Path) -> int | None:
    """The pid a pid file holds; None when there is no such file or it holds no number."""
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def child_pids(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (from /proc)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rpartition(")")[2].split()[1]) == parent:
                children.append(int(stat.parent.name))
    return children


def _await_exit(pids: Sequence[int], *, timeout: float = 60) -> None:
    """Wait until none of ``pids`` runs; SIGKILL those still running after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while any(process_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.1)


def process_alive(pid: int) -> bool:
    """Whether any thread of ``pid`` runs. A zombie (exited, not yet reaped by whoever adopted it) does not; a
    main thread that is a zombie while other threads still exit does, for they still hold its open files."""
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        with contextlib.suppress(OSError):
            if stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
                return True
    return False
