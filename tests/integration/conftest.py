"""Fixtures for tests against the shared local cluster: an API client and a namespace per test."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Namespace

from esi.crds import DEFINITIONS, crd
from infra.local_cluster import LocalCluster
from tests.integration.kube import namespace_manifest


@pytest.fixture(scope="session")
def client(cluster: LocalCluster) -> Iterator[Client]:
    api = Client(config=KubeConfig.from_file(cluster.kubeconfig), field_manager="esi-tests")
    yield api
    api.close()


@pytest.fixture
def namespace(client: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test; deleted (with everything in it) afterwards."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].rstrip("-")
    name = f"{slug}-{uuid.uuid4().hex[:5]}"
    client.create(namespace_manifest(name))
    yield name
    client.delete(Namespace, name)


@pytest.fixture
def unique() -> str:
    """A short suffix for cluster-scoped names (nodes, priority classes, scheduler names)."""
    return uuid.uuid4().hex[:6]


@pytest.fixture(scope="session")
def esi_crds(cluster: LocalCluster) -> LocalCluster:
    """The session's cluster with esi's CRDs installed and established (as generated from the models now)."""
    crds = [crd(d) for d in DEFINITIONS]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                    input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": crds}))  # fmt: skip
    cluster.kubectl("wait", "--for=condition=Established", *(f"crd/{c['metadata']['name']}" for c in crds))
    return cluster
