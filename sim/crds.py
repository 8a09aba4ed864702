"""The SparkApplication and FlinkDeployment CRDs a local cluster gets instead of the real operators' ones.

Names, scope, short names, the status subresource and the printer columns are those of the kubeflow Spark
operator's ``sparkapplications.sparkoperator.k8s.io`` (v1beta2) and the Apache Flink Kubernetes operator's
``flinkdeployments.flink.apache.org`` (v1beta1). The schemas are *not* copied from upstream: spec and status
are objects that keep whatever they are given (``x-kubernetes-preserve-unknown-fields``), so the simulator
accepts every spec the real operators accept, and also some they would refuse. What the simulator reads
from a spec is described in ``sim.pods``.

``python -m sim.crds`` writes them to ``crds/sim/`` (``make crds`` runs it), ``--check`` reports files that
differ from ``application_crds()``; a unit test fails when they do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from esi.objects import applications

__all__ = ["CRD_DIR", "FLINK", "SPARK", "ApplicationType", "application_crds", "rendered"]

CRD_DIR: Final = Path(__file__).resolve().parent.parent / "crds" / "sim"
HEADER: Final = "# Generated from sim/crds.py by `python -m sim.crds`; do not edit.\n"


@dataclass(frozen=True)
class ApplicationType:
    """One kind of application the simulator runs, as its operator's CRD names it."""

    group: str
    version: str
    kind: str
    plural: str
    short_name: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


# The kinds esi creates (esi.objects.applications names them), with the short names their operators' CRDs give.
SPARK: Final = ApplicationType(
    applications.SPARK.group, applications.SPARK.version, applications.SPARK.kind, applications.SPARK.plural, "sparkapp"
)
FLINK: Final = ApplicationType(
    applications.FLINK.group, applications.FLINK.version, applications.FLINK.kind, applications.FLINK.plural, "flinkdep"
)

_SPARK_COLUMNS: Final = (
    {"name": "Status", "type": "string", "jsonPath": ".status.applicationState.state"},
    {"name": "Attempts", "type": "string", "jsonPath": ".status.executionAttempts"},
    {"name": "Start", "type": "string", "jsonPath": ".status.lastSubmissionAttemptTime"},
    {"name": "Finish", "type": "string", "jsonPath": ".status.terminationTime"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
)
_FLINK_COLUMNS: Final = (
    {
        "name": "Job Status",
        "type": "string",
        "description": "Last observed state of the job.",
        "jsonPath": ".status.jobStatus.state",
    },
    {
        "name": "Lifecycle State",
        "type": "string",
        "description": "Lifecycle state of the Flink resource (including being rolled back, failed etc.).",
        "jsonPath": ".status.lifecycleState",
    },
)
# sparkoperator.k8s.io ends in .k8s.io, a group the API server protects: a CRD there must name where its
# API was approved. This is what the kubeflow CRD names.
_SPARK_APPROVAL: Final = {"api-approved.kubernetes.io": "https://github.com/kubeflow/spark-operator/pull/1298"}


def application_crds() -> list[dict[str, Any]]:
    """The SparkApplication and FlinkDeployment CRDs, in that order."""
    return [_crd(SPARK, _SPARK_COLUMNS, _SPARK_APPROVAL), _crd(FLINK, _FLINK_COLUMNS, {})]


def _crd(
    application: ApplicationType, columns: Sequence[dict[str, str]], annotations: dict[str, str]
) -> dict[str, Any]:
    open_object = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    metadata: dict[str, Any] = {"name": application.crd_name}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": application.group,
            "names": {
                "kind": application.kind,
                "listKind": f"{application.kind}List",
                "plural": application.plural,
                "singular": application.kind.lower(),
                "shortNames": [application.short_name],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": application.version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": dict(open_object),
                                "status": dict(open_object),
                            },
                            "required": ["spec"],
                        }
                    },
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [dict(c) for c in columns],
                }
            ],
        },
    }


def rendered() -> dict[Path, str]:
    """Each CRD file's path and its YAML text, as ``application_crds`` defines it now."""
    return {
        CRD_DIR / f"{crd['spec']['names']['plural']}.yaml": HEADER + yaml.safe_dump(crd, sort_keys=False, width=120)
        for crd in application_crds()
    }


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.crds", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report files that differ from application_crds()")
    args = parser.parse_args(argv)
    stale = [path for path, text in rendered().items() if not path.is_file() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path} is out of date: run `make crds`", file=sys.stderr)
        return 1 if stale else 0
    CRD_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in rendered().items():
        path.write_text(text)
    print(f"wrote {len(rendered())} CRDs to {CRD_DIR} ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
