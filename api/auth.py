"""Who is calling esi's API, and whether they may do what they ask.

Every endpoint except health and metrics takes a bearer token, or none: a caller without one is
``system:anonymous`` (group ``system:unauthenticated``), as in Kubernetes, and is authorized like anyone
else (the original ESI had no authentication, so its clients send no token). Two ways to judge, one
interface (``Authenticator``):

- ``KubernetesAuth`` (in a cluster): the Kubernetes API server decides. A TokenReview says whose token it is,
  a SubjectAccessReview whether RBAC on the esi resources lets them read or submit — for anonymous callers
  too, who may do nothing until an administrator grants ``system:anonymous`` a Role. Answers, yes and no
  alike, are kept for a few seconds, so a busy client does not cost two API calls per request.
- ``StaticToken`` (the local stack): one token, generated at setup; whoever holds it may do anything.
  Anonymous callers are turned away unless it was made with ``anonymous=True``: then anyone who reaches
  the port may do anything too.

Exceptions::

    Refusal             the caller is turned away: .status 401 (who are you?) or 403 (not allowed), .reason
    AuthUnavailable     the API server could not be asked, so there is no answer either way (503, retry)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import httpx2
from lightkube import ApiError, AsyncClient
from lightkube.models.authentication_v1 import TokenReviewSpec, TokenReviewStatus
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec, SubjectAccessReviewStatus
from lightkube.resources.authentication_v1 import TokenReview
from lightkube.resources.authorization_v1 import SubjectAccessReview

from esi.resources.meta import GROUP

__all__ = [
    "ANONYMOUS",
    "NOT_BEARER",
    "NO_TOKEN",
    "AuthUnavailable",
    "Authenticator",
    "KubernetesAuth",
    "Principal",
    "Refusal",
    "StaticToken",
    "bearer_token",
]

NO_TOKEN = "no bearer token: send 'Authorization: Bearer <token>'"  # noqa: S105 (a message, not a secret)
NOT_BEARER = "not a bearer token: send 'Authorization: Bearer <token>'"
LOCAL_PRINCIPAL = "esi-local"
DEFAULT_CACHE_ENTRIES = 10_000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller, as the authenticator named them.

    ``uid`` and ``extra`` come from a TokenReview and go back into the SubjectAccessReview unchanged: an
    authorizer other than RBAC (a webhook) may decide on them.
    """

    name: str
    groups: tuple[str, ...] = ()
    uid: str | None = None
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)


ANONYMOUS = Principal("system:anonymous", ("system:unauthenticated",))


class Refusal(Exception):
    """401 (unauthenticated) or 403 (forbidden), with the reason a person needs."""

    def __init__(self, status: int, reason: str) -> None:
        if status not in {401, 403}:
            raise ValueError(f"a refusal is 401 or 403, not {status}")
        super().__init__(reason)
        self.status = status
        self.reason = reason


class AuthUnavailable(Exception):
    """The Kubernetes API server could not be asked (down, timing out, refusing esi): no answer either way."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Authenticator(Protocol):
    async def authenticate(self, token: str | None) -> Principal:
        """Whose token this is; ``Refusal(401, ...)`` if none or not valid."""
        ...

    async def authorize(
        self, principal: Principal, verb: str, resource: str, namespace: str, *, group: str = GROUP
    ) -> None:
        """Return if ``principal`` may ``verb`` ``resource`` of API ``group`` (esi's unless told) in ``namespace``
        (``""``: cluster-wide, as a cluster-scoped resource asks); else ``Refusal(403, ...)``."""
        ...


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None if there is none.

    Any other header is ``Refusal(401)``: a caller who sent credentials of some kind meant to be someone, and
    is not taken for an anonymous caller, who may be let in where they would not.
    """
    if authorization is None or not authorization.strip():
        return None
    parts = authorization.split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        raise Refusal(401, NOT_BEARER)
    return parts[1]


class StaticToken:
    """The local stack's authenticator: one token; any caller holding it may do anything."""

    def __init__(self, token: str, *, path: Path | None = None, anonymous: bool = False) -> None:
        if not token:
            raise ValueError("the API token must not be empty")
        self._token = token.encode()
        self._refused = f"bearer token not accepted: send the one in {path}" if path else "bearer token not accepted"
        self._anonymous = anonymous

    @classmethod
    def from_file(cls, path: Path, *, create: bool = False, anonymous: bool = False) -> StaticToken:
        """The token kept in ``path``; with ``create``, one generated and written there (mode 0600) if absent.

        Raises ``ValueError`` naming the file if it cannot be read or holds no token.
        """
        if create and not path.exists():
            _write_new_token(path)
        try:
            token = path.read_text().strip()
        except OSError as err:
            raise ValueError(f"cannot read the API token from {path}: {err.strerror}") from err
        if not token:
            raise ValueError(f"the API token file {path} is empty")
        return cls(token, path=path, anonymous=anonymous)

    async def authenticate(self, token: str | None) -> Principal:
        if token is None:
            if self._anonymous:
                return ANONYMOUS
            raise Refusal(401, f"{NO_TOKEN} (this server does not let anonymous callers in)")
        # Constant time: how long a wrong guess takes must not tell how much of it was right.
        if not hmac.compare_digest(token.encode(), self._token):
            raise Refusal(401, self._refused)
        return Principal(LOCAL_PRINCIPAL)

    async def authorize(
        self, principal: Principal, verb: str, resource: str, namespace: str, *, group: str = GROUP
    ) -> None:
        return None


def _write_new_token(path: Path) -> None:
    """Write a fresh token to ``path`` unless some other process got there first (then theirs is kept).

    Written to a private temporary file and linked into place, so nobody ever reads a half-written token
    or one with looser permissions, and two processes starting at once cannot end up with different tokens.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        os.unlink(temporary)


class _ExpiringCache(Generic[K, V]):
    """At most ``max_entries`` answers, each for ``ttl`` seconds; the oldest go first when it is full.

    Every entry lives equally long, so insertion order is expiry order: expired entries are always at
    the front, and pruning them there is enough.
    """

    def __init__(self, ttl: float, max_entries: int, clock: Callable[[], float]) -> None:
        self._ttl = ttl
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        return value

    def put(self, key: K, value: V) -> None:
        now = self._clock()
        self._entries.pop(key, None)
        self._entries[key] = (now + self._ttl, value)
        while self._entries:
            oldest_key, (expires, _) = next(iter(self._entries.items()))
            if expires > now and len(self._entries) <= self._max_entries:
                break
            del self._entries[oldest_key]


_AccessKey = tuple[str, tuple[str, ...], str | None, tuple[tuple[str, tuple[str, ...]], ...], str, str, str, str]


@dataclass(frozen=True)
class _Decision:
    """A SubjectAccessReview's answer; ``refusal`` is the 403 reason when not allowed."""

    refusal: str | None


class KubernetesAuth:
    """In a cluster: TokenReview says who the caller is, SubjectAccessReview whether RBAC lets them.

    esi's own service account needs ``create`` on ``tokenreviews.authentication.k8s.io`` and
    ``subjectaccessreviews.authorization.k8s.io`` (the ``system:auth-delegator`` ClusterRole grants both).
    With ``audiences``, only tokens issued for one of them are accepted.

    Answers are cached for ``cache_seconds``, refusals too (a client retrying a bad token must not cost an
    API call each time); ``AuthUnavailable`` is not, so the next request asks again.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        audiences: Sequence[str] = (),
        cache_seconds: float = 10,
        clock: Callable[[], float] = time.monotonic,
        max_cache_entries: int = DEFAULT_CACHE_ENTRIES,
    ) -> None:
        self._client = client
        self._audiences = list(audiences)
        # Keyed by the token's hash, so the cache holds no token a memory dump could reuse.
        self._identities: _ExpiringCache[bytes, Principal | str] = _ExpiringCache(
            cache_seconds, max_cache_entries, clock
        )
        self._decisions: _ExpiringCache[_AccessKey, _Decision] = _ExpiringCache(cache_seconds, max_cache_entries, clock)

    async def authenticate(self, token: str | None) -> Principal:
        if token is None:
            return ANONYMOUS
        key = hashlib.sha256(token.encode()).digest()
        identity = self._identities.get(key)
        if identity is None:
            identity = _identity(await self._review_token(token), self._audiences)
            self._identities.put(key, identity)
        if isinstance(identity, str):
            raise Refusal(401, identity)
        return identity

    async def authorize(
        self, principal: Principal, verb: str, resource: str, namespace: str, *, group: str = GROUP
    ) -> None:
        extra = tuple(sorted(principal.extra.items()))
        key: _AccessKey = (principal.name, principal.groups, principal.uid, extra, verb, group, resource, namespace)
        decision = self._decisions.get(key)
        if decision is None:
            status = await self._review_access(principal, verb, group, resource, namespace)
            refusal = _forbidden(status, principal, verb, _qualified(resource, group), namespace)
            decision = _Decision(None if status.allowed else refusal)
            self._decisions.put(key, decision)
        if decision.refusal is not None:
            raise Refusal(403, decision.refusal)

    async def _review_token(self, token: str) -> TokenReviewStatus:
        review = TokenReview(spec=TokenReviewSpec(token=token, audiences=self._audiences or None))
        try:
            answer = await self._client.create(review)
        except httpx2.HTTPError as err:  # ApiError among them
            raise AuthUnavailable(_unavailable("TokenReview", err)) from err
        return answer.status or TokenReviewStatus()

    async def _review_access(
        self, principal: Principal, verb: str, group: str, resource: str, namespace: str
    ) -> SubjectAccessReviewStatus:
        attributes = ResourceAttributes(group=group, resource=resource, verb=verb, namespace=namespace or None)
        review = SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                user=principal.name,
                groups=list(principal.groups) or None,
                uid=principal.uid,
                extra={name: list(values) for name, values in principal.extra.items()} or None,
                resourceAttributes=attributes,
            )
        )
        try:
            answer = await self._client.create(review)
        except httpx2.HTTPError as err:  # ApiError among them
            raise AuthUnavailable(_unavailable("SubjectAccessReview", err)) from err
        return answer.status or SubjectAccessReviewStatus(allowed=False)


def _identity(status: TokenReviewStatus, audiences: Sequence[str]) -> Principal | str:
    """The caller a TokenReview names, or the 401 reason."""
    if not status.authenticated:
        return "bearer token not accepted by Kubernetes" + (f": {status.error}" if status.error else "")
    user = status.user
    if user is None or not user.username:
        return "bearer token not accepted: Kubernetes authenticated it but named no user"
    # An API server that ignores spec.audiences answers with none: the token may be meant for anyone.
    if audiences and not set(audiences) & set(status.audiences or ()):
        return f"bearer token not accepted: it is not meant for {', '.join(audiences)}"
    return Principal(
        name=user.username,
        groups=tuple(user.groups or ()),
        uid=user.uid,
        extra={name: tuple(values) for name, values in (user.extra or {}).items()},
    )


def _qualified(resource: str, group: str) -> str:
    """A resource as RBAC names it: ``testbeds.esi.tu-berlin.de``, or ``nodes`` (the core group)."""
    return f"{resource}.{group}" if group else resource


def _forbidden(
    status: SubjectAccessReviewStatus, principal: Principal, verb: str, resource: str, namespace: str
) -> str:
    """The 403 reason; ``resource`` as RBAC names it (``_qualified``)."""
    where = f"in namespace {namespace}" if namespace else "in all namespaces"
    # The reason, as kube-apiserver gives it in its own 403s (RBAC leaves it empty when nothing matched).
    reason = f": {status.reason}" if status.reason else ""
    if principal == ANONYMOUS:
        reason += (
            f" (no bearer token was sent: send 'Authorization: Bearer <token>', or have an administrator grant "
            f"{ANONYMOUS.name} {verb} on {resource} {where})"
        )
    return f"forbidden: {principal.name} may not {verb} {resource.removesuffix(f'.{GROUP}')} {where}{reason}"


def _unavailable(review: str, err: httpx2.HTTPError) -> str:
    if isinstance(err, ApiError):
        return f"the Kubernetes API server refused esi's {review} ({err.status.code}): {err.status.message}"
    return f"cannot reach the Kubernetes API server for a {review}: {type(err).__name__}: {err}"
