"""The SparkApplication and FlinkDeployment CRDs of local clusters: the real operators' names, columns and
status subresource, open schemas, and committed YAML that matches ``application_crds()``."""

from __future__ import annotations

from sim.crds import application_crds, rendered


def test_committed_crds_match_the_function() -> None:
    stale = [p.name for p, text in rendered().items() if not p.is_file() or p.read_text() != text]
    assert not stale, f"crds/sim/ drifted from sim/crds.py, run `make crds`: {stale}"


def test_names_are_the_real_operators() -> None:
    spark, flink = application_crds()

    assert spark["metadata"]["name"] == "sparkapplications.sparkoperator.k8s.io"
    assert spark["spec"]["names"]["kind"] == "SparkApplication"
    assert spark["spec"]["names"]["shortNames"] == ["sparkapp"]
    assert [v["name"] for v in spark["spec"]["versions"]] == ["v1beta2"]
    assert flink["metadata"]["name"] == "flinkdeployments.flink.apache.org"
    assert flink["spec"]["names"]["kind"] == "FlinkDeployment"
    assert flink["spec"]["names"]["shortNames"] == ["flinkdep"]
    assert [v["name"] for v in flink["spec"]["versions"]] == ["v1beta1"]
    # The API server protects *.k8s.io groups: without the approval annotation it refuses the CRD.
    assert spark["metadata"]["annotations"]["api-approved.kubernetes.io"].startswith("https://")


def test_namespaced_with_status_subresource_and_open_structural_schemas() -> None:
    for crd in application_crds():
        (version,) = crd["spec"]["versions"]
        schema = version["schema"]["openAPIV3Schema"]
        assert crd["spec"]["scope"] == "Namespaced"
        assert version["subresources"] == {"status": {}}
        assert schema["type"] == "object"
        for part in ("spec", "status"):
            assert schema["properties"][part] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_printer_columns_show_the_states() -> None:
    spark, flink = application_crds()

    spark_columns = {c["name"]: c["jsonPath"] for c in spark["spec"]["versions"][0]["additionalPrinterColumns"]}
    flink_columns = {c["name"]: c["jsonPath"] for c in flink["spec"]["versions"][0]["additionalPrinterColumns"]}

    assert spark_columns == {
        "Status": ".status.applicationState.state",
        "Attempts": ".status.executionAttempts",
        "Start": ".status.lastSubmissionAttemptTime",
        "Finish": ".status.terminationTime",
        "Age": ".metadata.creationTimestamp",
    }
    assert flink_columns == {"Job Status": ".status.jobStatus.state", "Lifecycle State": ".status.lifecycleState"}
