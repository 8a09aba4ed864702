"""The Spark and Flink operators' objects as the API server returns them (a SparkApplication, a
FlinkDeployment, the pod a Deployment's ReplicaSet makes), and an executor spec as esi's BatchJob reconciler
writes it: what the simulated operators' tests start from."""

from __future__ import annotations

from typing import Any

from esi.objects.names import JOB_LABEL, ROLE_LABEL, TESTBED_LABEL

__all__ = ["AFFINITY", "ESI_LABELS", "FLINK_UID", "SPARK_UID", "esi_executor", "flink_app", "replica_pod", "spark_app"]

SPARK_UID = "9f44a280-477d-4827-9bd1-0f0fb82ecfb4"
FLINK_UID = "2eac75d1-5748-4ea9-916f-3864a74902f2"
ESI_LABELS = {ROLE_LABEL: "executor", TESTBED_LABEL: "tb", JOB_LABEL: "batchjob-spark"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "slots", "operator": "In", "values": ["0", "1"]}]}]
        }
    }
}


def spark_app(
    name: str = "wordcount",
    *,
    uid: str = SPARK_UID,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A SparkApplication as the API server returns it; ``spec`` over a minimal valid one."""
    body = {"type": "Scala", "mainApplicationFile": "local:///app.jar", "driver": {}, "executor": {}} | spec
    app: dict[str, Any] = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": "1",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": body,
    }
    if status is not None:
        app["status"] = status
    return app


def esi_executor(**fields: Any) -> dict[str, Any]:
    """An executor spec as esi's BatchJob reconciler writes it for two 700m/896Mi slots: placement in the
    template too (it reaches the pods without the operator's webhook)."""
    placement = {"affinity": AFFINITY, "schedulerName": "esi-scheduler", "priorityClassName": "esi-executor"}
    return {
        "instances": 2,
        "cores": 1,
        "coreRequest": "700m",
        "coreLimit": "700m",
        "memory": "512m",
        "memoryOverhead": "384m",
        "labels": dict(ESI_LABELS),
        **placement,
        "template": {"metadata": {"labels": dict(ESI_LABELS)}, "spec": placement},
    } | fields


def flink_app(
    name: str = "wordcount-flink",
    *,
    uid: str = FLINK_UID,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A FlinkDeployment as the API server returns it; ``spec`` over a minimal valid one."""
    body = {"job": {"jarURI": "local:///job.jar"}} | spec
    app: dict[str, Any] = {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": "1",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": body,
    }
    if status is not None:
        app["status"] = status
    return app


def replica_pod(deployment: dict[str, Any]) -> dict[str, Any]:
    """The pod a Deployment's ReplicaSet makes from its template."""
    template = deployment["spec"]["template"]
    name = f"{deployment['metadata']['name']}-5d8f7c9b4-x2x7q"
    metadata = {**template["metadata"], "name": name, "namespace": deployment["metadata"]["namespace"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
