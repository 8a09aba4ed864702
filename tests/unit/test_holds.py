"""Holds: the Lease a Scheduling creates to hold a Testbed or a BatchJob, and reading it back."""

from __future__ import annotations

from esi.objects.holds import Hold, HoldKind, hold_manifest, hold_name, read_hold


def test_a_hold_is_a_lease_owned_by_its_scheduling_and_reads_back() -> None:
    lease = hold_manifest(HoldKind.BATCHJOB, "wordcount", namespace="ns", scheduling="s", scheduling_uid="u-1")

    assert (lease["apiVersion"], lease["kind"]) == ("coordination.k8s.io/v1", "Lease")
    assert lease["metadata"]["name"] == "batchjob.wordcount"
    assert lease["spec"]["holderIdentity"] == "s"
    (owner,) = lease["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Scheduling", "s", "u-1")
    assert read_hold(lease) == Hold(HoldKind.BATCHJOB, "wordcount", "s", "u-1")


def test_testbed_and_batchjob_holds_of_one_name_are_different_leases() -> None:
    assert hold_name(HoldKind.TESTBED, "x") != hold_name(HoldKind.BATCHJOB, "x")


def test_a_name_too_long_for_a_lease_ends_in_a_digest_and_stays_distinct() -> None:
    long_a, long_b = "a" * 250, "a" * 249 + "b"
    names = {hold_name(HoldKind.BATCHJOB, n) for n in (long_a, long_b)}

    assert len(names) == 2
    assert all(len(n) <= 253 for n in names)
    lease = hold_manifest(HoldKind.BATCHJOB, long_a, namespace="ns", scheduling="s", scheduling_uid="u")
    assert read_hold(lease) == Hold(HoldKind.BATCHJOB, long_a, "s", "u"), "the held name is kept in full"


def test_leases_that_are_not_holds_read_as_none() -> None:
    assert read_hold({"metadata": {"name": "kube-scheduler"}, "spec": {"holderIdentity": "x"}}) is None
    lease = hold_manifest(HoldKind.TESTBED, "tb", namespace="ns", scheduling="s", scheduling_uid="u")
    lease["metadata"]["labels"]["esi.tu-berlin.de/hold-of"] = "node"
    assert read_hold(lease) is None
    lease = hold_manifest(HoldKind.TESTBED, "tb", namespace="ns", scheduling="s", scheduling_uid="u")
    del lease["spec"]["holderIdentity"]
    assert read_hold(lease) is None
