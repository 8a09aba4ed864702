"""`pulumi up` works here, offline: local file backend, the Python language host and the Kubernetes
provider plugin built by `make tools`, against the shared local cluster."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lightkube import Client
from lightkube.resources.core_v1 import ConfigMap

from infra.local_cluster import LocalCluster
from infra.stacks import pulumi_local
from tests.integration.kube import get_or_none

PROGRAM = """
import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
provider = k8s.Provider("local", kubeconfig=config.require("kubeconfig"))
greeting = k8s.core.v1.ConfigMap(
    "greeting",
    metadata={"name": "greeting", "namespace": config.require("namespace")},
    data={"hello": "from pulumi"},
    opts=pulumi.ResourceOptions(provider=provider),
)
pulumi.export("uid", greeting.metadata["uid"])
"""


def test_pulumi_up_creates_a_configmap_and_destroy_removes_it(
    cluster: LocalCluster, client: Client, namespace: str, tmp_path: Path
) -> None:
    project = tmp_path / "smoke"
    project.mkdir()
    venv = Path(sys.executable).parent.parent
    (project / "Pulumi.yaml").write_text(
        json.dumps({"name": "smoke", "runtime": {"name": "python", "options": {"virtualenv": str(venv)}}})
    )
    (project / "__main__.py").write_text(PROGRAM)
    env = pulumi_local.environment(home=tmp_path / "pulumi-home", backend=tmp_path / "state")
    pulumi_local.ensure_kubernetes_plugin(env, cwd=project)

    def pulumi(*args: str) -> str:
        return pulumi_local.run(list(args), cwd=project, env=env)

    pulumi("stack", "init", "smoke")
    pulumi("config", "set", "kubeconfig", str(cluster.kubeconfig))
    pulumi("config", "set", "namespace", namespace)
    pulumi("up", "--yes", "--skip-preview")

    created = client.get(ConfigMap, "greeting", namespace=namespace)
    assert created.data == {"hello": "from pulumi"}
    outputs = json.loads(pulumi("stack", "output", "--json"))
    assert created.metadata is not None
    assert outputs["uid"] == created.metadata.uid

    pulumi("destroy", "--yes", "--skip-preview")
    assert get_or_none(client, ConfigMap, "greeting", namespace) is None
