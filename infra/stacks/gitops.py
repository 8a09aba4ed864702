"""GitOps: the Testbeds, BatchJobs and Schedulings committed under ``manifests/``, applied by ``pulumi up``.

Every YAML document in the directory (``*.yaml``/``*.yml``, recursively, in name order) becomes one
Kubernetes object of the stack, named by kind, namespace and name — so moving an object to another file
changes nothing, and deleting it from the directory deletes it from the cluster on the next ``up``.
``pulumi preview`` shows the difference between what is committed and what is applied.

Documents are read and checked against esi's models (the same pydantic models the CRDs are generated
from) before Pulumi registers anything: a manifest with a wrong field stops the whole ``up`` with the file,
the document and the field, and nothing changes. The Kubernetes provider applies server-side, so the
fields esi writes at run time (status, finalizers) are not the stack's and are never reverted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pydantic import BaseModel, ValidationError

from esi.resources.batchjob import BatchJob
from esi.resources.meta import API_VERSION
from esi.resources.scheduling import Scheduling
from esi.resources.testbed import Testbed
from esi.wire.rest import field_problems

__all__ = ["ManifestError", "Manifests", "committed_objects"]

_MODELS: dict[str, type[BaseModel]] = {"Testbed": Testbed, "BatchJob": BatchJob, "Scheduling": Scheduling}
# Applied in this order: what a Scheduling names should exist before it.
_ORDER = {"Testbed": 0, "BatchJob": 1, "Scheduling": 2}


class ManifestError(pulumi.RunError, ValueError):
    """A committed document that is not a valid esi object; the message names file, document and fields.

    A ``pulumi.RunError``: Pulumi shows the message alone, without a traceback.
    """


@dataclass(frozen=True)
class Committed:
    source: str  # file:document
    manifest: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def key(self) -> str:
        meta = self.manifest["metadata"]
        return f"{self.kind}:{meta['namespace']}/{meta['name']}"


def _documents(directory: Path) -> Iterator[tuple[str, Any]]:
    files = sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    for path in files:
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as err:
            raise ManifestError(f"{path}: not YAML: {err}") from err
        for index, document in enumerate(documents):
            if document is not None:
                yield f"{path.relative_to(directory)}#{index + 1}", document


def committed_objects(directory: Path, default_namespace: str) -> list[Committed]:
    """The esi objects committed under ``directory``, checked, in the order they are to be applied."""
    found: dict[str, Committed] = {}
    problems: list[str] = []
    for source, document in _documents(directory):
        if not isinstance(document, dict):
            problems.append(f"{source}: a manifest is a mapping, not {type(document).__name__}")
            continue
        kind = document.get("kind")
        if document.get("apiVersion") != API_VERSION or kind not in _MODELS:
            problems.append(
                f"{source}: manifests/ holds {API_VERSION} Testbeds, BatchJobs and Schedulings, "
                f"not {document.get('apiVersion')} {kind}"
            )
            continue
        manifest = dict(document)
        manifest["metadata"] = {**(document.get("metadata") or {})}
        manifest["metadata"].setdefault("namespace", default_namespace)
        try:
            _MODELS[str(kind)].model_validate(manifest)
        except ValidationError as err:
            fields = "; ".join(f"{p.field}: {p.problem}" for p in field_problems(err, whole="(manifest)"))
            problems.append(f"{source}: {kind} {manifest['metadata'].get('name')}: {fields}")
            continue
        if "status" in manifest:
            problems.append(f"{source}: {kind} {manifest['metadata']['name']}: status is esi's to write, not Git's")
            continue
        committed = Committed(source, manifest)
        if committed.key in found:
            problems.append(f"{source}: {committed.key} is also in {found[committed.key].source}")
            continue
        found[committed.key] = committed
    if problems:
        raise ManifestError("invalid manifests, nothing applied:\n  " + "\n  ".join(problems))
    return sorted(found.values(), key=lambda c: (_ORDER[c.kind], c.key))


class Manifests(pulumi.ComponentResource):
    """The committed esi objects as resources of the stack (``applied``: their keys)."""

    def __init__(
        self,
        name: str,
        *,
        directory: str,
        provider: k8s.Provider,
        default_namespace: str = "default",
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("esi:gitops:Manifests", name, None, opts)
        path = Path(directory)
        objects = committed_objects(path, default_namespace) if path.is_dir() else []
        created: dict[str, k8s.apiextensions.CustomResource] = {}
        for item in objects:
            before = [r for key, r in created.items() if _ORDER[key.split(":")[0]] < _ORDER[item.kind]]
            manifest = item.manifest
            created[item.key] = k8s.apiextensions.CustomResource(
                item.key,
                api_version=manifest["apiVersion"],
                kind=manifest["kind"],
                metadata=manifest["metadata"],
                spec=manifest.get("spec"),
                opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=before),
            )
        self.applied: pulumi.Output[Sequence[str]] = pulumi.Output.from_input(sorted(created))
        self.register_outputs({"applied": self.applied})
