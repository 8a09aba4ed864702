"""The original ESI's Flink job shape, and how it becomes the FlinkDeployment spec esi runs.

The original ESI ran Flink jobs as FlinkClusters (``flinkoperator.k8s.io/v1beta1``, the flink-on-k8s-operator),
and a BatchJob's ``flinkSpec`` was that cluster's ``spec.job``: ``jarFile``, ``className``, ``args``, … esi
runs FlinkDeployments (``flink.apache.org/v1beta1``, the Apache Flink Kubernetes operator, application mode),
and ``flinkSpec`` is a FlinkDeployment spec. A ``flinkSpec`` with ``jarFile`` is in the original's shape and
is translated as it is read (``FlinkClusterJob.flink_deployment``), so every reader sees a FlinkDeployment:

* ``jarFile`` → ``job.jarURI`` (``flink_jar_uri``), ``className`` → ``job.entryClass``, ``args`` →
  ``job.args``, ``parallelism`` → ``job.parallelism``, ``fromSavepoint`` → ``job.initialSavepointPath``,
  ``allowNonRestoredState`` → ``job.allowNonRestoredState``; ``upgradeMode`` is ``stateless``;
* ``savepointsDir`` → ``flinkConfiguration["state.savepoints.dir"]``;
* the settings of the original's job submitter pod (``volumes``, ``volumeMounts``, ``initContainers``,
  ``nodeSelector``, ``tolerations``, ``securityContext``, ``podLabels``, ``podAnnotations``) → the
  JobManager's pod template: in application mode the JobManager runs the job's main, where the submitter
  ran ``flink run`` before;
* ``restartPolicy: Never`` is what esi does anyway (a failed run is retried as a new application, per the
  Scheduling's ``spec.retry``), so it is dropped;
* ``image``, ``flinkVersion`` and ``serviceAccount`` are ``FLINK_IMAGE``, ``FLINK_VERSION`` and
  ``FLINK_SERVICE_ACCOUNT`` unless written beside ``jarFile``: FlinkDeployment fields may stand next to the
  original's, and the translated fields are laid over them.

The other fields are refused, by the CRD (CEL rules) and by the model alike, each with what to write instead
(``REFUSALS``): what esi cannot do the way the original's operator did (Python jobs, savepoints of a running
or restarted job, cancelling, clean-up, the submitter's own settings) is not quietly dropped.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import Field, ValidationInfo, field_validator

from esi.resources.meta import EsiModel, deep_merged

__all__ = [
    "FLINK_HOME",
    "FLINK_IMAGE",
    "FLINK_MAIN_CONTAINER",
    "FLINK_SERVICE_ACCOUNT",
    "FLINK_VERSION",
    "REFUSALS",
    "FlinkClusterJob",
    "flink_deployment_spec",
    "flink_jar_uri",
    "shape_rules",
]

FLINK_IMAGE: Final = "flink:1.20"
"""The image of a Flink job that names none: Flink's official image (the original always ran ``flink:1.8.2``),
which holds the examples the original's manifests run under ``FLINK_HOME``."""
FLINK_VERSION: Final = "v1_20"  # the FlinkDeployment's flinkVersion of FLINK_IMAGE
FLINK_HOME: Final = "/opt/flink"  # Flink's home in its official image, and the working directory of its pods
FLINK_SERVICE_ACCOUNT: Final = "flink"
"""The service account of a Flink job that names none: the one the Flink Kubernetes operator's Helm chart creates
in each namespace it watches (the JobManager needs its rights to create the TaskManagers)."""
FLINK_MAIN_CONTAINER: Final = "flink-main-container"  # the container of a Flink pod a pod template may extend

_SAVEPOINTS_DIR_KEY: Final = "state.savepoints.dir"
_URI_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

_PYTHON: Final = (
    "Python jobs are not translated from the original ESI's job shape: write flinkSpec as a FlinkDeployment "
    "spec whose job runs Flink's Python driver (job.jarURI local:///opt/flink/opt/flink-python-<version>.jar, "
    "job.entryClass org.apache.flink.client.python.PythonDriver, job.args [-py, <file>])"
)
REFUSALS: Final[Mapping[str, str]] = {
    "pyFile": _PYTHON,
    "pyFiles": _PYTHON,
    "pyModule": _PYTHON,
    "autoSavepointSeconds": (
        "periodic savepoints are not translated: leave autoSavepointSeconds out and set "
        'flinkConfiguration["kubernetes.operator.periodic.savepoint.interval"] (e.g. "60s") instead'
    ),
    "savepointGeneration": (
        "esi never changes a running application, so a BatchJob cannot trigger a savepoint: leave "
        "savepointGeneration out and trigger it on the running FlinkDeployment (job.savepointTriggerNonce)"
    ),
    "takeSavepointOnUpdate": (
        "esi never updates a running application (each run is a new one): leave takeSavepointOnUpdate out"
    ),
    "maxStateAgeToRestoreSeconds": (
        "esi never restarts or updates a running application (a failed run is retried as a new one, per the "
        "Scheduling's spec.retry): leave maxStateAgeToRestoreSeconds out; fromSavepoint names the savepoint a run "
        "starts from"
    ),
    "cancelRequested": (
        "a job is stopped by deleting its Scheduling or removing the job from it: leave cancelRequested out"
    ),
    "cleanupPolicy": "esi removes the application when its Scheduling lets go of the job: leave cleanupPolicy out",
    "resources": (
        "there is no job submitter pod to size: the JobManager runs the job, so size it with "
        "jobManager.resource ({cpu, memory}) instead"
    ),
    "mode": (
        "beside jarFile, mode is the original's job mode, and there is no job submitter to block or detach: the "
        "JobManager runs the job and esi follows it to its end; leave mode out"
    ),
    "noLoggingToStdout": (
        "there is no job submitter whose output it quietened: leave noLoggingToStdout out (logConfiguration sets "
        "Flink's logging)"
    ),
}
"""Fields of the original's job shape esi does not carry over, and what to write instead (by field)."""
_RESTART_POLICY: Final = (
    "restartPolicy FromSavepointOnFailure is not translated: a failed run is retried as a new application, per "
    "the Scheduling's spec.retry; write Never or leave restartPolicy out"
)
_ONE_SHAPE: Final = (
    "set exactly one of job (the FlinkDeployment's) or jarFile (the original ESI's FlinkCluster job shape)"
)
_MIXED: Final = (
    "className, args, parallelism, volumes and the other fields of the original ESI's job shape go with jarFile, "
    "not with job: in the FlinkDeployment shape write job.entryClass, job.args, job.parallelism, "
    "job.initialSavepointPath and a podTemplate instead"
)
# A FlinkDeployment spec has a field of this name too (mode: native or standalone), meaning something else.
_ALSO_FLINK_DEPLOYMENT_FIELDS: Final = frozenset({"mode"})


def _refused(field: str) -> Any:
    return Field(default=None, description=f"Refused: {REFUSALS[field]}.")


class FlinkClusterJob(EsiModel):
    """The original ESI's ``flinkSpec``: the ``spec.job`` of a FlinkCluster (``flinkoperator.k8s.io/v1beta1``).

    A job submitter pod ran its main with ``flink run``; what esi does with each field is in the module
    docstring. Only manifests write this shape: it is read into a FlinkDeployment spec at once.
    """

    jar_file: str = Field(
        min_length=1, description="The job's jar: a path in the Flink image (relative: to Flink's home) or a URI."
    )
    class_name: str | None = Field(default=None, description="The job's main class; becomes job.entryClass.")
    args: list[str] | None = Field(default=None, description="The job's arguments; become job.args.")
    parallelism: int | None = Field(default=None, ge=1, description="Becomes job.parallelism (esi sets it).")
    restart_policy: Literal["Never", "FromSavepointOnFailure"] | None = Field(
        default=None, description="Never, as esi does (FromSavepointOnFailure is refused)."
    )
    from_savepoint: str | None = Field(default=None, description="Becomes job.initialSavepointPath.")
    allow_non_restored_state: bool | None = Field(default=None, description="Becomes job.allowNonRestoredState.")
    savepoints_dir: str | None = Field(default=None, description="Becomes flinkConfiguration state.savepoints.dir.")
    volumes: list[dict[str, Any]] | None = Field(default=None, description="Go to the JobManager's pod.")
    volume_mounts: list[dict[str, Any]] | None = Field(default=None, description="Go to the JobManager's container.")
    init_containers: list[dict[str, Any]] | None = Field(default=None, description="Go to the JobManager's pod.")
    node_selector: dict[str, str] | None = Field(default=None, description="Goes to the JobManager's pod.")
    tolerations: list[dict[str, Any]] | None = Field(default=None, description="Go to the JobManager's pod.")
    security_context: dict[str, Any] | None = Field(default=None, description="Goes to the JobManager's pod.")
    pod_labels: dict[str, str] | None = Field(default=None, description="Go to the JobManager's pod.")
    pod_annotations: dict[str, str] | None = Field(default=None, description="Go to the JobManager's pod.")
    # Refused: typed, so that the CRD knows them and its rules can refuse them by name.
    py_file: str | None = _refused("pyFile")
    py_files: str | None = _refused("pyFiles")
    py_module: str | None = _refused("pyModule")
    auto_savepoint_seconds: int | None = _refused("autoSavepointSeconds")
    savepoint_generation: int | None = _refused("savepointGeneration")
    take_savepoint_on_update: bool | None = _refused("takeSavepointOnUpdate")
    max_state_age_to_restore_seconds: int | None = _refused("maxStateAgeToRestoreSeconds")
    cancel_requested: bool | None = _refused("cancelRequested")
    cleanup_policy: dict[str, str] | None = _refused("cleanupPolicy")
    resources: dict[str, Any] | None = _refused("resources")
    mode: str | None = _refused("mode")
    no_logging_to_stdout: bool | None = _refused("noLoggingToStdout")

    @field_validator("*")
    @classmethod
    def _carried_over(cls, value: Any, info: ValidationInfo) -> Any:
        field = _alias(cls, info.field_name or "")
        if value is not None and field in REFUSALS:
            raise ValueError(REFUSALS[field])
        if field == "restartPolicy" and value == "FromSavepointOnFailure":
            raise ValueError(_RESTART_POLICY)
        return value

    def flink_deployment(self, beside: Mapping[str, Any]) -> dict[str, Any]:
        """The FlinkDeployment spec that runs this job: the FlinkDeployment fields written ``beside`` it, with
        the translated fields laid over them and esi's image, Flink version and service account where they
        name none."""
        job: dict[str, Any] = {"jarURI": flink_jar_uri(self.jar_file), "upgradeMode": "stateless"}
        carried = {
            "entryClass": self.class_name,
            "args": self.args,
            "parallelism": self.parallelism,
            "initialSavepointPath": self.from_savepoint,
            "allowNonRestoredState": self.allow_non_restored_state,
        }
        job.update(_present(carried))
        overlay: dict[str, Any] = {"job": job}
        if self.savepoints_dir is not None:
            overlay["flinkConfiguration"] = {_SAVEPOINTS_DIR_KEY: self.savepoints_dir}
        template = self._job_manager_pod_template()
        if template:
            overlay["jobManager"] = {"podTemplate": template}
        defaults = {"image": FLINK_IMAGE, "flinkVersion": FLINK_VERSION, "serviceAccount": FLINK_SERVICE_ACCOUNT}
        return deep_merged({**defaults, **beside}, overlay)

    def _job_manager_pod_template(self) -> dict[str, Any]:
        """The submitter pod's settings as a pod template for the JobManager; empty when there are none."""
        spec = _present(
            {
                "volumes": self.volumes,
                "initContainers": self.init_containers,
                "nodeSelector": self.node_selector,
                "tolerations": self.tolerations,
                "securityContext": self.security_context,
            }
        )
        if self.volume_mounts is not None:
            spec["containers"] = [{"name": FLINK_MAIN_CONTAINER, "volumeMounts": self.volume_mounts}]
        metadata = _present({"labels": self.pod_labels, "annotations": self.pod_annotations})
        template = {key: part for key, part in (("metadata", metadata), ("spec", spec)) if part}
        return {"apiVersion": "v1", "kind": "Pod", **template} if template else {}


def _present(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _alias(model: type[EsiModel], name: str) -> str:
    field = model.model_fields.get(name)
    return (field.alias if field is not None else None) or name


_FIELDS: Final = frozenset(_alias(FlinkClusterJob, name) for name in FlinkClusterJob.model_fields)
# Fields that say a flinkSpec is in the original's shape when they stand beside job instead of jarFile.
_ORIGINAL_ONLY: Final = tuple(sorted(_FIELDS - {"jarFile"} - _ALSO_FLINK_DEPLOYMENT_FIELDS))
_REFUSED_IN_BOTH_SHAPES: Final = tuple(field for field in REFUSALS if field not in _ALSO_FLINK_DEPLOYMENT_FIELDS)


def flink_jar_uri(jar_file: str) -> str:
    """The ``job.jarURI`` of the original's ``jarFile``: a URI (it has a scheme) as it is; a path as a
    ``local://`` URI, resolved against Flink's home where it is relative, as the original's job submitter,
    which ran in Flink's home, read it."""
    if _URI_SCHEME.match(jar_file):
        return jar_file
    return "local://" + posixpath.normpath(posixpath.join(FLINK_HOME, jar_file))


def flink_deployment_spec(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A raw ``flinkSpec`` in the FlinkDeployment shape: as it is when it has ``job``, translated when it has
    the original's ``jarFile``. Raises ``ValueError`` (or pydantic's ``ValidationError``, naming the field) for
    a spec with both or neither, with fields of the original's shape beside ``job``, or with a refused field."""
    if data.get("jarFile") is None:
        refused = [field for field in _REFUSED_IN_BOTH_SHAPES if data.get(field) is not None]
        if refused:
            raise ValueError(REFUSALS[refused[0]])
        if data.get("job") is None:
            raise ValueError(_ONE_SHAPE)
        if any(data.get(field) is not None for field in _ORIGINAL_ONLY):
            raise ValueError(_MIXED)
        return data
    if data.get("job") is not None:
        raise ValueError(_ONE_SHAPE)
    original = FlinkClusterJob.model_validate({k: v for k, v in data.items() if k in _FIELDS})
    return original.flink_deployment({k: v for k, v in data.items() if k not in _FIELDS})


def shape_rules() -> tuple[dict[str, str], ...]:
    """The CEL rules on ``flinkSpec`` that match ``flink_deployment_spec``: one shape, and no refused field."""
    mixed = " || ".join(f"has(self.{field})" for field in _ORIGINAL_ONLY)
    refused = (
        {
            "rule": f"!has(self.{field})"
            if field in _REFUSED_IN_BOTH_SHAPES
            else f"!has(self.jarFile) || !has(self.{field})",
            "message": message,
            "fieldPath": f".{field}",
        }
        for field, message in REFUSALS.items()
    )
    return (
        {"rule": "has(self.job) != has(self.jarFile)", "message": _ONE_SHAPE},
        {"rule": f"has(self.jarFile) || !({mixed})", "message": _MIXED},
        {
            "rule": "!has(self.jarFile) || !has(self.restartPolicy) || self.restartPolicy == 'Never'",
            "message": _RESTART_POLICY,
            "fieldPath": ".restartPolicy",
        },
        *refused,
    )
