"""What the stand-in does next for one FlinkDeployment, and the status it reports: a pure function of what it sees.

The status has the operator's fields and values:

* ``lifecycleState``: CREATED (nothing deployed yet), DEPLOYED (the JobManager is being deployed or its job
  is starting), STABLE (the job runs or has finished), FAILED (the submission, the JobManager or the job
  failed);
* ``jobManagerDeploymentStatus``: DEPLOYING (no Deployment yet), DEPLOYED_NOT_READY (its pod not ready),
  READY, ERROR (its pod cannot start: an image that cannot be pulled, a container that keeps crashing),
  MISSING (gone after its job ended);
* ``jobStatus``: ``jobName``, ``jobId``, ``state`` (RECONCILING until the JobManager's REST API names the job,
  then Flink's own job state: INITIALIZING, CREATED, RUNNING, ..., FINISHED, FAILED, CANCELED), ``startTime``
  and ``updateTime`` (epoch milliseconds as strings, as the operator writes them);
* ``error``: JSON ``{"type": ..., "message": ...}`` on a failure.

A job that has ended keeps its final state whatever happens to its JobManager afterwards. A Deployment that
disappears before its job ended is deployed again (the operator recovers a missing JobManager Deployment
the same way), as long as the submission itself has not failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["TERMINAL_JOB_STATES", "Decision", "Observation", "decide"]

TERMINAL_JOB_STATES: Final = frozenset({"FINISHED", "FAILED", "CANCELED"})
# Waiting reasons of the JobManager's container that the operator takes for a failed deployment.
_BROKEN: Final = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"})


@dataclass(frozen=True)
class Observation:
    """What the controller sees of one FlinkDeployment's application cluster now."""

    submitting: bool = False  # Flink's client runs for it now
    submit_error: str | None = None  # the client's last failure for it, if its last run failed
    deployment: bool = False  # the JobManager's Deployment exists
    jobmanager_pods: Sequence[Mapping[str, Any]] = ()
    jobs: Sequence[Mapping[str, Any]] | None = None  # the REST API's /jobs/overview; None: not reachable
    failure: str | None = None  # the root exception of a failed job, from the REST API


@dataclass(frozen=True)
class Decision:
    submit: bool
    status: dict[str, Any] = field(default_factory=dict)


def decide(status: Mapping[str, Any] | None, observed: Observation, now_ms: int) -> Decision:
    """Whether to submit now, and the status to report, from the last status and what is observed."""
    last = dict(status or {})
    job = dict(last.get("jobStatus") or {})
    if str(job.get("state") or "") in TERMINAL_JOB_STATES:
        return Decision(False, _ended(last, observed))
    if not observed.deployment:
        return _undeployed(last, job, observed, now_ms)
    return Decision(False, _deployed(last, job, observed, now_ms))


def _undeployed(last: dict[str, Any], job: dict[str, Any], observed: Observation, now_ms: int) -> Decision:
    if observed.submit_error is not None:
        return Decision(False, _failed(last, "SubmissionFailed", observed.submit_error))
    submitted = last.get("lifecycleState") not in (None, "CREATED")
    status = _with(
        last,
        lifecycleState="DEPLOYED" if submitted or observed.submitting else "CREATED",
        jobManagerDeploymentStatus="DEPLOYING",
        jobStatus=_job(job, "RECONCILING", now_ms),
    )
    return Decision(not observed.submitting, status)


def _deployed(last: dict[str, Any], job: dict[str, Any], observed: Observation, now_ms: int) -> dict[str, Any]:
    broken = _broken(observed.jobmanager_pods)
    if broken is not None:
        return _failed(last, "JobManagerDeploymentFailed", broken, deployment="ERROR")
    if not observed.jobs:  # not answering yet, or its job not submitted inside it yet
        answering = observed.jobs is not None or any(_ready(p) for p in observed.jobmanager_pods)
        return _with(
            last,
            lifecycleState="DEPLOYED",
            jobManagerDeploymentStatus="READY" if answering else "DEPLOYED_NOT_READY",
            jobStatus=_job(job, "RECONCILING", now_ms),
        )
    current = max(observed.jobs, key=lambda j: int(j.get("start-time") or 0))
    state = str(current.get("state") or "RECONCILING").upper()
    changed = state != job.get("state")
    job_status = {
        "jobName": str(current.get("name") or ""),
        "jobId": str(current.get("jid") or ""),
        "state": state,
        "startTime": str(current.get("start-time") or now_ms),
        "updateTime": str(current.get("last-modification") or now_ms if changed else job.get("updateTime") or now_ms),
    }
    if state in ("FAILED", "CANCELED"):
        message = observed.failure or f"the Flink job {job_status['jobName']} {state.lower()}"
        return _failed(last, "JobFailed", message, deployment="READY", jobStatus=job_status)
    return _with(
        last,
        lifecycleState="STABLE" if state in ("RUNNING", "FINISHED") else "DEPLOYED",
        jobManagerDeploymentStatus="READY",
        jobStatus=job_status,
        error=None,
    )


def _ended(last: dict[str, Any], observed: Observation) -> dict[str, Any]:
    if observed.deployment:
        return last
    return _with(last, jobManagerDeploymentStatus="MISSING")


def _failed(
    last: dict[str, Any], kind: str, message: str, *, deployment: str | None = None, **fields: Any
) -> dict[str, Any]:
    error = json.dumps({"type": kind, "message": message})
    changes: dict[str, Any] = {"lifecycleState": "FAILED", "error": error, **fields}
    if deployment is not None:
        changes["jobManagerDeploymentStatus"] = deployment
    return _with(last, **changes)


def _with(last: dict[str, Any], **changes: Any) -> dict[str, Any]:
    status = {**last, **changes}
    return {key: value for key, value in status.items() if value is not None}


def _job(job: dict[str, Any], state: str, now_ms: int) -> dict[str, Any]:
    if job.get("state") == state:
        return job
    return {**job, "state": state, "updateTime": str(now_ms)}


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _broken(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the JobManager's pod cannot start, in the kubelet's words; None when it can (or may yet)."""
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in _BROKEN:
                words = f"{waiting['reason']}: {waiting.get('message') or ''}".rstrip(": ")
                return f"the JobManager's container {container.get('name')}: {words}"
    return None
