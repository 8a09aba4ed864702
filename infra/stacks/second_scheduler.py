"""esi's second kube-scheduler: its configuration, running it as a local process, and its image for a cluster.

``scheduler_configuration`` is pure: the same KubeSchedulerConfiguration goes into a file for a local
process and, on a real cluster, into the ConfigMap of the scheduler's Deployment. The settings that matter
(docs/design.md#second-scheduler): its own scheduler name; ``percentageOfNodesToScore: 100``, or above 100
nodes the slot's node may never be offered to the extender; raised client qps/burst; the extender with
filter and bind verbs and ``nodeCacheCapable``, and a profile that neither counts resources nor preempts
(an executor takes its slot's room from the slot's ghost as the extender binds it). The same configuration, with
the ordinary pods' profile beside esi's, is the cluster's own scheduler in the placement that keeps reserved room
on shared nodes (``shared_with``).

``scheduler_image`` is the pinned kube-scheduler (the toolchain's static binary) alone in an image, run as the
"nonroot" user of Kubernetes' own images (65532) — what ``registry.k8s.io/kube-scheduler`` holds, made here
without a registry: ``python -m infra.stacks.second_scheduler image|push DESTINATION``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from esi.objects.slot_resource import SLOT_RESOURCE
from infra import images, toolchain
from infra.local_cluster import ClusterError, LocalCluster, free_port
from infra.local_cluster.supervise import supervised

__all__ = [
    "IMAGE_BINARY",
    "NONROOT_UID",
    "SecondScheduler",
    "SecondSchedulerSettings",
    "scheduler_configuration",
    "scheduler_image",
]

IMAGE_BINARY: Final = "/usr/local/bin/kube-scheduler"  # where Kubernetes' image has it
NONROOT_UID: Final = 65532  # the "nonroot" user of the distroless base of Kubernetes' images


@dataclass(frozen=True)
class SecondSchedulerSettings:
    """``bind_verb``: executors take their slot's room from its ghost as they are bound, by the extender; the
    scheduler counts no resources and preempts nothing. None: the scheduler counts resources and preempts the
    slot's ghost through the extender's ``preempt_verb`` first (a round per executor; the benchmarks' "before").

    ``shared_with``: the scheduler name of the ordinary pods' profile this scheduler runs too (the cluster's own,
    ``default-scheduler``): one process, one cache, so an executor counts on its node from the moment it is
    assumed, before its slot's ghost goes (docs/design.md#one-scheduler-for-both); the extender is then asked
    only about pods that request a slot (``esi.objects.slot_resource``). None: esi's scheduler alone."""

    scheduler_name: str
    extender_url: str | None = None
    shared_with: str | None = None
    filter_verb: str = "filter"
    bind_verb: str | None = "bind"
    preempt_verb: str = "preempt"
    # Above the seconds a bind (the ghost's eviction, then the binding) can queue for at a saturated API server:
    # a bind the scheduler gives up on is made again, and the writes double (at 1,000 nodes x 4 slots, 5 s did).
    extender_timeout: str = "30s"
    qps: float = 200
    burst: int = 400


def scheduler_configuration(settings: SecondSchedulerSettings, kubeconfig: str | None) -> dict[str, Any]:
    """The KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) of one second scheduler."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": settings.qps, "burst": settings.burst},
        "leaderElection": {"leaderElect": False},
        "percentageOfNodesToScore": 100,
        "profiles": [{"schedulerName": settings.scheduler_name}],
    }
    esi_profile = config["profiles"][0]
    if settings.shared_with is not None:
        config["profiles"].insert(0, {"schedulerName": settings.shared_with})
    if kubeconfig is not None:
        config["clientConnection"]["kubeconfig"] = kubeconfig
    if settings.extender_url is not None:
        extender: dict[str, Any] = {
            "urlPrefix": settings.extender_url,
            "filterVerb": settings.filter_verb,
            "nodeCacheCapable": True,
            "enableHTTPS": settings.extender_url.startswith("https://"),
            "httpTimeout": settings.extender_timeout,
            "ignorable": False,
        }
        if settings.bind_verb is None:
            extender["preemptVerb"] = settings.preempt_verb
        else:
            extender["bindVerb"] = settings.bind_verb
            # A slot's room is held by its ghost until the extender swaps the executor in at binding: counted,
            # it would turn every executor away and start a preemption round.
            disabled = [{"name": "NodeResourcesFit"}, {"name": "DefaultPreemption"}]
            esi_profile["plugins"] = {"multiPoint": {"disabled": disabled}}
        if settings.shared_with is not None:
            # Top-level extenders serve every profile: the ordinary pods' profile places and binds its pods alone.
            extender["managedResources"] = [{"name": SLOT_RESOURCE, "ignoredByScheduler": False}]
        config["extenders"] = [extender]
    return config


class SecondScheduler:
    """A kube-scheduler process of a local cluster, started with its own configuration."""

    def __init__(self, cluster: LocalCluster, settings: SecondSchedulerSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.config_path = cluster.directory / "second-schedulers" / f"{settings.scheduler_name}.yaml"
        self.port: int | None = None

    @property
    def process_name(self) -> str:
        return f"scheduler-{self.settings.scheduler_name}"

    @property
    def log_path(self) -> Path:
        return self.cluster.logs_dir / f"{self.process_name}.log"

    def start(self, *, supervise: bool = False, timeout: float = 60) -> None:
        """Start it (``supervise``: under ``infra.local_cluster.supervise``, started again whenever it exits) and wait
        until it reports ready."""
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            json.dumps(scheduler_configuration(self.settings, str(self.cluster.kubeconfig)), indent=2)
        )
        self.port = free_port()
        kubeconfig = self.cluster.kubeconfig
        command = [
            str(toolchain.binary("kube-scheduler")),
            f"--config={self.config_path}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            # /configz shows the configuration the scheduler actually loaded; the port listens on loopback only.
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/configz",
        ]
        self.cluster.start_process(self.process_name, supervised(self.process_name, command) if supervise else command)
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise ClusterError(
                    f"second scheduler {self.settings.scheduler_name!r} exited; "
                    f"log {self.log_path}:\n{self.log_path.read_text(errors='replace')[-3000:]}"
                )
            with contextlib.suppress(OSError, urllib.error.URLError):
                url = f"https://127.0.0.1:{self.port}/readyz"
                with urllib.request.urlopen(url, context=insecure, timeout=2) as response:
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                self.stop()
                raise ClusterError(f"second scheduler {self.settings.scheduler_name!r} not ready after {timeout}s")
            time.sleep(0.2)

    def running(self) -> bool:
        return self.cluster.process_running(self.process_name)

    def stop(self) -> None:
        self.cluster.stop_process(self.process_name)


def scheduler_image(pins: dict[str, str] | None = None) -> images.BuiltImage:
    """``esi.local/kube-scheduler:v<version>-<digest of the binary>``: the binary at ``IMAGE_BINARY``, an empty
    ``/tmp``, user 65532; built once."""
    pins = pins or toolchain.load_pins()
    binary = toolchain.binary("kube-scheduler", pins)
    tag = f"v{pins['kubernetes']}-{hashlib.sha256(binary.read_bytes()).hexdigest()[:12]}"

    def populate(rootfs: Path) -> None:
        target = rootfs / IMAGE_BINARY.lstrip("/")
        target.parent.mkdir(parents=True)
        shutil.copy(binary, target)
        (rootfs / "tmp").mkdir(mode=0o1777)

    user = f"{NONROOT_UID}:{NONROOT_UID}"
    return images.build_image("kube-scheduler", tag, populate, entrypoint=[IMAGE_BINARY], user=user)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.stacks.second_scheduler",
        description="The pinned kube-scheduler's image, built here without a registry or daemon (cached), or "
        "pushed to a registry with skopeo.",
    )
    commands_ = parser.add_subparsers(dest="command", required=True)
    images.add_image_commands(commands_, "registry.example.org/team/kube-scheduler:v1.34.4")
    args = parser.parse_args(argv)
    try:
        images.run_image_command(args, scheduler_image(), "pulumi config set -s cluster esi:schedulerImage {}")
    except (images.ImageError, toolchain.ToolchainError) as err:
        print(f"python -m infra.stacks.second_scheduler: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
