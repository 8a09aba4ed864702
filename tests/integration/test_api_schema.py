"""The running API and extender against their own OpenAPI: Schemathesis' engine (what ``schemathesis run``
runs) with every check it has, on the session's cluster.

Every phase: the documented examples, coverage (boundary values, each parameter and body made invalid in
turn, methods the path does not have, requests without the token), fuzzing with valid and invalid data, and
stateful sequences through the OpenAPI links (a Scheduling created, read, deleted, read again). Every check:
no 5xx, invalid data refused with a 4xx and valid data accepted, status codes, content types, headers and
bodies as documented, ``Allow`` on 405, a missing token refused, a deleted Scheduling gone and a created one
there.

Bounded: at most ``MAX_EXAMPLES`` generated cases per operation and phase, ``MAX_STEPS`` calls per stateful
sequence and ``MAX_SECONDS`` for each application (the stateful phase runs until then): the module takes about
two minutes on the loaded 2-core test machine, the cluster's start included (131 s with 40 s per app; about
1,000 requests each). A fixed seed makes a failure repeat.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

import schemathesis
from schemathesis.engine import Status, events, from_schema

from infra.local_cluster import LocalCluster
from tests.integration.conftest import EsiApi
from tests.integration.esi_objects import spark_job

MAX_EXAMPLES = 15
MAX_STEPS = 6
MAX_SECONDS = 35
SEED = 47


@dataclass
class FuzzRun:
    """What one engine run did: requests per operation, and each failed check with how to repeat it."""

    requests: Counter[str] = field(default_factory=Counter)
    phases: Counter[str] = field(default_factory=Counter)
    checks: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop_reason: str = ""

    def summary(self) -> str:
        return (
            f"{sum(self.requests.values())} requests over {len(self.requests)} operations "
            f"({', '.join(f'{phase}: {n}' for phase, n in self.phases.items())}), "
            f"{len(self.failures)} failures, {len(self.errors)} errors, stopped: {self.stop_reason}; "
            f"checks made: {', '.join(f'{check} {n}' for check, n in sorted(self.checks.items()))}"
        )


def fuzz(schema_url: str, config: dict[str, Any]) -> FuzzRun:
    """Run every phase with every check against the application whose OpenAPI is at ``schema_url``."""
    settings = {
        "seed": SEED,
        "max-time": MAX_SECONDS,
        "checks": {"enabled": True},
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "database": "none"},
        "phases": {"stateful": {"max-steps": MAX_STEPS}},
        **config,
    }
    schema = schemathesis.openapi.from_url(schema_url, config=schemathesis.Config.from_dict(settings))
    run = FuzzRun()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            for case_id in recorder.interactions:
                run.requests[recorder.cases[case_id].value.operation.label] += 1
                run.phases[str(event.phase)] += 1
            for checks in recorder.checks.values():
                for check in checks:
                    run.checks[check.name] += 1
                    if check.status == Status.FAILURE and check.failure_info is not None:
                        failure = check.failure_info.failure
                        run.failures.append(
                            f"{check.name} {failure.operation}: {failure.title}: {failure.message}\n"
                            f"  {check.failure_info.code_sample}"
                        )
        elif isinstance(event, events.NonFatalError):
            run.errors.append(f"{event.label}: {event.info.format()}")
        elif isinstance(event, events.FatalError):
            run.errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            run.stop_reason = str(event.stop_reason)
    return run


def report(run: FuzzRun) -> str:
    return "\n".join([run.summary(), *dict.fromkeys(run.failures), *run.errors])


# Valid data is accepted (2xx), or refused for what the cluster holds (401, 403, 404, 409; 429; a 5xx is
# not_a_server_error's). Where a schema-valid request can also be a 422 for what no schema can say, that
# operation allows 422 too: the jobs a submission names must exist (the OpenAPI cannot list the cluster's
# BatchJobs), a runs selector must parse as a label selector and a continue token be one a page answered.
ACCEPTED: Final = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
REFUSED_FOR_THE_CLUSTER: Final = [
    {
        "include-path": path,
        "include-method": method,
        "checks": {"positive_data_acceptance": {"expected-statuses": [*ACCEPTED, "422"]}},
    }
    for method, path in [("POST", "/external/schedulings"), ("GET", "/external/runs")]
]


def test_the_api_answers_as_documented(esi_stack: LocalCluster, esi_endpoint: EsiApi, namespace: str) -> None:
    for job in ("wordcount", "pagerank"):  # the jobs the documented submissions name, so those are written
        spark_job(esi_stack, namespace, job)
    run = fuzz(
        f"{esi_endpoint.url}/openapi.json",
        {
            "auth": {"openapi": {"HTTPBearer": {"bearer": esi_endpoint.token}}},
            "parameters": {"query.namespace": namespace},  # writes stay in the test's namespace
            "operations": REFUSED_FOR_THE_CLUSTER,
        },
    )
    print(report(run))
    assert not run.failures, report(run)
    assert not run.errors, report(run)
    assert len(run.requests) >= 15, report(run)
    assert set(run.phases) >= {"examples", "coverage", "fuzzing", "stateful"}, report(run)
    assert set(run.checks) >= {"ignored_auth", "use_after_free", "ensure_resource_availability"}, report(run)


def test_the_extender_answers_as_documented(esi_endpoint: EsiApi) -> None:
    origin = urlsplit(esi_endpoint.extender_url)._replace(path="").geturl()
    run = fuzz(f"{origin}/openapi.json", {})
    print(report(run))
    assert not run.failures, report(run)
    assert not run.errors, report(run)
    assert len(run.requests) >= 5, report(run)
    assert set(run.phases) >= {"coverage", "fuzzing"}, report(run)  # no links: no stateful sequences
