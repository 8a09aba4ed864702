"""Pure pieces of the local cluster: simulated node manifests, second-scheduler configuration, and waiting for
CRDs (with a stand-in kubectl)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from esi.objects.slot_resource import SLOT_RESOURCE
from infra.local_cluster import KWOK_NODE_ANNOTATION, ClusterError, LocalCluster, NodeSpec, node_manifest
from infra.stacks.second_scheduler import SecondSchedulerSettings, scheduler_configuration


def test_node_manifest_is_adopted_by_kwok_and_carries_capacity_and_labels() -> None:
    node = node_manifest(NodeSpec("n1", cpu="2", memory="8Gi", pods=20, labels={"esi/node-id": "3"}))

    assert node["metadata"]["annotations"][KWOK_NODE_ANNOTATION] == "fake"
    assert node["metadata"]["labels"]["esi/node-id"] == "3"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    assert node["status"]["allocatable"] == {"cpu": "2", "memory": "8Gi", "pods": "20"}
    assert node["status"]["capacity"] == node["status"]["allocatable"]
    assert "taints" not in node.get("spec", {}), "ordinary pods must be able to land on simulated nodes"


def test_second_scheduler_configuration_has_the_settings_esi_relies_on() -> None:
    config = scheduler_configuration(
        SecondSchedulerSettings("esi-scheduler", "http://127.0.0.1:8080/extender", qps=300, burst=600),
        kubeconfig="/k/config",
    )

    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["percentageOfNodesToScore"] == 100
    assert config["profiles"] == [
        {
            "schedulerName": "esi-scheduler",
            "plugins": {"multiPoint": {"disabled": [{"name": "NodeResourcesFit"}, {"name": "DefaultPreemption"}]}},
        }
    ]
    assert config["clientConnection"] == {"qps": 300, "burst": 600, "kubeconfig": "/k/config"}
    assert config["leaderElection"] == {"leaderElect": False}
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "http://127.0.0.1:8080/extender"
    assert (extender["filterVerb"], extender["bindVerb"]) == ("filter", "bind")
    assert "preemptVerb" not in extender
    assert extender["nodeCacheCapable"] is True
    assert extender["enableHTTPS"] is False
    assert extender["ignorable"] is False


def test_the_preemption_path_counts_resources_and_preempts_through_the_extender() -> None:
    settings = SecondSchedulerSettings("esi-scheduler", "http://127.0.0.1:8080/extender", bind_verb=None)

    config = scheduler_configuration(settings, None)

    assert config["profiles"] == [{"schedulerName": "esi-scheduler"}]
    (extender,) = config["extenders"]
    assert (extender["filterVerb"], extender["preemptVerb"]) == ("filter", "preempt")
    assert "bindVerb" not in extender


def test_shared_with_the_ordinary_profile_one_process_runs_both_and_asks_the_extender_about_slots_only() -> None:
    alone = scheduler_configuration(SecondSchedulerSettings("esi-scheduler", "http://esi/extender"), None)
    settings = SecondSchedulerSettings("esi-scheduler", "http://esi/extender", shared_with="default-scheduler")

    config = scheduler_configuration(settings, None)

    ordinary, esi = config["profiles"]
    assert ordinary == {"schedulerName": "default-scheduler"}, "ordinary pods are placed as by any kube-scheduler"
    assert esi == alone["profiles"][0]
    assert config["percentageOfNodesToScore"] == 100
    (extender,) = config["extenders"]
    assert extender["managedResources"] == [{"name": SLOT_RESOURCE, "ignoredByScheduler": False}]
    assert {k: v for k, v in extender.items() if k != "managedResources"} == alone["extenders"][0]
    assert "managedResources" not in alone["extenders"][0], "alone, esi's scheduler asks about every pod it places"


def test_in_cluster_configuration_has_no_kubeconfig_and_https_extender_is_https() -> None:
    config = scheduler_configuration(SecondSchedulerSettings("s", "https://esi-api.esi-system.svc/extender"), None)

    assert "kubeconfig" not in config["clientConnection"]
    assert config["extenders"][0]["enableHTTPS"] is True


def test_without_extender_url_there_is_no_extender() -> None:
    assert "extenders" not in scheduler_configuration(SecondSchedulerSettings("s"), None)


def crd_answers(*conditions: list[dict[str, str]]) -> Iterator[str]:
    """What ``kubectl get crd a.example -o json`` says, one answer per look: the CRD with those conditions."""
    for listed in conditions:
        crd = {"kind": "CustomResourceDefinition", "metadata": {"name": "a.example"}, "status": {"conditions": listed}}
        yield json.dumps(crd)


def test_waiting_for_a_crd_outlasts_a_status_without_conditions(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = crd_answers(
        [], [{"type": "NamesAccepted", "status": "True"}], [{"type": "Established", "status": "True"}]
    )
    monkeypatch.setattr(LocalCluster, "kubectl", lambda self, *args, **kwargs: next(answers))

    LocalCluster("c", workdir=Path("/nowhere")).wait_for_crds(["a.example"], timeout=5)

    assert next(answers, None) is None, "it looked until the CRD was established"


def test_a_crd_never_established_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LocalCluster, "kubectl", lambda self, *args, **kwargs: next(crd_answers([])))

    with pytest.raises(ClusterError, match=r"not established after 0s: a\.example"):
        LocalCluster("c", workdir=Path("/nowhere")).wait_for_crds(["a.example"], timeout=0)
