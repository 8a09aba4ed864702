"""Bearer tokens: the local stack's one token, and Kubernetes TokenReview/SubjectAccessReview in a cluster.

``KubernetesAuth`` talks to a fake API server behind lightkube's real client (an httpx2 mock transport),
so what goes over the wire is checked too.
"""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from lightkube import AsyncClient, KubeConfig

from api.auth import (
    ANONYMOUS,
    NO_TOKEN,
    AuthUnavailable,
    KubernetesAuth,
    Principal,
    Refusal,
    StaticToken,
    bearer_token,
)

ALICE = {
    "username": "alice",
    "uid": "u-1",
    "groups": ["researchers", "system:authenticated"],
    "extra": {"scopes": ["esi"]},
}


def refused(call: Coroutine[Any, Any, object]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        asyncio.run(call)
    return caught.value


# --- bearer_token ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.def-1", "abc.def-1"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("  Bearer   abc  ", "abc"),
        (None, None),
        ("", None),
    ],
    ids=["bearer", "lower-case scheme", "upper-case scheme", "extra blanks", "no header", "empty header"],
)
def test_bearer_token_parses_the_authorization_header(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer   ", "Basic dXNlcjpwYXNz", "Bearerabc", "Bearer abc def"],
    ids=["scheme without token", "scheme with blanks only", "basic auth", "no space after scheme", "two tokens"],
)
def test_an_authorization_header_that_is_no_bearer_token_is_a_401_not_anonymous(header: str) -> None:
    with pytest.raises(Refusal) as caught:
        bearer_token(header)

    assert caught.value.status == 401
    assert "send 'Authorization: Bearer <token>'" in caught.value.reason


def test_refusal_carries_status_and_reason() -> None:
    refusal = Refusal(403, "forbidden: alice may not create schedulings in namespace a")

    assert (refusal.status, refusal.reason, str(refusal)) == (403, refusal.reason, refusal.reason)
    with pytest.raises(ValueError, match="401 or 403"):
        Refusal(500, "oops")


# --- StaticToken ----------------------------------------------------------------------------------------


def test_static_token_accepts_its_token_and_allows_everything() -> None:
    auth = StaticToken("s3cret")

    principal = asyncio.run(auth.authenticate("s3cret"))

    assert principal == Principal("esi-local")
    asyncio.run(auth.authorize(principal, "create", "schedulings", "anywhere"))


@pytest.mark.parametrize("token", ["wrong", "s3cre", "s3cret ", ""], ids=["other", "prefix", "longer", "empty"])
def test_static_token_refuses_another_token(token: str) -> None:
    refusal = refused(StaticToken("s3cret").authenticate(token))

    assert (refusal.status, refusal.reason) == (401, "bearer token not accepted")


def test_static_token_refuses_a_missing_token_saying_what_to_send() -> None:
    refusal = refused(StaticToken("s3cret").authenticate(None))

    assert (refusal.status, refusal.reason) == (401, f"{NO_TOKEN} (this server does not let anonymous callers in)")


def test_static_token_lets_anonymous_callers_in_when_made_to() -> None:
    anonymous = StaticToken("s3cret", anonymous=True)

    assert asyncio.run(anonymous.authenticate(None)) == ANONYMOUS
    assert (ANONYMOUS.name, ANONYMOUS.groups) == ("system:anonymous", ("system:unauthenticated",))
    assert asyncio.run(anonymous.authorize(ANONYMOUS, "create", "schedulings", "default")) is None
    assert refused(anonymous.authenticate("wrong")).status == 401


def test_from_file_creates_a_private_token_and_reuses_it(tmp_path: Path) -> None:
    path = tmp_path / "state" / "esi" / "api-token"

    first = StaticToken.from_file(path, create=True)
    token = path.read_text().strip()
    second = StaticToken.from_file(path, create=True)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(token) >= 43  # 32 random bytes, base64url
    assert [p.name for p in path.parent.iterdir()] == ["api-token"]  # no temporary file left behind
    assert asyncio.run(first.authenticate(token)) == asyncio.run(second.authenticate(token))
    assert path.read_text().strip() == token


def test_from_file_keeps_a_token_someone_wrote(tmp_path: Path) -> None:
    path = tmp_path / "api-token"
    path.write_text("chosen-by-the-operator\n")

    auth = StaticToken.from_file(path, create=True)

    assert asyncio.run(auth.authenticate("chosen-by-the-operator")) == Principal("esi-local")
    assert path.read_text() == "chosen-by-the-operator\n"


def test_from_file_refusal_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "api-token"
    path.write_text("right")

    refusal = refused(StaticToken.from_file(path).authenticate("wrong"))

    assert refusal.reason == f"bearer token not accepted: send the one in {path}"


@pytest.mark.parametrize("content", ["", " \n"], ids=["empty", "blank"])
def test_from_file_rejects_an_empty_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "api-token"
    path.write_text(content)

    with pytest.raises(ValueError, match=f"the API token file {path} is empty"):
        StaticToken.from_file(path, create=True)


def test_from_file_without_create_needs_the_file(tmp_path: Path) -> None:
    path = tmp_path / "api-token"

    with pytest.raises(ValueError, match=f"cannot read the API token from {path}: No such file or directory"):
        StaticToken.from_file(path)
    assert not path.exists()


# --- KubernetesAuth -------------------------------------------------------------------------------------


@dataclass
class FakeApiServer:
    """Answers TokenReviews from ``users`` and SubjectAccessReviews from ``grants``; records every review.

    ``outage`` makes it fail instead: "unreachable" (connection refused) or an HTTP status it answers with.
    """

    users: dict[str, dict[str, Any]] = field(default_factory=lambda: {"alice-token": ALICE})
    grants: dict[tuple[str, str, str, str], str] = field(default_factory=dict)  # (user, verb, resource, ns) → reason
    deny_reason: str = ""
    audience_aware: bool = True  # answers with the audiences asked for, as kube-apiserver does
    outage: str | int | None = None
    reviews: list[dict[str, Any]] = field(default_factory=list)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        review = json.loads(request.content)
        self.reviews.append(review)
        if self.outage == "unreachable":
            raise httpx2.ConnectError("connection refused", request=request)
        if isinstance(self.outage, int):
            message = f"the server says {self.outage}"
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
            return httpx2.Response(self.outage, json={**status, "code": self.outage})
        spec = review["spec"]
        if review["kind"] == "TokenReview":
            user = self.users.get(spec["token"])
            if user is None:
                answer: dict[str, Any] = {"authenticated": False, "error": "invalid bearer token"}
            else:
                answer = {"authenticated": True, "user": user}
                if self.audience_aware:
                    answer["audiences"] = spec.get("audiences", [])
        else:
            attributes = spec["resourceAttributes"]
            key = (spec["user"], attributes["verb"], attributes["resource"], attributes.get("namespace", ""))
            reason = self.grants.get(key)
            answer = {"allowed": True, "reason": reason} if reason is not None else {"allowed": False}
            if reason is None and self.deny_reason:
                answer["reason"] = self.deny_reason
        return httpx2.Response(201, json={**review, "status": answer})

    def count(self, kind: str) -> int:
        return sum(1 for review in self.reviews if review["kind"] == kind)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


FAKE_KUBECONFIG = {
    "clusters": [{"name": "fake", "cluster": {"server": "https://kube.test"}}],
    "users": [{"name": "esi", "user": {"token": "esi-own-token"}}],
    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "esi"}}],
    "current-context": "fake",
}


@pytest.fixture
def server() -> FakeApiServer:
    return FakeApiServer()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def kubernetes_auth(server: FakeApiServer, clock: FakeClock, **options: Any) -> KubernetesAuth:
    client = AsyncClient(
        config=KubeConfig.from_dict(FAKE_KUBECONFIG), transport=httpx2.MockTransport(server.handle), trust_env=False
    )
    return KubernetesAuth(client, clock=clock, **options)


@pytest.fixture
def auth(server: FakeApiServer, clock: FakeClock) -> KubernetesAuth:
    return kubernetes_auth(server, clock, cache_seconds=10)


def alice() -> Principal:
    return Principal("alice", ("researchers", "system:authenticated"), uid="u-1", extra={"scopes": ("esi",)})


def test_token_review_names_the_caller(auth: KubernetesAuth, server: FakeApiServer) -> None:
    principal = asyncio.run(auth.authenticate("alice-token"))

    assert principal == alice()
    assert server.reviews == [
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "alice-token"}}
    ]


def test_unknown_token_is_refused_with_the_reviews_error(auth: KubernetesAuth) -> None:
    refusal = refused(auth.authenticate("forged"))

    assert (refusal.status, refusal.reason) == (401, "bearer token not accepted by Kubernetes: invalid bearer token")


def test_a_caller_without_a_token_is_anonymous_without_asking_kubernetes(
    auth: KubernetesAuth, server: FakeApiServer
) -> None:
    principal = asyncio.run(auth.authenticate(None))

    assert principal == ANONYMOUS
    assert server.reviews == []


def test_anonymous_callers_are_reviewed_by_rbac_and_told_how_to_get_in(
    auth: KubernetesAuth, server: FakeApiServer
) -> None:
    server.grants[("system:anonymous", "list", "testbeds", "lab")] = ""

    asyncio.run(auth.authorize(ANONYMOUS, "list", "testbeds", "lab"))
    refusal = refused(auth.authorize(ANONYMOUS, "create", "schedulings", "lab"))

    assert server.reviews[0]["spec"]["user"] == "system:anonymous"
    assert server.reviews[0]["spec"]["groups"] == ["system:unauthenticated"]
    assert refusal.reason == (
        "forbidden: system:anonymous may not create schedulings in namespace lab (no bearer token was sent: send "
        "'Authorization: Bearer <token>', or have an administrator grant system:anonymous create on "
        "schedulings.esi.tu-berlin.de in namespace lab)"
    )


def test_audiences_are_sent_and_checked(server: FakeApiServer, clock: FakeClock) -> None:
    auth = kubernetes_auth(server, clock, audiences=["esi"])

    assert asyncio.run(auth.authenticate("alice-token")).name == "alice"
    assert server.reviews[0]["spec"] == {"token": "alice-token", "audiences": ["esi"]}


def test_token_for_another_audience_is_refused(server: FakeApiServer, clock: FakeClock) -> None:
    # An API server that ignores spec.audiences answers with none; such a token may be meant for anything.
    server.audience_aware = False
    auth = kubernetes_auth(server, clock, audiences=["esi"])

    refusal = refused(auth.authenticate("alice-token"))

    assert (refusal.status, refusal.reason) == (401, "bearer token not accepted: it is not meant for esi")


def test_access_review_asks_about_the_caller_and_the_esi_resource(auth: KubernetesAuth, server: FakeApiServer) -> None:
    server.grants[("alice", "list", "schedulings", "team-a")] = "RBAC: allowed by RoleBinding readers/team-a"

    asyncio.run(auth.authorize(alice(), "list", "schedulings", "team-a"))

    assert server.reviews == [
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "alice",
                "uid": "u-1",
                "groups": ["researchers", "system:authenticated"],
                "extra": {"scopes": ["esi"]},
                "resourceAttributes": {
                    "group": "esi.tu-berlin.de",
                    "resource": "schedulings",
                    "verb": "list",
                    "namespace": "team-a",
                },
            },
        }
    ]


@pytest.mark.parametrize(
    ("deny_reason", "expected"),
    [
        ("", "forbidden: alice may not create schedulings in namespace team-a"),
        ("denied by policy", "forbidden: alice may not create schedulings in namespace team-a: denied by policy"),
    ],
    ids=["no reason", "with the review's reason"],
)
def test_access_denied_is_403_naming_who_what_and_where(
    auth: KubernetesAuth, server: FakeApiServer, deny_reason: str, expected: str
) -> None:
    server.deny_reason = deny_reason
    server.grants[("alice", "list", "schedulings", "team-a")] = ""

    refusal = refused(auth.authorize(alice(), "create", "schedulings", "team-a"))

    assert (refusal.status, refusal.reason) == (403, expected)


def test_access_across_namespaces_says_so(auth: KubernetesAuth, server: FakeApiServer) -> None:
    refusal = refused(auth.authorize(alice(), "list", "batchjobs", ""))

    assert refusal.reason == "forbidden: alice may not list batchjobs in all namespaces"
    assert "namespace" not in server.reviews[0]["spec"]["resourceAttributes"]


def test_answers_are_cached_until_they_expire(auth: KubernetesAuth, server: FakeApiServer, clock: FakeClock) -> None:
    server.grants[("alice", "list", "schedulings", "team-a")] = ""

    for _ in range(3):
        principal = asyncio.run(auth.authenticate("alice-token"))
        asyncio.run(auth.authorize(principal, "list", "schedulings", "team-a"))
    assert (server.count("TokenReview"), server.count("SubjectAccessReview")) == (1, 1)

    clock.now += 9.9
    asyncio.run(auth.authorize(asyncio.run(auth.authenticate("alice-token")), "list", "schedulings", "team-a"))
    assert (server.count("TokenReview"), server.count("SubjectAccessReview")) == (1, 1)

    clock.now += 0.1
    asyncio.run(auth.authorize(asyncio.run(auth.authenticate("alice-token")), "list", "schedulings", "team-a"))
    assert (server.count("TokenReview"), server.count("SubjectAccessReview")) == (2, 2)


def test_refusals_are_cached_too(auth: KubernetesAuth, server: FakeApiServer, clock: FakeClock) -> None:
    for _ in range(3):
        assert refused(auth.authenticate("forged")).status == 401
        assert refused(auth.authorize(alice(), "create", "schedulings", "team-a")).status == 403
    assert (server.count("TokenReview"), server.count("SubjectAccessReview")) == (1, 1)

    # A grant made meanwhile counts once the cached refusal has expired.
    server.grants[("alice", "create", "schedulings", "team-a")] = ""
    clock.now += 10
    asyncio.run(auth.authorize(alice(), "create", "schedulings", "team-a"))


def test_cached_answers_are_per_token_and_per_request(auth: KubernetesAuth, server: FakeApiServer) -> None:
    server.users["bob-token"] = {"username": "bob"}

    assert asyncio.run(auth.authenticate("alice-token")).name == "alice"
    assert asyncio.run(auth.authenticate("bob-token")).name == "bob"
    requests = [("list", "schedulings", "a"), ("create", "schedulings", "a"), ("list", "batchjobs", "a")]
    for verb, resource, namespace in [*requests, ("list", "schedulings", "b")]:
        refused(auth.authorize(alice(), verb, resource, namespace))
    refused(auth.authorize(Principal("bob"), "list", "schedulings", "a"))

    assert (server.count("TokenReview"), server.count("SubjectAccessReview")) == (2, 5)


def test_no_caching_with_zero_seconds(server: FakeApiServer, clock: FakeClock) -> None:
    auth = kubernetes_auth(server, clock, cache_seconds=0)

    for _ in range(2):
        asyncio.run(auth.authenticate("alice-token"))
        refused(auth.authorize(alice(), "list", "schedulings", "a"))

    assert (server.count("TokenReview"), server.count("SubjectAccessReview")) == (2, 2)


def test_the_cache_forgets_the_oldest_answer_when_full(server: FakeApiServer, clock: FakeClock) -> None:
    server.users |= {"bob-token": {"username": "bob"}, "carol-token": {"username": "carol"}}
    auth = kubernetes_auth(server, clock, max_cache_entries=2)

    for token in ["alice-token", "bob-token", "carol-token", "carol-token", "bob-token"]:
        asyncio.run(auth.authenticate(token))
    assert server.count("TokenReview") == 3

    asyncio.run(auth.authenticate("alice-token"))
    assert server.count("TokenReview") == 4


@pytest.mark.parametrize(
    ("outage", "reason"),
    [
        (
            "unreachable",
            "cannot reach the Kubernetes API server for a {review}: ConnectError: connection refused",
        ),
        (403, "the Kubernetes API server refused esi's {review} (403): the server says 403"),
        (500, "the Kubernetes API server refused esi's {review} (500): the server says 500"),
    ],
    ids=["unreachable", "esi not allowed to review", "server error"],
)
def test_an_api_server_outage_is_unavailable_not_a_refusal_and_not_cached(
    auth: KubernetesAuth, server: FakeApiServer, outage: str | int, reason: str
) -> None:
    server.outage = outage
    with pytest.raises(AuthUnavailable) as token_review:
        asyncio.run(auth.authenticate("alice-token"))
    with pytest.raises(AuthUnavailable) as access_review:
        asyncio.run(auth.authorize(alice(), "list", "schedulings", "a"))

    assert token_review.value.reason == reason.format(review="TokenReview")
    assert access_review.value.reason == reason.format(review="SubjectAccessReview")

    server.outage = None
    server.grants[("alice", "list", "schedulings", "a")] = ""
    assert asyncio.run(auth.authenticate("alice-token")) == alice()
    asyncio.run(auth.authorize(alice(), "list", "schedulings", "a"))


def test_a_cluster_scoped_core_resource_is_asked_about_in_its_own_group(
    auth: KubernetesAuth, server: FakeApiServer
) -> None:
    refusal = refused(auth.authorize(alice(), "patch", "nodes", "", group=""))

    assert refusal.reason == "forbidden: alice may not patch nodes in all namespaces"
    assert server.reviews[0]["spec"]["resourceAttributes"] == {"group": "", "resource": "nodes", "verb": "patch"}
