"""Small builders and waits for integration tests (plain manifests in, typed lightkube objects out)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx2
from lightkube import ApiError, Client, KubeConfig
from lightkube.codecs import from_dict
from lightkube.core.resource import NamespacedResource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from esi.objects.names import EXECUTOR_PRIORITY_CLASS, JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, TESTBED_LABEL
from esi.objects.slot_resource import requesting_a_slot
from infra.local_cluster import LocalCluster, free_port
from infra.stacks.processes import EsiProcess
from infra.toolchain.commands import exclusive
from tests.manifests import testbed_manifest

T = TypeVar("T")
R = TypeVar("R", bound=NamespacedResource)
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: KWOK runs no containers


def namespace_manifest(name: str) -> Any:
    return from_dict({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def priority_class(name: str, value: int) -> Any:
    return from_dict(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    )


def pod(
    name: str,
    namespace: str,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    scheduler: str | None = None,
    priority_class_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    node_name: str | None = None,
    tolerations: Sequence[Mapping[str, str]] = (),
    slot: bool = False,
) -> Any:
    """A pod of one pause container (``slot``: it requests one slot, ``esi.objects.slot_resource``)."""
    resources = {"cpu": cpu, "memory": memory}
    requirements: dict[str, Any] = {"requests": resources, "limits": resources}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": PAUSE_IMAGE,
                "resources": requesting_a_slot(requirements) if slot else requirements,
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if node_name:
        spec["nodeName"] = node_name
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return from_dict(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    )


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60, interval: float = 0.2) -> T:
    """Poll ``probe`` until it returns something other than None/False; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def get_or_none(client: Client, kind: Any, name: str, namespace: str | None = None) -> Any:
    """The object, or None when the API says it does not exist."""
    try:
        return client.get(kind, name, namespace=namespace)
    except ApiError as err:
        if err.status.code == 404:
            return None
        raise


def running_on(client: Client, name: str, namespace: str) -> Callable[[], str | None]:
    """A probe for wait_for: the pod's node once it runs."""

    def probe() -> str | None:
        current = client.get(Pod, name, namespace=namespace)
        if current.status is not None and current.status.phase == "Running" and current.spec is not None:
            return current.spec.nodeName
        return None

    return probe


def made_again_while_behind(
    client: Client,
    first: Any,
    again: Any,
    behind: Callable[[], AbstractContextManager[None]],
    *,
    seen_running: bool,
    settle: float = 3.0,
) -> tuple[str, Any]:
    """Pod ``first`` on its node (``spec.nodeName``) is deleted with no grace period and made again under its
    name as ``again``, while the node's agent is held back (``behind()``: a kubelet or KWOK paused) — from once
    ``first`` runs when ``seen_running``, else from before it is made. The new pod's uid, and the pod of that
    name ``settle`` seconds after the agent was let go on (and after the new pod runs, if it is bound): time for
    the agent to act on the old pod. None if it is gone."""
    name, namespace = first.metadata.name, first.metadata.namespace
    if seen_running:
        client.create(first)
        wait_for(f"pod {name} to run", running_on(client, name, namespace))
    with behind():
        if not seen_running:
            client.create(first)
        client.delete(Pod, name, namespace=namespace, grace_period=0)
        wait_for(f"pod {name} to be gone", lambda: get_or_none(client, Pod, name, namespace) is None, interval=0.02)
        made = client.create(again)
    assert made.metadata is not None
    assert made.metadata.uid is not None

    def running_or_gone() -> tuple[Any] | None:
        current = get_or_none(client, Pod, name, namespace)
        return (current,) if current is None or (current.status and current.status.phase == "Running") else None

    if again.spec.nodeName is None or wait_for(f"pod {name} made again to run", running_or_gone)[0] is not None:
        time.sleep(settle)
    return made.metadata.uid, get_or_none(client, Pod, name, namespace)


@dataclass(frozen=True)
class LostWatch:
    """What the node's agent did in ``while_the_watch_was_lost``: its answers to ``older`` and ``newer`` (phase,
    reason), and the pod IPs of ``first`` and ``older`` (None: none)."""

    older: tuple[str, str | None]
    newer: tuple[str, str | None]
    first_ip: str | None
    older_ip: str | None


def while_the_watch_was_lost(
    cluster: LocalCluster, bound: Callable[[str], Any], behind: Callable[[], AbstractContextManager[None]]
) -> LostWatch:
    """Pod ``first`` (``bound(name)``: a pod of that name in namespace default, bound to the node) runs; while the
    node's agent is held back (``behind()``: a kubelet or KWOK paused), the store moves on, the API server crashes
    and comes back without the pods' history from where the agent was (checked: a watch from there is refused),
    ``first`` is deleted, and pods ``older`` and then, a second later (creation times are in seconds), ``newer``
    are made, each needing ``first``'s room. No deletion of ``first`` can reach the agent, which must list the pods
    again; it then takes the two new pods at once. (Their names put ``newer`` first in a listing, which is by
    name.)"""

    def create(name: str) -> None:
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(bound(name).to_dict()))

    def status(name: str) -> dict[str, Any]:
        return dict(json.loads(cluster.kubectl("get", "pod", name, "-o", "json"))["status"])

    def answer(name: str) -> tuple[str, str | None] | None:
        now = status(name)
        return (now["phase"], now.get("reason")) if now.get("phase") in {"Running", "Failed"} else None

    def history_lost(resource_version: str) -> bool:
        url = f"/api/v1/pods?watch=1&resourceVersion={resource_version}&timeoutSeconds=1"
        return '"reason":"Expired"' in cluster.kubectl("get", "--raw", url)

    create("first")
    assert wait_for("the first pod to run", lambda: answer("first")) == ("Running", None)
    first_ip = status("first").get("podIP")
    with behind():
        behind_at = json.loads(cluster.kubectl("get", "--raw", "/api/v1/pods"))["metadata"]["resourceVersion"]
        cluster.kubectl("create", "configmap", "moved-on", "--from-literal=k=v")  # the store goes on (two writes),
        cluster.kubectl("delete", "configmap", "moved-on")  # so the new API server's history starts after
        cluster.crash_and_restart_api_server()
        cluster.kubectl("delete", "pod", "first", "--grace-period=0", "--force")
        assert history_lost(behind_at), "the new API server still has the history the agent's watch would go on from"
        create("older")
        time.sleep(1.1)
        create("newer")
    older = wait_for("the agent's answer to the older pod", lambda: answer("older"), timeout=120)
    newer = wait_for("the agent's answer to the newer pod", lambda: answer("newer"), timeout=60)
    return LostWatch(older, newer, first_ip, status("older").get("podIP"))


def executor_pod(
    name: str,
    namespace: str,
    *,
    pool: str,
    scheduler: str,
    job: str = "wordcount",
    testbed: str = "tb",
    tolerations: Sequence[Mapping[str, str]] = (),
    slot: bool = False,
) -> Any:
    """An executor of ``job`` in ``testbed`` for esi's second scheduler, one slot's size (1 cpu, 1Gi; ``slot``: and
    one slot of the slot resource)."""
    manifest = pod(
        name,
        namespace,
        cpu="1",
        memory="1Gi",
        scheduler=scheduler,
        priority_class_name=EXECUTOR_PRIORITY_CLASS,
        node_selector={"esi.test/pool": pool},
        tolerations=tolerations,
        slot=slot,
    )
    manifest.metadata.labels = {ROLE_LABEL: ROLE_EXECUTOR, TESTBED_LABEL: testbed, JOB_LABEL: job}
    return manifest


def create_in(cluster: LocalCluster, namespace: str, manifest: dict[str, Any]) -> None:
    """``kubectl create`` of one manifest: what the API server says is what the test sees."""
    cluster.kubectl("create", "-n", namespace, "-f", "-", input_text=json.dumps(manifest))


def get(cluster: LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    """The object as ``kubectl get`` shows it; {} when there is none."""
    out = cluster.kubectl("get", "-n", namespace, kind, name, "-o", "json", "--ignore-not-found")
    found: dict[str, Any] = json.loads(out) if out.strip() else {}
    return found


def status(cluster: LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    """The object's status; {} when it has none or there is no such object."""
    found: dict[str, Any] = get(cluster, namespace, kind, name).get("status") or {}
    return found


def events(cluster: LocalCluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    """The namespace's Events of this ``reason``."""
    listed = cluster.kubectl("get", "events", "-n", namespace, f"--field-selector=reason={reason}", "-o", "json")
    return json.loads(listed)["items"]  # type: ignore[no-any-return]


def create_testbed(
    cluster: LocalCluster,
    namespace: str,
    label: str,
    slots_per_node: int = 2,
    tolerations: Sequence[Mapping[str, str]] = (),
    memory: str = "1Gi",
) -> None:
    """Testbed ``tb`` over the nodes labelled ``label``, with slots of 1 cpu and ``memory`` (its ghosts and
    executors tolerating ``tolerations``)."""
    manifest = testbed_manifest(
        nodeLabel=label,
        slotsPerNode=slots_per_node,
        resourcesPerSlot={"cpu": "1", "memory": memory},
        tolerations=[dict(t) for t in tolerations] or None,
    )
    create_in(cluster, namespace, manifest | {"metadata": {"name": "tb"}})


def live(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own http:// URL)
            return bool(response.status == 200)
    except OSError:
        return False


def ensure_process(
    cluster: LocalCluster,
    process: EsiProcess,
    argv: Callable[[int], list[str]],
    *,
    name: str | None = None,
    timeout: float = 60,
) -> int:
    """Start one of esi's processes for the session's cluster once for all pytest workers, as ``name`` (default:
    its name in the table); ``argv`` is given the port its liveness endpoint is to answer on. Return that port
    once the endpoint answers."""
    name = name or process.name
    port_file = cluster.directory / f"{name}.port"
    with exclusive(cluster.directory / f"{name}.lock"):
        if not cluster.process_running(name):
            port = free_port()
            cluster.start_process(name, argv(port))
            port_file.write_text(str(port))
    port = int(port_file.read_text())
    wait_for(f"{name} to report live", lambda: live(process.live_url(port)), timeout=timeout)
    return port


class Watcher(Generic[R]):
    """Calls ``note`` with every version of a namespace's objects of ``kind`` (those with ``labels``), from a
    thread of its own, until ``stop``: what a test needs to see of objects that come and go between two looks."""

    def __init__(
        self, cluster: LocalCluster, namespace: str, kind: type[R], labels: Mapping[str, str] | None = None
    ) -> None:
        self._kind = kind
        self._stop = threading.Event()
        # A client of its own: lightkube's watch renews itself for ever, so closing the client is what ends it.
        self._client = Client(config=KubeConfig.from_file(cluster.kubeconfig))
        self._namespace = namespace
        self._labels: dict[str, Any] = dict(labels or {})
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def note(self, obj: R) -> None:
        """One version of an object, as the API server sent it (listed or watched)."""

    def _watch(self) -> None:
        # Short watches, each resuming where the last ended (also when one is cut), so no event falls between
        # two. A version too old to resume from (410: nothing of ours changed for a while) means a fresh listing
        # is complete.
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listing = self._client.list(self._kind, namespace=self._namespace, labels=self._labels)
                    for obj in listing:
                        self.note(obj)
                    version = listing.resourceVersion
                watch = self._client.watch(
                    self._kind,
                    namespace=self._namespace,
                    labels=self._labels,
                    server_timeout=2,
                    resource_version=version,
                )
                for _, obj in watch:
                    self.note(obj)
                    metadata: ObjectMeta | None = getattr(obj, "metadata", None)
                    if metadata is not None:
                        version = metadata.resourceVersion
                    if self._stop.is_set():
                        return
            except ApiError as err:
                if err.status.code != 410:
                    raise
                version = None
            except httpx2.TransportError:  # the API server cut the watch short: resume where it ended
                continue
            except Exception:
                if self._stop.is_set():  # the client was closed under the watch
                    return
                raise

    def stop(self) -> None:
        self._stop.set()
        self._client.close()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive(), f"the watcher of {self._kind.__name__} did not stop"


def phase_of(client: Client, name: str, namespace: str, *phases: str) -> Any:
    """A probe for wait_for: the pod once its phase is one of ``phases``."""

    def probe() -> Any:
        current = client.get(Pod, name, namespace=namespace)
        return current if current.status is not None and current.status.phase in phases else None

    return probe
