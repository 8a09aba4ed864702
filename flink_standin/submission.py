"""A FlinkDeployment as Flink's client is to run it: its configuration, pod templates, jar, class and arguments.

``submission`` follows the Flink operator's ``FlinkConfigBuilder`` (operator 1.12-1.15) for a native
application-mode deployment, in its order: the user's ``flinkConfiguration``, then the REST Service type
(ClusterIP) and ``web.cancel.enable`` (false) where the user set none, image and pull policy, service account,
pod templates (``esi.objects.flink_pod_templates``), the JobManager's and TaskManagers' cpu and memory and
the JobManager's replicas, the job (target ``kubernetes-application``, ``pipeline.jars``, the parallelism —
``taskManager.replicas`` x ``taskmanager.numberOfTaskSlots`` when replicas are set, else the job's —, the
application cluster kept when the job ends, ``pipeline.name``), then namespace and cluster id (the
FlinkDeployment's name), and the FlinkDeployment as the owner of the JobManager's Deployment.

``LocalCluster`` says what a local cluster adds (``flink_standin`` says why): the API server's address for
pods, Kubernetes high availability, no reverse lookup of TaskManagers, and the client's kubeconfig.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from esi.objects.flink_memory import MemoryConfigError, memory_size
from esi.objects.flink_pod_templates import merge_arrays_by_name, merged_pod_templates
from esi.resources.flink_cluster import FLINK_MAIN_CONTAINER
from esi.resources.quantity import parse_quantity

__all__ = ["LocalCluster", "Submission", "SubmissionError", "submission"]

_SLOTS_KEY: Final = "taskmanager.numberOfTaskSlots"
_API_VERSION: Final = "flink.apache.org/v1beta1"


class SubmissionError(ValueError):
    """A FlinkDeployment the stand-in cannot submit; the message names the field."""


@dataclass(frozen=True)
class LocalCluster:
    """What a FlinkDeployment needs on this local cluster beyond what the operator would set."""

    kubeconfig: str  # the client's credentials (the operator runs in the cluster and uses its own)
    api_host: str  # the API server's address and port as pods on the real nodes reach it
    api_port: int
    ha_storage_dir: str = "file:///tmp/flink-ha"  # in the JobManager's container; one JobManager per cluster


@dataclass(frozen=True)
class Submission:
    """What ``flink run --target kubernetes-application`` is given for one FlinkDeployment."""

    namespace: str
    cluster_id: str
    configuration: dict[str, str]
    jobmanager_template: dict[str, Any]
    taskmanager_template: dict[str, Any]
    jar: str
    entry_class: str | None
    args: tuple[str, ...]

    def argv(self, flink: str, jobmanager_template_file: str, taskmanager_template_file: str) -> list[str]:
        """The client's command line, with the pod templates written to the files named."""
        configuration = dict(self.configuration)
        configuration["kubernetes.pod-template-file.jobmanager"] = jobmanager_template_file
        configuration["kubernetes.pod-template-file.taskmanager"] = taskmanager_template_file
        argv = [flink, "run", "--target", "kubernetes-application"]
        argv += [f"-D{key}={value}" for key, value in configuration.items()]
        if self.entry_class:
            argv += ["-c", self.entry_class]
        return [*argv, self.jar, *self.args]


def submission(deployment: Mapping[str, Any], local: LocalCluster) -> Submission:
    """The submission of ``deployment`` (a FlinkDeployment object, as read from the API server)."""
    metadata = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    name, namespace, uid = metadata.get("name"), metadata.get("namespace"), metadata.get("uid")
    if not name or not namespace or not uid:
        raise SubmissionError("metadata.name, metadata.namespace and metadata.uid are needed (read it from the API)")
    if len(str(name)) > 45:
        raise SubmissionError(f"metadata.name {name!r} is longer than the 45 characters of a Flink cluster id")
    job = spec.get("job") or {}
    if not job.get("jarURI"):
        raise SubmissionError("spec.job.jarURI is not set: the stand-in runs application clusters only")
    if str(spec.get("mode") or "native").lower() != "native":
        raise SubmissionError(f"spec.mode is {spec.get('mode')!r}: the stand-in runs native mode only")

    conf: dict[str, str] = {str(k): str(v) for k, v in (spec.get("flinkConfiguration") or {}).items()}
    conf.setdefault("kubernetes.rest-service.exposed.type", "ClusterIP")
    conf.setdefault("web.cancel.enable", "false")
    if spec.get("image"):
        conf["kubernetes.container.image.ref"] = str(spec["image"])
    if spec.get("imagePullPolicy"):
        conf["kubernetes.container.image.pull-policy"] = str(spec["imagePullPolicy"])
    if spec.get("serviceAccount"):
        conf["kubernetes.service-account"] = str(spec["serviceAccount"])

    by_name = merge_arrays_by_name(conf)
    job_manager, task_manager = spec.get("jobManager") or {}, spec.get("taskManager") or {}
    common = spec.get("podTemplate")
    templates = [
        merged_pod_templates(common, component.get("podTemplate"), by_name=by_name)
        for component in (job_manager, task_manager)
    ]
    _resource(conf, job_manager, "jobManager", "kubernetes.jobmanager.cpu.amount", "jobmanager.memory.process.size")
    if int(job_manager.get("replicas") or 0) > 0:
        conf["kubernetes.jobmanager.replicas"] = str(job_manager["replicas"])
    _resource(conf, task_manager, "taskManager", "kubernetes.taskmanager.cpu.amount", "taskmanager.memory.process.size")

    conf["execution.target"] = "kubernetes-application"
    conf["pipeline.jars"] = str(job["jarURI"])
    replicas = task_manager.get("replicas")
    if replicas is not None:
        conf["parallelism.default"] = str(int(replicas) * _task_slots(conf))
    elif job.get("parallelism"):
        conf["parallelism.default"] = str(job["parallelism"])
    conf["execution.shutdown-on-application-finish"] = "false"
    conf.setdefault("pipeline.name", str(name))
    conf["kubernetes.namespace"] = str(namespace)
    conf["kubernetes.cluster-id"] = str(name)
    conf["kubernetes.jobmanager.owner.reference"] = (
        f"apiVersion:{_API_VERSION},kind:FlinkDeployment,name:{name},uid:{uid},controller:false,blockOwnerDeletion:true"
    )

    conf["kubernetes.config.file"] = local.kubeconfig
    conf.setdefault("high-availability.type", "kubernetes")
    conf.setdefault("high-availability.storageDir", local.ha_storage_dir)
    if conf["high-availability.type"].lower() == "kubernetes":
        conf["high-availability.cluster-id"] = str(name)
    conf.setdefault("jobmanager.retrieve-taskmanager-hostname", "false")
    api = [
        {"name": "KUBERNETES_SERVICE_HOST", "value": local.api_host},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(local.api_port)},
    ]
    return Submission(
        namespace=str(namespace),
        cluster_id=str(name),
        configuration=conf,
        jobmanager_template=_with_env(templates[0], api),
        taskmanager_template=_with_env(templates[1], api),
        jar=str(job["jarURI"]),
        entry_class=str(job["entryClass"]) if job.get("entryClass") else None,
        args=tuple(str(a) for a in job.get("args") or ()),
    )


def _resource(conf: dict[str, str], component: Mapping[str, Any], field: str, cpu_key: str, memory_key: str) -> None:
    if component.get("resources"):
        raise SubmissionError(f"spec.{field}.resources is set: the stand-in reads spec.{field}.resource only")
    resource = component.get("resource") or {}
    if resource.get("cpu") is not None:
        conf[cpu_key] = str(float(resource["cpu"]))
    if resource.get("memory") is not None:
        conf[memory_key] = _memory(str(resource["memory"]), f"spec.{field}.resource.memory")


def _memory(text: str, field: str) -> str:
    """A memory size as Flink reads it: Flink's own form as it is, a Kubernetes quantity in bytes."""
    try:
        memory_size(text, field)
    except MemoryConfigError:
        try:
            return f"{int(parse_quantity(text).amount)}b"
        except ValueError as err:
            raise SubmissionError(f"{field} is {text!r}, not a memory size (e.g. 2048m, 2g or 2Gi)") from err
    return text.strip()


def _task_slots(conf: Mapping[str, str]) -> int:
    try:
        return max(int(conf.get(_SLOTS_KEY, "1").strip()), 1)
    except ValueError as err:
        raise SubmissionError(f'spec.flinkConfiguration["{_SLOTS_KEY}"] is not an integer') from err


def _with_env(template: Mapping[str, Any] | None, env: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """``template`` with ``env`` set on Flink's main container (added when the template has none)."""
    pod = copy.deepcopy(dict(template or {}))
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    spec = pod.setdefault("spec", {})
    containers = spec.setdefault("containers", [])
    main = next((c for c in containers if c.get("name") == FLINK_MAIN_CONTAINER), None)
    if main is None:
        main = {"name": FLINK_MAIN_CONTAINER}
        containers.append(main)
    names = {e["name"] for e in env}
    main["env"] = [e for e in main.get("env") or [] if e.get("name") not in names] + [dict(e) for e in env]
    return pod
