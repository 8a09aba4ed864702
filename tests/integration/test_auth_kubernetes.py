"""``KubernetesAuth`` against the session's real kube-apiserver: service account tokens, TokenReview, RBAC.

A service account that may read the esi resources in its namespace (get, list, watch) but not submit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import pytest
from lightkube import AsyncClient, Client, KubeConfig
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.core_v1 import ServiceAccount, ServiceAccountToken
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

from api.app import create_api_app
from api.auth import KubernetesAuth, Principal, Refusal
from api.threaded import serve_in_thread
from esi.resources.meta import GROUP
from infra.local_cluster import LocalCluster
from kube.resources import SchedulingResource
from tests.integration.kube import wait_for

T = TypeVar("T")
ACCOUNT = "reader"
ESI_RESOURCES = ["testbeds", "batchjobs", "schedulings"]


@dataclass(frozen=True)
class Reader:
    """The service account: its name as Kubernetes authenticates it, its uid; ``token`` issues a fresh token."""

    user: str
    uid: str
    namespace: str

    def token(self, client: Client, audiences: Sequence[str] = ()) -> str:
        request = ServiceAccountToken(
            metadata=ObjectMeta(), spec=TokenRequestSpec(audiences=list(audiences), expirationSeconds=600)
        )
        issued = client.create(request, name=ACCOUNT, namespace=self.namespace)
        assert issued.status is not None
        return str(issued.status.token)


@pytest.fixture
def reader(client: Client, namespace: str) -> Reader:
    account = client.create(ServiceAccount(metadata=ObjectMeta(name=ACCOUNT)), namespace=namespace)
    rule = PolicyRule(apiGroups=[GROUP], resources=ESI_RESOURCES, verbs=["get", "list", "watch"])
    client.create(Role(metadata=ObjectMeta(name="esi-reader"), rules=[rule]), namespace=namespace)
    binding = RoleBinding(
        metadata=ObjectMeta(name="esi-reader"),
        roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name="esi-reader"),
        subjects=[Subject(kind="ServiceAccount", name=ACCOUNT, namespace=namespace)],
    )
    client.create(binding, namespace=namespace)
    assert account.metadata is not None
    user = f"system:serviceaccount:{namespace}:{ACCOUNT}"
    # The RBAC authorizer reads roles from an informer: wait until it has seen the binding, so a cached
    # "no" from KubernetesAuth cannot come from the moment before.
    wait_for(
        f"RBAC to let {user} list schedulings",
        lambda: _allowed(client, user, "list", "schedulings", namespace),
        timeout=30,
    )
    return Reader(user=user, uid=str(account.metadata.uid), namespace=namespace)


def _allowed(client: Client, user: str, verb: str, resource: str, namespace: str, *, group: str = GROUP) -> bool:
    attributes = ResourceAttributes(group=group, resource=resource, verb=verb, namespace=namespace)
    review = client.create(SubjectAccessReview(spec=SubjectAccessReviewSpec(user=user, resourceAttributes=attributes)))
    return review.status is not None and review.status.allowed


def with_auth(cluster: LocalCluster, use: Callable[[KubernetesAuth], Awaitable[T]], **options: Any) -> T:
    """Run ``use`` with a ``KubernetesAuth`` on an async client of the cluster (one event loop for both)."""

    async def run() -> T:
        client = AsyncClient(config=KubeConfig.from_file(cluster.kubeconfig))
        try:
            return await use(KubernetesAuth(client, **options))
        finally:
            await client.close()

    return asyncio.run(run())


async def refusal(call: Awaitable[object]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        await call
    return caught.value


def test_apiserver_reviews_tokens_and_authorizes_with_rbac(cluster: LocalCluster, client: Client) -> None:
    """The precondition for everything below: kube-apiserver serves both review APIs and RBAC decides."""
    resources = cluster.kubectl("api-resources", "--api-group=authentication.k8s.io", "-o", "name")
    resources += cluster.kubectl("api-resources", "--api-group=authorization.k8s.io", "-o", "name")
    assert {"tokenreviews.authentication.k8s.io", "subjectaccessreviews.authorization.k8s.io"} <= set(resources.split())
    # An authorizer that cannot say no (AlwaysAllow) would let anybody read the secrets.
    assert not _allowed(client, "nobody-in-particular", "get", "secrets", "default", group="")


def test_service_account_token_authenticates_as_the_account(
    cluster: LocalCluster, client: Client, reader: Reader
) -> None:
    token = reader.token(client)

    principal = with_auth(cluster, lambda auth: auth.authenticate(token))

    assert principal.name == reader.user
    assert principal.uid == reader.uid
    assert {"system:serviceaccounts", f"system:serviceaccounts:{reader.namespace}", "system:authenticated"} <= set(
        principal.groups
    )


def test_rbac_lets_the_account_read_but_not_submit(cluster: LocalCluster, client: Client, reader: Reader) -> None:
    token = reader.token(client)

    async def check(auth: KubernetesAuth) -> list[Refusal]:
        principal = await auth.authenticate(token)
        for resource in ESI_RESOURCES:
            await auth.authorize(principal, "list", resource, reader.namespace)
        await auth.authorize(principal, "watch", "schedulings", reader.namespace)
        return [
            await refusal(auth.authorize(principal, "create", "schedulings", reader.namespace)),
            await refusal(auth.authorize(principal, "list", "schedulings", "default")),
            await refusal(auth.authorize(principal, "list", "schedulings", "")),
        ]

    submit, elsewhere, everywhere = with_auth(cluster, check)

    assert (submit.status, submit.reason) == (
        403,
        f"forbidden: {reader.user} may not create schedulings in namespace {reader.namespace}",
    )
    assert (elsewhere.status, elsewhere.reason) == (
        403,
        f"forbidden: {reader.user} may not list schedulings in namespace default",
    )
    assert (everywhere.status, everywhere.reason) == (
        403,
        f"forbidden: {reader.user} may not list schedulings in all namespaces",
    )


def test_garbage_token_is_unauthenticated(cluster: LocalCluster) -> None:
    refused = with_auth(cluster, lambda auth: refusal(auth.authenticate("not-a-token")))

    assert (refused.status, refused.reason) == (401, "bearer token not accepted by Kubernetes: invalid bearer token")


def test_audiences_accept_only_tokens_issued_for_esi(cluster: LocalCluster, client: Client, reader: Reader) -> None:
    for_esi, for_apiserver = reader.token(client, audiences=["esi"]), reader.token(client)

    async def check(auth: KubernetesAuth) -> tuple[Principal, Refusal]:
        return await auth.authenticate(for_esi), await refusal(auth.authenticate(for_apiserver))

    principal, refused = with_auth(cluster, check, audiences=["esi"])

    assert principal.name == reader.user
    assert refused.status == 401
    assert refused.reason.startswith("bearer token not accepted by Kubernetes: ")
    assert 'is invalid for the target audiences ["esi"]' in refused.reason  # kube-apiserver's words


def test_the_api_lets_a_reader_read_and_refuses_its_submissions(
    esi_crds: LocalCluster, client: Client, reader: Reader
) -> None:
    """The whole path: the API app with Kubernetes deciding, called over HTTP with a service account token."""
    config = KubeConfig.from_file(esi_crds.kubeconfig)
    reviews = AsyncClient(config=config)
    app = create_api_app(
        KubernetesAuth(reviews), namespace=reader.namespace, kube_config=config, closing=[reviews.close]
    )
    headers = {"Authorization": f"Bearer {reader.token(client)}"}
    with serve_in_thread(app, lifespan="on") as url, httpx.Client(base_url=url, headers=headers, timeout=10) as api:
        wait_for("the API to be ready", lambda: api.get("/readyz").status_code == 200)

        assert api.get("/external/schedulings").json() == []
        submitted = api.post("/external/schedulings", json={"name": "s", "testBed": "tb", "queue": ["a"]})
        elsewhere = api.get("/external/schedulings", params={"namespace": "default"})
        anonymous = httpx.get(f"{url}/external/schedulings")

    assert submitted.status_code == 403
    assert submitted.json()["detail"]["message"] == (
        f"forbidden: {reader.user} may not create schedulings in namespace {reader.namespace}"
    )
    assert elsewhere.status_code == 403
    # No token: system:anonymous, whom RBAC lets do nothing here.
    assert anonymous.status_code == 403
    assert anonymous.json()["detail"]["message"].startswith(
        f"forbidden: system:anonymous may not list schedulings in namespace {reader.namespace} (no bearer token"
    )
    assert list(client.list(SchedulingResource, namespace=reader.namespace)) == [], "a refused submission wrote"
