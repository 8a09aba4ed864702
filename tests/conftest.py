"""Test-session wiring shared by every test.

Unit tests (tests/unit) need nothing. Integration tests (tests/integration, marked ``integration``
automatically) share one local cluster per test session, even across pytest-xdist workers: the first
worker that needs it creates it under a file lock, and the controlling process deletes it when the session
ends. Set ``ESI_KEEP_CLUSTER=1`` to keep it for inspection (its directory is printed).

When an integration test fails, the lines each component logged while it ran are added to its report, and
what its namespace (the ``namespace`` fixture) holds: esi's objects, the applications, pods and Events. A test
on a cluster of its own asks for the same with ``report_failures_in``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _pytest.nodeid import NodeId
from hypothesis import settings

from infra.local_cluster import ClusterError, LocalCluster, NodeSpec
from infra.toolchain.commands import exclusive

# Shared, noisy machines: a per-example deadline turns a slow moment into a failure that says nothing.
settings.register_profile("esi", deadline=None)
settings.load_profile("esi")

SESSION_ENV = "ESI_TEST_SESSION"
SESSIONS_ROOT = Path(tempfile.gettempdir()) / "esi-test-clusters"
LOG_LINES_PER_COMPONENT = 60

# Ordinary nodes every integration test may schedule onto; a test that needs nodes of a particular shape
# adds its own, labelled so nothing else lands there.
SHARED_NODES = tuple(
    NodeSpec(f"shared-{i}", cpu="8", memory="32Gi", labels={"esi.test/pool": "shared"}) for i in range(3)
)


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    # Workers inherit the controller's environment, so they all find the same session (and cluster).
    if _is_controller(config):
        os.environ[SESSION_ENV] = f"s{uuid.uuid4().hex[:8]}"
        _reap_abandoned_sessions()


@pytest.hookimpl(trylast=True)  # after pytest-xdist's, which names each test's group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)
        # pytest-xdist 3.8 puts an xdist_group into the test's id as ``<id>@<group>`` by setting ``_nodeid``,
        # which pytest 9 no longer reads (its ``nodeid`` is ``_id``): without this, --dist loadgroup would
        # spread a group's tests over workers.
        grouped = item.__dict__.get("_nodeid")
        if isinstance(grouped, str) and grouped != item.nodeid:
            item._id = NodeId.parse(grouped)


def _session_dir(session: str) -> Path:
    return SESSIONS_ROOT / session


def _cluster_of(session: str) -> LocalCluster:
    return LocalCluster(name=f"esi-{session}", workdir=_session_dir(session) / "kwok")


def _reap_abandoned_sessions() -> None:
    """Delete clusters of earlier sessions whose pytest died before it could (killed, machine rebooted)."""
    if not SESSIONS_ROOT.is_dir():
        return
    for directory in SESSIONS_ROOT.iterdir():
        owner = directory / "owner.pid"
        try:
            os.kill(int(owner.read_text()), 0)
        except (FileNotFoundError, ValueError, ProcessLookupError):
            if (directory / "keep").exists():
                continue
            try:
                _cluster_of(directory.name).delete()
            except Exception as err:  # any failure: keep the directory, so the next session tries again
                print(f"could not delete the abandoned test cluster in {directory}: {err}", file=sys.stderr)
                continue
            shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config) -> LocalCluster:
    """The session's local cluster: real etcd, kube-apiserver, controller-manager, kube-scheduler, KWOK."""
    session = os.environ[SESSION_ENV]
    directory = _session_dir(session)
    local = _cluster_of(session)
    with exclusive(directory / "create.lock"):
        if not local.exists():
            owner = os.getppid() if not _is_controller(pytestconfig) else os.getpid()
            (directory / "owner.pid").write_text(str(owner))
            local.create(SHARED_NODES)
    return local


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _is_controller(session.config) or SESSION_ENV not in os.environ:
        return
    name = os.environ[SESSION_ENV]
    directory = _session_dir(name)
    if not directory.exists():
        return
    if os.environ.get("ESI_KEEP_CLUSTER"):
        (directory / "keep").touch()
        print(f"\nkept the test cluster: kubeconfig {_cluster_of(name).kubeconfig}")
        return
    _cluster_of(name).delete()
    shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class FailureReport:
    """What a failed test's report shows: ``cluster``'s component logs past ``log_marks`` (each log's size when
    the test began) and what ``namespace`` holds (None: the test's ``namespace`` fixture)."""

    cluster: LocalCluster
    namespace: str | None
    log_marks: dict[str, int]


FAILURE_REPORT = pytest.StashKey[FailureReport]()


def report_failures_in(item: pytest.Item, cluster: LocalCluster, namespace: str | None = None) -> None:
    """Should ``item`` fail, add to its report what ``cluster``'s components log from now on, and what
    ``namespace`` holds."""
    marks = {name: path.stat().st_size for name, path in cluster.component_logs().items()}
    item.stash[FAILURE_REPORT] = FailureReport(cluster, namespace, marks)


@pytest.fixture(autouse=True)
def _report_failures_in_the_session_cluster(request: pytest.FixtureRequest) -> None:
    if "cluster" in request.fixturenames:
        report_failures_in(request.node, request.getfixturevalue("cluster"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    wanted = item.stash.get(FAILURE_REPORT, None)
    if report.failed and wanted is not None:
        if exited := wanted.cluster.exited_components():
            report.sections.append(("control plane", f"these components no longer run: {', '.join(exited)}"))
        for name, path in wanted.cluster.component_logs().items():
            with path.open("rb") as log:
                log.seek(wanted.log_marks.get(name, 0))
                lines = log.read().decode(errors="replace").splitlines()
            if lines:
                shown = lines[-LOG_LINES_PER_COMPONENT:]
                skipped = f"[{len(lines) - len(shown)} earlier lines in {path}]\n" if len(lines) > len(shown) else ""
                report.sections.append((f"component log: {name}", skipped + "\n".join(shown)))
        namespace = wanted.namespace or getattr(item, "funcargs", {}).get("namespace")
        if report.when == "call" and isinstance(namespace, str):
            contents = _namespace_contents(wanted.cluster, namespace)
            report.sections.append((f"objects in namespace {namespace}", contents))
    return report


def _namespace_contents(cluster: LocalCluster, namespace: str) -> str:
    """What a failed test left in its namespace, as ``kubectl get`` shows it, and the namespace's Events."""
    kinds = "testbeds,schedulings,batchjobs,sparkapplications,flinkdeployments,pods"
    try:
        objects = cluster.kubectl("get", "-n", namespace, kinds, "-o", "wide", "--ignore-not-found")
        messages = cluster.kubectl(
            "get",
            "-n",
            namespace,
            "schedulings,batchjobs",
            "-o",
            "jsonpath={range .items[*]}{.kind}/{.metadata.name}: {.status.message}{'\\n'}{end}",
        )
        events = cluster.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp")
    except ClusterError as err:  # a report of a failure must not fail
        return f"could not list the namespace: {err}"
    return f"{objects}\n{messages}\n{events}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Figures that tests measured (``record_property("figure", text)``): shown after the run, never asserted.

    Through the reports, so that figures measured on pytest-xdist workers reach the controller's terminal.
    """
    figures = [
        (report.nodeid, str(value))
        for report in terminalreporter.stats.get("passed", [])
        for name, value in getattr(report, "user_properties", ())
        if name == "figure"
    ]
    if figures:
        terminalreporter.section("figures")
        for nodeid, text in figures:
            terminalreporter.write_line(f"{nodeid}:\n{text}")
