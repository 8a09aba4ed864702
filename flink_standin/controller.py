"""The stand-in's loop: read each FlinkDeployment and its application cluster, decide (``status.decide``), act.

Every ``interval`` seconds, for each FlinkDeployment of the namespaces it handles: the JobManager's Deployment
(named like the FlinkDeployment) and pods, and — once its pod has an IP — the JobManager's REST API
(``/jobs/overview``, and a failed job's ``/jobs/<id>/exceptions``) at the pod's IP, which this machine
reaches through the real nodes' bridges. A submission runs Flink's client in the background (it takes
seconds); before it, the high-availability ConfigMaps a former application cluster of the same name left are
deleted, so the new one does not recover the old job (the operator does the same for a stateless
deployment). The status is replaced only over the version it was decided on (``kube.writes.write_status``).

Nothing is kept between rounds but which submissions run and how the last one of each ended: a restarted
stand-in finds the rest in the cluster. A FlinkDeployment being deleted is left to the garbage collector:
the JobManager's Deployment is owned by it, and everything else by that Deployment.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import httpx2
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Pod

from esi.objects.applications import FLINK
from flink_standin.health import HealthEndpoint, serve
from flink_standin.status import Observation, decide
from flink_standin.submission import LocalCluster, Submission, SubmissionError, submission
from kube.errors import Refusal, ignore, refusal
from kube.resources import plain
from kube.writes import StaleView, write_status

__all__ = ["FIELD_MANAGER", "READY_LINE", "Settings", "run"]

FIELD_MANAGER: Final = "esi-flink-standin"
READY_LINE: Final = "handling FlinkDeployments in"  # logged once the namespaces were read the first time
_REST_PORT: Final = 8081
_SUBMIT_TIMEOUT: Final = 300.0
FlinkDeploymentResource = create_namespaced_resource(FLINK.group, FLINK.version, FLINK.kind, FLINK.plural)
_log = logging.getLogger("flink_standin")


@dataclass(frozen=True)
class Settings:
    kubeconfig: Path
    namespaces: tuple[str, ...]
    flink_home: Path
    java_home: Path
    workdir: Path  # the pod templates and client logs of each submission
    local: LocalCluster
    interval: float = 2.0
    health: HealthEndpoint | None = None  # answers 200 once the namespaces were read


@dataclass
class _Submitting:
    uid: str
    task: asyncio.Task[str | None]  # its failure, or None


class Controller:
    def __init__(self, settings: Settings, client: AsyncClient, http: httpx.AsyncClient) -> None:
        self.settings, self.client, self.http = settings, client, http
        self.submitting: dict[str, _Submitting] = {}  # by FlinkDeployment uid
        self.failed: dict[str, str] = {}  # the last submission's failure, by FlinkDeployment uid

    async def round(self) -> None:
        seen: set[str] = set()
        for namespace in self.settings.namespaces:
            async for item in self.client.list(FlinkDeploymentResource, namespace=namespace):
                deployment = plain(item)
                uid = str(deployment["metadata"]["uid"])
                seen.add(uid)
                try:
                    await self.reconcile(deployment)
                except StaleView:
                    pass  # decided again next round
                except (ApiError, httpx2.HTTPError) as err:
                    _log.warning(f"{_name(deployment)}: {err}")
        self.failed = {uid: why for uid, why in self.failed.items() if uid in seen}

    async def reconcile(self, deployment: dict[str, Any]) -> None:
        metadata = deployment["metadata"]
        if metadata.get("deletionTimestamp"):
            return
        uid, name, namespace = str(metadata["uid"]), str(metadata["name"]), str(metadata["namespace"])
        running = self.submitting.get(uid)
        if running is not None and running.task.done():
            del self.submitting[uid]
            failure = running.task.result()
            if failure is None:
                self.failed.pop(uid, None)
            else:
                self.failed[uid] = failure
        exists = await _get(self.client, Deployment, name, namespace) is not None
        pods = [
            p.to_dict()
            async for p in self.client.list(Pod, namespace=namespace, labels={"app": name, "component": "jobmanager"})
        ]
        jobs, failure = await self._jobs(pods) if exists else (None, None)
        observed = Observation(
            submitting=uid in self.submitting,
            submit_error=self.failed.get(uid),
            deployment=exists,
            jobmanager_pods=pods,
            jobs=jobs,
            failure=failure,
        )
        status = deployment.get("status") or {}
        decision = decide(status, observed, int(time.time() * 1000))
        if decision.submit:
            try:
                prepared = submission(deployment, self.settings.local)
            except SubmissionError as err:
                self.failed[uid] = str(err)
            else:
                await self._forget_former_cluster(prepared)
                task = asyncio.create_task(self._submit(prepared, uid))
                self.submitting[uid] = _Submitting(uid, task)
        if decision.status != status:
            _log.info(f"{namespace}/{name}: {_summary(decision.status)}")
        await write_status(self.client, FlinkDeploymentResource.Status, deployment, status, decision.status)

    async def _jobs(self, pods: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]] | None, str | None]:
        """The JobManager's jobs, and the root exception of a failed one; (None, None) while it does not answer."""
        ips = [
            (p.get("status") or {}).get("podIP") for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")
        ]
        for ip in filter(None, ips):
            base = f"http://{ip}:{_REST_PORT}"
            try:
                response = await self.http.get(f"{base}/jobs/overview")
                response.raise_for_status()
                jobs = list(response.json().get("jobs") or [])
                failed = [job for job in jobs if str(job.get("state")) == "FAILED"]
                failure = await self._root_exception(base, str(failed[0]["jid"])) if failed else None
            except (httpx.HTTPError, ValueError):
                continue
            return jobs, failure
        return None, None

    async def _root_exception(self, base: str, job_id: str) -> str | None:
        exceptions = (await self.http.get(f"{base}/jobs/{job_id}/exceptions")).json()
        root = str(exceptions.get("root-exception") or "").strip()
        return root.splitlines()[0] if root else None

    async def _forget_former_cluster(self, prepared: Submission) -> None:
        labels: dict[str, Any] = {"app": prepared.cluster_id, "configmap-type": "high-availability"}
        async for config_map in self.client.list(ConfigMap, namespace=prepared.namespace, labels=labels):
            assert config_map.metadata is not None
            await ignore(
                Refusal.NOT_FOUND,
                self.client.delete(ConfigMap, str(config_map.metadata.name), namespace=prepared.namespace),
            )

    async def _submit(self, prepared: Submission, uid: str) -> str | None:
        """Run Flink's client for ``prepared``; its failure in its own words, or None."""
        directory = self.settings.workdir / prepared.namespace / f"{prepared.cluster_id}-{uid}"
        directory.mkdir(parents=True, exist_ok=True)
        templates = {}
        for component, template in (
            ("jobmanager", prepared.jobmanager_template),
            ("taskmanager", prepared.taskmanager_template),
        ):
            path = directory / f"{component}-pod-template.json"
            path.write_text(json.dumps(template, indent=2))
            templates[component] = str(path)
        home = self.settings.flink_home
        argv = prepared.argv(str(home / "bin" / "flink"), templates["jobmanager"], templates["taskmanager"])
        env = {
            **os.environ,
            "JAVA_HOME": str(self.settings.java_home),
            "FLINK_CONF_DIR": str(home / "conf"),
            "FLINK_LOG_DIR": str(directory),
        }
        _log.info(f"{prepared.namespace}/{prepared.cluster_id}: submitting ({directory})")
        process = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), _SUBMIT_TIMEOUT)
        except TimeoutError:
            process.kill()
            return f"Flink's client did not finish in {_SUBMIT_TIMEOUT:.0f} s; its log is in {directory}"
        text = output.decode(errors="replace")
        (directory / "client-output.txt").write_text(text)
        if process.returncode == 0:
            return None
        return f"Flink's client failed ({process.returncode}): {_cause(text)}; its output is in {directory}"


def _cause(output: str) -> str:
    """The innermost cause Flink's client printed, else its last line."""
    causes = [line.strip() for line in output.splitlines() if line.strip().startswith("Caused by:")]
    if causes:
        return causes[-1].removeprefix("Caused by:").strip()
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _summary(status: Mapping[str, Any]) -> str:
    job = status.get("jobStatus") or {}
    parts = [
        f"lifecycle {status.get('lifecycleState')}",
        f"JobManager {status.get('jobManagerDeploymentStatus')}",
        f"job {job.get('state')}",
    ]
    if status.get("error"):
        parts.append(f"error {status['error']}")
    return ", ".join(parts)


def _name(deployment: Mapping[str, Any]) -> str:
    return f"{deployment['metadata'].get('namespace')}/{deployment['metadata'].get('name')}"


async def _get(client: AsyncClient, resource: Any, name: str, namespace: str) -> Any:
    try:
        return await client.get(resource, name, namespace=namespace)
    except ApiError as err:
        if refusal(err) is Refusal.NOT_FOUND:
            return None
        raise


async def run(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Reconcile every ``settings.interval`` seconds until ``stop`` is set (or forever)."""
    client = AsyncClient(config=KubeConfig.from_file(settings.kubeconfig), field_manager=FIELD_MANAGER)
    read = asyncio.Event()
    health = await serve(settings.health, read.is_set) if settings.health else None
    async with httpx.AsyncClient(timeout=3.0) as http:
        controller = Controller(settings, client, http)
        try:
            while stop is None or not stop.is_set():
                try:
                    await controller.round()
                except (ApiError, httpx2.HTTPError, OSError) as err:
                    _log.warning(f"reading the cluster: {err}")
                else:
                    if not read.is_set():
                        _log.info(f"{READY_LINE} {', '.join(settings.namespaces)}")
                        read.set()
                await asyncio.sleep(settings.interval)
        finally:
            for running in controller.submitting.values():
                running.task.cancel()
            if health is not None:
                health.close()
            await client.close()
