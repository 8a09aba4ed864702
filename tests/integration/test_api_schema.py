"""Property-based: schemathesis sends what the OpenAPI schema allows (and what it does not) to the running
API; whatever it sends, the answer is never a server error and matches the documented schema.

Driven through hypothesis directly, one property per operation, rather than schemathesis' pytest plugin
(which does not run under this pytest).
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.integration.conftest import EsiApi


def test_no_request_makes_the_api_fail(esi_endpoint: EsiApi, namespace: str) -> None:
    schema = schemathesis.openapi.from_url(f"{esi_endpoint.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 10, [o.label for o in operations]
    headers = {"Authorization": f"Bearer {esi_endpoint.token}"}
    tried: dict[str, int] = {}

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def answers_properly(case: schemathesis.Case[Any]) -> None:
            if case.operation.path.startswith("/external"):
                case.query = {**(case.query or {}), "namespace": namespace}  # writes stay in the test's namespace
            case.call_and_validate(
                base_url=esi_endpoint.url, headers=headers, checks=[not_a_server_error, response_schema_conformance]
            )
            tried[case.operation.label] = tried.get(case.operation.label, 0) + 1

        answers_properly()

    assert set(tried) == {o.label for o in operations}
