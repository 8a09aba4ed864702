"""The API server's refusals as the shells tell them apart (kube.errors), and ``ignore``."""

from __future__ import annotations

import asyncio

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import Status, StatusCause, StatusDetails

from kube.errors import Refusal, ignore, refusal


def refused(code: int | None, *causes: str) -> ApiError:
    details = StatusDetails(causes=[StatusCause(reason=c) for c in causes]) if causes else StatusDetails()
    return ApiError(status=Status(code=code, message=f"refused with {code}", details=details))


REFUSALS = {
    "400-bad-request": (refused(400), Refusal.BAD_REQUEST),
    "401-unauthorized": (refused(401), Refusal.UNAUTHORIZED),
    "403-forbidden": (refused(403), Refusal.FORBIDDEN),
    "403-namespace-terminating": (refused(403, "NamespaceTerminating"), Refusal.NAMESPACE_TERMINATING),
    "403-another-cause-stays-forbidden": (refused(403, "Quota"), Refusal.FORBIDDEN),
    "404-not-found": (refused(404), Refusal.NOT_FOUND),
    "409-conflict": (refused(409), Refusal.CONFLICT),
    "410-gone": (refused(410), Refusal.GONE),
    "422-naming-fields-is-invalid": (refused(422, "FieldValueNotSupported"), Refusal.INVALID),
    "422-naming-no-field-is-a-failed-test": (refused(422), Refusal.TEST_FAILED),
    "404-with-a-terminating-cause-is-still-not-found": (refused(404, "NamespaceTerminating"), Refusal.NOT_FOUND),
    "500-other": (refused(500), Refusal.OTHER),
    "no-code-other": (refused(None), Refusal.OTHER),
}


@pytest.mark.parametrize(("err", "meaning"), REFUSALS.values(), ids=REFUSALS.keys())
def test_a_refusal_means_what_its_code_and_causes_say(err: ApiError, meaning: Refusal) -> None:
    assert refusal(err) is meaning


def test_refusals_of_the_request_itself() -> None:
    assert {r for r in Refusal if r.of_the_request} == {
        Refusal.BAD_REQUEST,
        Refusal.FORBIDDEN,
        Refusal.NAMESPACE_TERMINATING,
        Refusal.INVALID,
        Refusal.TEST_FAILED,
    }


async def failing(err: ApiError) -> None:
    raise err


def test_ignore_takes_the_expected_refusal_as_success() -> None:
    asyncio.run(ignore(Refusal.NOT_FOUND, failing(refused(404))))


def test_ignore_lets_any_other_refusal_out() -> None:
    conflict = refused(409)
    with pytest.raises(ApiError) as raised:
        asyncio.run(ignore(Refusal.NOT_FOUND, failing(conflict)))
    assert raised.value is conflict
