"""The typed Python client of esi's external scheduler API: REST for reading and deciding, STOMP for waiting.

A scheduler author's whole loop, with the original's example scheduler in mind (each node gets one job in
all its slots, because slot ids interleave across nodes)::

    import os
    from esi.client.api_client import EsiClient

    with EsiClient("http://127.0.0.1:8082", token=os.environ.get("ESI_TOKEN")) as esi:
        testbed = esi.testbed("scheduler-slots")
        jobs = sorted(esi.jobs())[: testbed.number_of_nodes]
        esi.submit_queue("example", testbed.name, jobs * testbed.number_of_slots_per_node)
        done = esi.wait_for_scheduling("example", timeout=3600)
        for entry in done.job_status:
            run = esi.job(entry.name).scheduled_events[-1]
            print(entry.name, run.successful, run.stop - run.start if run.stop else None)
        esi.delete_scheduling("example")

The run table — every finished run, with the jobs it met and for how long — comes page by page::

    with EsiClient(url, token=token) as esi:
        for run in esi.runs(RunFilter(job=["wordcount"], selector="experiment=e1")):
            print(run.name, run.runtime_seconds, [(c.job, c.seconds) for c in run.colocated])

``AsyncEsiClient`` has the same methods as coroutines (but for ``runs_csv``). Results are the wire models
of ``esi.wire.rest`` in esi's view: ``esi_state`` is a state in esi's words (as kubectl shows it),
``state`` the original's.
The library reads no environment variables: URL, token and namespace are arguments (the CLI reads
``ESI_URL``, ``ESI_TOKEN`` and ``ESI_NAMESPACE``).

Every failure is an ``EsiError``::

    EsiError
    ├── EsiConnectionError      the API (REST or STOMP) could not be reached, or the connection broke
    ├── SubscriptionRefused     esi refused a STOMP subscription (unknown destination, not allowed, ...)
    ├── UnexpectedResponse      the answer was not what the esi API sends (a different server, or version)
    ├── WaitTimeout             wait_for_scheduling gave up waiting (also a TimeoutError)
    ├── ResourceDeleted         what was being waited for was deleted
    └── ApiStatusError          the API refused: .status, .message, .errors (FieldProblem per field)
        ├── Invalid             400, 422: the request is wrong; .errors says where
        ├── Unauthorized        401: no token, or a wrong one
        ├── Forbidden           403: the token may not do this (in this namespace)
        ├── NotFound            404
        ├── Conflict            409
        └── Unavailable         503: the API is up but cannot serve yet (e.g. its caches are not synced)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    AsyncExitStack,
    ExitStack,
    asynccontextmanager,
    contextmanager,
)
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, Literal, Protocol, Self, TypeVar, cast, overload
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from esi.resources.batchjob import RunOutcome
from esi.resources.scheduling import SchedulingState
from esi.results.table import RunEntry, RunPage
from esi.wire.rest import (
    ApiError,
    ExternalBatchJob,
    ExternalScheduling,
    ExternalTestbed,
    FieldProblem,
    Overview,
    ResourceModification,
    SchedulingSubmission,
    SubmittedSlots,
    SubmittedSlotsJob,
    TestbedNodes,
    TestbedNodesRequest,
    View,
)

__all__ = [
    "Action",
    "ApiStatusError",
    "AsyncEsiClient",
    "AsyncSubscriber",
    "AsyncSubscription",
    "AsyncWatch",
    "Conflict",
    "EsiClient",
    "EsiConnectionError",
    "EsiError",
    "Event",
    "Forbidden",
    "Invalid",
    "Kind",
    "NotFound",
    "Resource",
    "ResourceDeleted",
    "RunFilter",
    "StompMessage",
    "Submitted",
    "Subscriber",
    "Subscription",
    "SubscriptionRefused",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
    "WaitTimeout",
    "Watch",
    "topic",
]

T = TypeVar("T")
Kind = Literal["testbeds", "jobs", "schedulings"]
Action = Literal["ADDED", "MODIFIED", "DELETED", "ERROR"]
Resource = ExternalTestbed | ExternalBatchJob | ExternalScheduling
R = TypeVar("R", bound=Resource)

_MODELS: dict[str, type[Resource]] = {
    "testbeds": ExternalTestbed,
    "jobs": ExternalBatchJob,
    "schedulings": ExternalScheduling,
}
# What a request may set; state, jobStatus and the other read-only fields are the server's to fill.
_REQUEST_FIELDS = {"name", "test_bed", "queue", "slots"}
DEFAULT_WAIT = 600.0


# ---------------------------------------------------------------------------------------------- errors


class EsiError(Exception):
    """Anything that went wrong talking to esi."""


class EsiConnectionError(EsiError):
    """The API could not be reached at ``url`` (refused, timed out, name not resolved, connection broken)."""

    def __init__(self, url: str, reason: object) -> None:
        self.url = url
        self.reason = str(reason) or type(reason).__name__
        super().__init__(f"could not reach the esi API at {url}: {self.reason}")


class SubscriptionRefused(EsiError):
    """esi answered a STOMP subscription with an ERROR frame; the message is the server's."""


class UnexpectedResponse(EsiError):
    """The server answered, but not in the shape the esi API promises."""


class WaitTimeout(EsiError, TimeoutError):
    """``wait_for_scheduling`` did not see the wanted state in time; ``last`` is the last state seen."""

    def __init__(self, name: str, states: Sequence[str], timeout: float, last: str | None) -> None:
        self.name, self.states, self.timeout, self.last = name, tuple(states), timeout, last
        super().__init__(
            f"scheduling {name} did not reach {' or '.join(states)} within {timeout:g}s (last seen: {last})"
        )


class ResourceDeleted(EsiError):
    """The object being waited for was deleted (by someone else, or by a GitOps sync)."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind.removesuffix('s')} {name} was deleted while waiting for it")


class ApiStatusError(EsiError):
    """The API refused the request with ``status``; ``errors`` names each wrong field of the request."""

    def __init__(self, status: int, message: str, errors: Sequence[FieldProblem] = ()) -> None:
        self.status = status
        self.message = message
        self.errors = list(errors)
        super().__init__(status, message, self.errors)

    def __str__(self) -> str:
        problems = "".join(f"\n  {e.field}: {e.problem}" for e in self.errors)
        return f"{self.message} (HTTP {self.status}){problems}"


class Invalid(ApiStatusError):
    """400 or 422: the request is malformed or breaks a rule; ``errors`` says where."""


class Unauthorized(ApiStatusError):
    """401: no token was sent, or the API does not accept it."""


class Forbidden(ApiStatusError):
    """403: the token is valid but may not do this."""


class NotFound(ApiStatusError):
    """404: no such object (in this namespace)."""


class Conflict(ApiStatusError):
    """409: the object changed or is held by something else meanwhile."""


class Unavailable(ApiStatusError):
    """503: the API cannot answer yet, e.g. while its caches of the cluster fill."""


_STATUS_ERRORS: dict[int, type[ApiStatusError]] = {
    400: Invalid,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Invalid,
    503: Unavailable,
}


def _problems(items: object) -> list[FieldProblem]:
    """Field problems from either esi's ``errors`` or FastAPI's default ``[{loc, msg}]``, skipping the odd."""
    problems = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if "field" in item and "problem" in item:
            problems.append(FieldProblem(field=str(item["field"]), problem=str(item["problem"])))
        elif "loc" in item and "msg" in item:
            loc = [str(part) for part in item["loc"]] if isinstance(item["loc"], list) else [str(item["loc"])]
            # FastAPI's first element says where the value came from (body, query); the rest is the path.
            path = loc[1:] if len(loc) > 1 and loc[0] in {"body", "query", "path"} else loc
            problems.append(FieldProblem(field=".".join(path), problem=str(item["msg"])))
    return problems


def _status_error(response: httpx.Response) -> ApiStatusError:
    """The exception for a refusal: the API's ``{"detail": ApiError}``, or whatever readable text came."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    detail = body.get("detail", body) if isinstance(body, dict) else body
    message, problems = "", []
    if isinstance(detail, dict):
        try:
            error = ApiError.model_validate(detail)
            message, problems = error.message, error.errors
        except ValidationError:
            message = str(detail.get("message") or "")
            problems = _problems(detail.get("errors"))
    elif isinstance(detail, str):
        message = detail
    elif isinstance(detail, list):
        problems = _problems(detail)
        message = "the request is invalid" if problems else ""
    if not message:
        text = response.text.strip()
        message = text[:500] if text and body is None else response.reason_phrase or "request refused"
    cls = _STATUS_ERRORS.get(response.status_code, ApiStatusError)
    return cls(response.status_code, message, problems)


# ---------------------------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Submitted:
    """What ``submit`` did: the Scheduling as the API now has it, and whether it was new (201) or replaced."""

    scheduling: ExternalScheduling
    created: bool


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request, described once and sent by either client; ``read`` turns a 2xx response into a result."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    body: Any = None
    namespaced: bool = True
    namespace: str | None = None  # overrides the client's, for a request that names its own
    # Its answer is a Testbed, BatchJob or Scheduling: asked for in esi's view, which these models read.
    viewed: bool = True
    params: Mapping[str, Any] = field(default_factory=dict)  # more of the query


def _model(adapter: TypeAdapter[T]) -> Callable[[httpx.Response], T]:
    return lambda response: adapter.validate_json(response.content)


_OVERVIEW = _model(TypeAdapter(Overview))
_TESTBED = _model(TypeAdapter(ExternalTestbed))
_TESTBEDS = _model(TypeAdapter(list[ExternalTestbed]))
_JOB = _model(TypeAdapter(ExternalBatchJob))
_JOBS = _model(TypeAdapter(dict[str, ExternalBatchJob]))
_SCHEDULING = _model(TypeAdapter(ExternalScheduling))
_SCHEDULINGS = _model(TypeAdapter(list[ExternalScheduling]))
_TESTBED_NODES = _model(TypeAdapter(TestbedNodes))


def _submitted(response: httpx.Response) -> Submitted:
    return Submitted(_SCHEDULING(response), created=response.status_code == httpx.codes.CREATED)


def _ready(response: httpx.Response) -> bool:
    return True


def _path(*parts: str) -> str:
    # Kubernetes names need no escaping, but a typo with a slash must not reach a different route.
    return "/" + "/".join(quote(part, safe="") for part in parts)


def _external(*parts: str) -> str:
    return _path("external", *parts)


def _submit_call(
    scheduling: SchedulingSubmission | ExternalScheduling, client_namespace: str | None
) -> _Call[Submitted]:
    namespace = scheduling.namespace if isinstance(scheduling, ExternalScheduling) else None
    if namespace and client_namespace and namespace != client_namespace:
        raise ValueError(
            f"scheduling {scheduling.name} names namespace {namespace}, but the client uses {client_namespace}"
        )
    body = scheduling.model_dump(mode="json", include=_REQUEST_FIELDS, exclude_none=True)
    return _Call("POST", _external("schedulings"), _submitted, body=body, namespace=namespace)


def _queue(name: str, testbed: str, jobs: Sequence[str]) -> SchedulingSubmission:
    return SchedulingSubmission(name=name, test_bed=testbed, queue=list(jobs))


def _slots(name: str, testbed: str, jobs: Mapping[str, Sequence[int]], strict: bool) -> SchedulingSubmission:
    slots = SubmittedSlots(
        mode="STRICT" if strict else "RELAXED",
        jobs=[SubmittedSlotsJob(name=job, slots=list(ids)) for job, ids in jobs.items()],
    )
    return SchedulingSubmission(name=name, test_bed=testbed, slots=slots)


def _external_scheduler_body(name: str, data: Mapping[str, Sequence[Mapping[str, str]]]) -> dict[str, Any]:
    return {"name": name, "externalScheduler": {key: [dict(entry) for entry in value] for key, value in data.items()}}


def _label_nodes_call(testbed: str, count: int, dry_run: bool) -> _Call[TestbedNodes]:
    # Not validated here: the API's 422 names the field, as for every other request.
    body = TestbedNodesRequest.model_construct(count=count, dry_run=dry_run).model_dump(mode="json")
    return _Call("POST", _external("testbeds", testbed, "nodes"), _TESTBED_NODES, body=body, viewed=False)


def _read(response: httpx.Response, read: Callable[[httpx.Response], T]) -> T:
    if not response.is_success:
        raise _status_error(response)
    try:
        return read(response)
    except ValueError as err:  # pydantic's ValidationError and a body that is not JSON both land here
        raise UnexpectedResponse(
            f"{response.request.method} {response.request.url} answered {response.status_code} with a body "
            f"that is not what the esi API sends: {err}"
        ) from err


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _params(call: _Call[Any], namespace: str | None) -> dict[str, Any]:
    chosen = call.namespace or namespace
    return {
        **({"view": View.ESI.value} if call.viewed else {}),
        **({"namespace": chosen} if call.namespaced and chosen else {}),
        **call.params,
    }


@dataclass(frozen=True)
class RunFilter:
    """Which runs ``runs`` asks for: each given filter must hold; several values of one are alternatives."""

    job: Sequence[str] = ()
    scheduling: Sequence[str] = ()
    testbed: Sequence[str] = ()
    outcome: Sequence[RunOutcome | str] = ()
    selector: str | None = None  # a label selector, as kubectl -l takes it
    since: datetime | None = None  # runs that ended at or after it
    until: datetime | None = None  # runs that started before it

    def params(self) -> dict[str, Any]:
        """The filter as ``GET /external/runs`` takes it."""
        repeated = {"job": self.job, "scheduling": self.scheduling, "testbed": self.testbed, "outcome": self.outcome}
        moments = {"since": self.since, "until": self.until}
        return {
            **{key: [str(v) for v in values] for key, values in repeated.items() if values},
            **({"selector": self.selector} if self.selector else {}),
            **{key: moment.isoformat() for key, moment in moments.items() if moment is not None},
        }


RUN_PAGE_SIZE = 10_000  # runs per request: few round trips, pages of a few MB
_RUN_PAGE = _model(TypeAdapter(RunPage))
CONTINUE_HEADER = "Esi-Continue"


def _runs_call(
    runs: RunFilter, token: str | None, page_size: int, format: str, read: Callable[[httpx.Response], T]
) -> _Call[T]:
    params = {**runs.params(), "limit": page_size, "format": format, **({"continue": token} if token else {})}
    return _Call("GET", _external("runs"), read, viewed=False, params=params)


def _record_page(response: httpx.Response) -> tuple[list[dict[str, Any]], str | None]:
    page = from_json(response.content)
    if not isinstance(page, dict) or not isinstance(page.get("items"), list):
        raise ValueError("not a page of runs: no items")  # noqa: TRY004 (_read reports any ValueError as such)
    token = page.get("continue")
    return page["items"], token if isinstance(token, str) else None


def _csv_page(response: httpx.Response) -> tuple[bytes, str | None]:
    return response.content, response.headers.get(CONTINUE_HEADER)


# ---------------------------------------------------------------------------------------------- STOMP


class StompMessage(Protocol):
    """What the client reads of a STOMP message (``esi.wire.stomp_frames.Message`` is one)."""

    @property
    def destination(self) -> str: ...

    def json(self) -> Any: ...


class Subscription(Protocol):
    """Messages of a live subscription; ``next`` gives ``None`` when nothing came within ``timeout``."""

    def __iter__(self) -> Iterator[StompMessage]: ...

    def next(self, timeout: float, /) -> StompMessage | None: ...


class AsyncSubscription(Protocol):
    def __aiter__(self) -> AsyncIterator[StompMessage]: ...


class Subscriber(Protocol):
    """Opens a STOMP subscription: ``esi.client.subscriber.subscribe``, or a fake in tests."""

    def __call__(
        self,
        url: str,
        destinations: Sequence[str],
        *,
        token: str | None = ...,
        namespace: str | None = ...,
        view: str | None = ...,
        connect_timeout: float = ...,
    ) -> AbstractContextManager[Subscription]: ...


class AsyncSubscriber(Protocol):
    def __call__(
        self,
        url: str,
        destinations: Sequence[str],
        *,
        token: str | None = ...,
        namespace: str | None = ...,
        view: str | None = ...,
        connect_timeout: float = ...,
    ) -> AbstractAsyncContextManager[AsyncSubscription]: ...


# esi.client.subscriber is imported on first use: REST-only users never load the WebSocket stack.
def _default_subscriber() -> Subscriber:
    from esi.client import subscriber  # noqa: PLC0415

    return subscriber.subscribe


def _default_async_subscriber() -> AsyncSubscriber:
    from esi.client import subscriber  # noqa: PLC0415

    return subscriber.asubscribe


def _stomp_errors() -> tuple[type[Exception], ...]:
    """How a subscription fails: ``StompError`` from esi's STOMP client; OSError from any other subscriber."""
    from esi.client import subscriber  # noqa: PLC0415

    return (subscriber.StompError, OSError)


def _stomp_failure(url: str, err: Exception) -> EsiError:
    # An ERROR frame is esi saying no; anything else is the connection failing.
    if getattr(err, "frame", None) is not None:
        return SubscriptionRefused(f"esi refused the subscription: {err}")
    return EsiConnectionError(url, err)


def _kind_of(destination: str) -> str:
    return destination.removeprefix("/topic/").split("/", 1)[0]


def topic(kind: Kind, name: str | None = None) -> str:
    """The STOMP destination of every object of a kind (names only), or of one object (its whole view)."""
    return f"/topic/{kind}" if name is None else f"/topic/{kind}/{name}"


@dataclass(frozen=True)
class Event(Generic[R]):
    """One STOMP message: what happened (``action``) to the object ``name``.

    ``resource`` is the object's external view on per-object topics (``/topic/schedulings/<name>``), and
    ``None`` on the per-kind topics, which carry only names, and for ``ERROR``.
    """

    destination: str
    action: Action
    name: str
    resource: R | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        """``testbeds``, ``jobs`` or ``schedulings``: which topic the event came on."""
        return _kind_of(self.destination)


def _event(message: StompMessage) -> Event[Any]:
    try:
        payload = ResourceModification.model_validate(message.json())
        model = _MODELS.get(_kind_of(message.destination))
        if isinstance(payload.resource, str):
            return Event(message.destination, payload.action, payload.resource)
        if model is None or payload.action == "ERROR":
            name = payload.resource.get("name", "") if isinstance(payload.resource, dict) else ""
            return Event(message.destination, payload.action, str(name))
        resource = model.model_validate(payload.resource)
    except ValueError as err:
        raise UnexpectedResponse(f"a STOMP message on {message.destination} is not what esi sends: {err}") from err
    return Event(message.destination, payload.action, resource.name, resource)


class Watch(Generic[R]):
    """The events of an open subscription, parsed; iterate, or ``next(timeout)`` for one at a time."""

    def __init__(self, subscription: Subscription, url: str) -> None:
        self._subscription = subscription
        self._url = url

    def __iter__(self) -> Iterator[Event[R]]:
        messages = iter(self._subscription)
        while True:
            try:
                message = next(messages)
            except StopIteration:
                return
            except _stomp_errors() as err:
                raise _stomp_failure(self._url, err) from err
            yield cast(Event[R], _event(message))

    def next(self, timeout: float) -> Event[R] | None:
        """The next event, or ``None`` if none came within ``timeout`` seconds."""
        try:
            message = self._subscription.next(timeout)
        except _stomp_errors() as err:
            raise _stomp_failure(self._url, err) from err
        return None if message is None else cast(Event[R], _event(message))


class AsyncWatch(Generic[R]):
    """The events of an open subscription, parsed, as an async iterator."""

    def __init__(self, subscription: AsyncSubscription, url: str) -> None:
        self._subscription = subscription
        self._url = url

    async def __aiter__(self) -> AsyncIterator[Event[R]]:
        messages = aiter(self._subscription)
        while True:
            try:
                message = await anext(messages)
            except StopAsyncIteration:
                return
            except _stomp_errors() as err:
                raise _stomp_failure(self._url, err) from err
            yield cast(Event[R], _event(message))


def _in(scheduling: ExternalScheduling, states: Sequence[str]) -> bool:
    """Whether the Scheduling is in one of ``states``, named in esi's words (``esiState``) or the original's."""
    return scheduling.esi_state in states or scheduling.state in states


def _reached(event: Event[ExternalScheduling], name: str, states: Sequence[str]) -> ExternalScheduling | None:
    """The Scheduling if ``event`` shows it in one of ``states``; raises if it was deleted."""
    if event.action == "DELETED":
        raise ResourceDeleted("schedulings", name)
    if event.resource is not None and _in(event.resource, states):
        return event.resource
    return None


# ---------------------------------------------------------------------------------------------- clients


class _Base:
    def __init__(self, url: str, token: str | None, namespace: str | None, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.namespace = namespace
        self.timeout = timeout
        self._token = token

    def _subscription_options(self) -> dict[str, Any]:
        return {
            "token": self._token,
            "namespace": self.namespace,
            "view": View.ESI.value,
            "connect_timeout": self.timeout,
        }


class EsiClient(_Base):
    """A blocking client of the esi API at ``url``; use it as a context manager, or ``close()`` it.

    ``transport`` and ``subscriber`` replace the network (``httpx.MockTransport``, a fake STOMP
    subscription) in tests; ``namespace`` is the server's default namespace when ``None``.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        namespace: str | None = None,
        timeout: float = 10,
        transport: httpx.BaseTransport | None = None,
        subscriber: Subscriber | None = None,
    ) -> None:
        super().__init__(url, token, namespace, timeout)
        self._http = httpx.Client(base_url=self.url, headers=_headers(token), timeout=timeout, transport=transport)
        self._subscriber = subscriber

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: _Call[T]) -> T:
        try:
            response = self._http.request(call.method, call.path, params=_params(call, self.namespace), json=call.body)
        except httpx.TransportError as err:
            raise EsiConnectionError(self.url, err) from err
        return _read(response, call.read)

    def ready(self) -> bool:
        """Whether the API answers ``/readyz`` with success (it needs no token); unreachable is not ready."""
        try:
            return self._send(_Call("GET", "/readyz", _ready, namespaced=False, viewed=False))
        except (ApiStatusError, EsiConnectionError):
            return False

    def overview(self) -> Overview:
        return self._send(_Call("GET", _external("overview"), _OVERVIEW, viewed=False))

    def testbeds(self) -> list[ExternalTestbed]:
        return self._send(_Call("GET", _external("testbeds"), _TESTBEDS))

    def testbed(self, name: str) -> ExternalTestbed:
        return self._send(_Call("GET", _external("testbeds", name), _TESTBED))

    def label_nodes(self, testbed: str, count: int, *, dry_run: bool = False) -> TestbedNodes:
        """Set the Testbed up on the ``count`` nodes with the most room: label them, and only them, with its node
        label (``dry_run``: only say which). ``Conflict`` when too few fit, naming each node's problem."""
        return self._send(_label_nodes_call(testbed, count, dry_run))

    def jobs(self) -> dict[str, ExternalBatchJob]:
        """Every BatchJob, by name."""
        return self._send(_Call("GET", _external("jobs"), _JOBS))

    def job(self, name: str) -> ExternalBatchJob:
        return self._send(_Call("GET", _external("jobs", name), _JOB))

    def set_external_scheduler(self, name: str, data: Mapping[str, Sequence[Mapping[str, str]]]) -> ExternalBatchJob:
        """Replace the job's ``externalScheduler`` data wholesale (keys left out are gone afterwards)."""
        body = _external_scheduler_body(name, data)
        return self._send(_Call("PUT", _external("jobs"), _JOB, body=body))

    def schedulings(self) -> list[ExternalScheduling]:
        return self._send(_Call("GET", _external("schedulings"), _SCHEDULINGS))

    def scheduling(self, name: str) -> ExternalScheduling:
        return self._send(_Call("GET", _external("schedulings", name), _SCHEDULING))

    def run_pages(self, runs: RunFilter = RunFilter(), *, page_size: int = RUN_PAGE_SIZE) -> Iterator[RunPage]:
        """The run table of the namespace, a page at a time (at most ``page_size`` runs each), until the last."""
        token: str | None = None
        while True:
            page = self._send(_runs_call(runs, token, page_size, "json", _RUN_PAGE))
            yield page
            if (token := page.continue_) is None:
                return

    def runs(self, runs: RunFilter = RunFilter(), *, page_size: int = RUN_PAGE_SIZE) -> Iterator[RunEntry]:
        """Every run of the namespace that ``runs`` selects, in order of start (``RunEntry``: docs/how-to/
        runs-as-data.md), read a page at a time as the iteration goes."""
        for page in self.run_pages(runs, page_size=page_size):
            yield from page.items

    def run_records(
        self, runs: RunFilter = RunFilter(), *, page_size: int = RUN_PAGE_SIZE
    ) -> Iterator[list[dict[str, Any]]]:
        """The same runs a page at a time as the JSON the API sent (``RunEntry``'s fields, camelCase), not
        validated into models: the fast way to 100,000 of them (the CLI's ``-o json`` and ``-o parquet``)."""
        token: str | None = None
        while True:
            records, token = self._send(_runs_call(runs, token, page_size, "json", _record_page))
            yield records
            if token is None:
                return

    def runs_csv(self, runs: RunFilter = RunFilter(), *, page_size: int = RUN_PAGE_SIZE) -> Iterator[bytes]:
        """The same runs as CSV, as the API writes it: the header line and the first page's lines, then each
        further page's lines (without the header) — bytes to write out as they come, nothing parsed."""
        token: str | None = None
        first = True
        while True:
            text, token = self._send(_runs_call(runs, token, page_size, "csv", _csv_page))
            yield text if first else text.partition(b"\n")[2]
            first = False
            if token is None:
                return

    def submit(self, scheduling: SchedulingSubmission | ExternalScheduling) -> Submitted:
        """Create the Scheduling, or replace the spec of the one with its name (jobs appended start too); a
        Scheduling read from esi may be submitted again as it is."""
        return self._send(_submit_call(scheduling, self.namespace))

    def submit_queue(self, name: str, testbed: str, jobs: Sequence[str]) -> Submitted:
        """Submit a queue: jobs in order onto free slots; a name given k times runs with k executors."""
        return self.submit(_queue(name, testbed, jobs))

    def submit_slots(
        self, name: str, testbed: str, jobs: Mapping[str, Sequence[int]], strict: bool = True
    ) -> Submitted:
        """Submit explicit slot ids per job; ``strict``: in order, no job overtakes an earlier one."""
        return self.submit(_slots(name, testbed, jobs, strict))

    def delete_scheduling(self, name: str) -> ExternalScheduling:
        """Delete the Scheduling (its Testbed and jobs are released); returns it as it was."""
        return self._send(_Call("DELETE", _external("schedulings", name), _SCHEDULING))

    def wait_for_scheduling(
        self, name: str, states: Sequence[str] = (SchedulingState.COMPLETED,), timeout: float = DEFAULT_WAIT
    ) -> ExternalScheduling:
        """Block until the Scheduling is in one of ``states``; return it as it then is.

        ``states`` are esi's names (``Pending``, ``Running``, ``Completed``, ``Failed``: ``esi_state``, as
        kubectl shows them) or the original's (``state``: ``CompletedState`` …), which its schedulers wait for.
        Raises ``ResourceDeleted`` if it is deleted meanwhile and ``WaitTimeout`` after ``timeout`` seconds.
        Add ``"Failed"`` to ``states`` to stop waiting on a Scheduling that cannot proceed.
        """
        deadline = time.monotonic() + timeout
        last: str | None = None
        # Subscribe before reading, so a change between the read and the subscription is not missed.
        with self.watch("schedulings", name) as events:
            current = self.scheduling(name)
            if _in(current, states):
                return current
            last = current.esi_state
            while (remaining := deadline - time.monotonic()) > 0:
                event = events.next(remaining)
                if event is None:
                    break
                if (reached := _reached(event, name, states)) is not None:
                    return reached
                last = event.resource.esi_state if event.resource is not None else last
        raise WaitTimeout(name, states, timeout, last)

    @contextmanager
    def subscribe(self, *destinations: str) -> Iterator[Watch[Resource]]:
        """Subscribe to STOMP destinations (see ``topic``) for as long as the ``with`` block runs."""
        subscriber = self._subscriber or _default_subscriber()
        with ExitStack() as stack:
            try:
                subscription = stack.enter_context(
                    subscriber(self.url, list(destinations), **self._subscription_options())
                )
            except _stomp_errors() as err:
                raise _stomp_failure(self.url, err) from err
            yield Watch(subscription, self.url)

    @overload
    def watch(
        self, kind: Literal["testbeds"], name: str | None = None
    ) -> AbstractContextManager[Watch[ExternalTestbed]]: ...
    @overload
    def watch(
        self, kind: Literal["jobs"], name: str | None = None
    ) -> AbstractContextManager[Watch[ExternalBatchJob]]: ...
    @overload
    def watch(
        self, kind: Literal["schedulings"], name: str | None = None
    ) -> AbstractContextManager[Watch[ExternalScheduling]]: ...
    def watch(self, kind: Kind, name: str | None = None) -> AbstractContextManager[Watch[Any]]:
        """Changes of every object of ``kind`` (events carry names), or of the one named (events carry views)."""
        return self.subscribe(topic(kind, name))


class AsyncEsiClient(_Base):
    """``EsiClient`` for asyncio: the same methods, awaited; ``async with`` it, or ``await aclose()``."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        namespace: str | None = None,
        timeout: float = 10,
        transport: httpx.AsyncBaseTransport | None = None,
        subscriber: AsyncSubscriber | None = None,
    ) -> None:
        super().__init__(url, token, namespace, timeout)
        self._http = httpx.AsyncClient(base_url=self.url, headers=_headers(token), timeout=timeout, transport=transport)
        self._subscriber = subscriber

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _Call[T]) -> T:
        try:
            response = await self._http.request(
                call.method, call.path, params=_params(call, self.namespace), json=call.body
            )
        except httpx.TransportError as err:
            raise EsiConnectionError(self.url, err) from err
        return _read(response, call.read)

    async def ready(self) -> bool:
        try:
            return await self._send(_Call("GET", "/readyz", _ready, namespaced=False, viewed=False))
        except (ApiStatusError, EsiConnectionError):
            return False

    async def overview(self) -> Overview:
        return await self._send(_Call("GET", _external("overview"), _OVERVIEW, viewed=False))

    async def testbeds(self) -> list[ExternalTestbed]:
        return await self._send(_Call("GET", _external("testbeds"), _TESTBEDS))

    async def testbed(self, name: str) -> ExternalTestbed:
        return await self._send(_Call("GET", _external("testbeds", name), _TESTBED))

    async def label_nodes(self, testbed: str, count: int, *, dry_run: bool = False) -> TestbedNodes:
        return await self._send(_label_nodes_call(testbed, count, dry_run))

    async def jobs(self) -> dict[str, ExternalBatchJob]:
        return await self._send(_Call("GET", _external("jobs"), _JOBS))

    async def job(self, name: str) -> ExternalBatchJob:
        return await self._send(_Call("GET", _external("jobs", name), _JOB))

    async def set_external_scheduler(
        self, name: str, data: Mapping[str, Sequence[Mapping[str, str]]]
    ) -> ExternalBatchJob:
        body = _external_scheduler_body(name, data)
        return await self._send(_Call("PUT", _external("jobs"), _JOB, body=body))

    async def schedulings(self) -> list[ExternalScheduling]:
        return await self._send(_Call("GET", _external("schedulings"), _SCHEDULINGS))

    async def scheduling(self, name: str) -> ExternalScheduling:
        return await self._send(_Call("GET", _external("schedulings", name), _SCHEDULING))

    async def run_pages(
        self, runs: RunFilter = RunFilter(), *, page_size: int = RUN_PAGE_SIZE
    ) -> AsyncIterator[RunPage]:
        token: str | None = None
        while True:
            page = await self._send(_runs_call(runs, token, page_size, "json", _RUN_PAGE))
            yield page
            if (token := page.continue_) is None:
                return

    async def runs(self, runs: RunFilter = RunFilter(), *, page_size: int = RUN_PAGE_SIZE) -> AsyncIterator[RunEntry]:
        async for page in self.run_pages(runs, page_size=page_size):
            for entry in page.items:
                yield entry

    async def submit(self, scheduling: SchedulingSubmission | ExternalScheduling) -> Submitted:
        return await self._send(_submit_call(scheduling, self.namespace))

    async def submit_queue(self, name: str, testbed: str, jobs: Sequence[str]) -> Submitted:
        return await self.submit(_queue(name, testbed, jobs))

    async def submit_slots(
        self, name: str, testbed: str, jobs: Mapping[str, Sequence[int]], strict: bool = True
    ) -> Submitted:
        return await self.submit(_slots(name, testbed, jobs, strict))

    async def delete_scheduling(self, name: str) -> ExternalScheduling:
        return await self._send(_Call("DELETE", _external("schedulings", name), _SCHEDULING))

    async def wait_for_scheduling(
        self, name: str, states: Sequence[str] = (SchedulingState.COMPLETED,), timeout: float = DEFAULT_WAIT
    ) -> ExternalScheduling:
        last: str | None = None
        try:
            async with asyncio.timeout(timeout), self.watch("schedulings", name) as events:
                current = await self.scheduling(name)
                if _in(current, states):
                    return current
                last = current.esi_state
                async for event in events:
                    if (reached := _reached(event, name, states)) is not None:
                        return reached
                    last = event.resource.esi_state if event.resource is not None else last
                raise EsiConnectionError(self.url, "the server closed the STOMP connection")
        except TimeoutError as err:
            raise WaitTimeout(name, states, timeout, last) from err

    @asynccontextmanager
    async def subscribe(self, *destinations: str) -> AsyncIterator[AsyncWatch[Resource]]:
        subscriber = self._subscriber or _default_async_subscriber()
        async with AsyncExitStack() as stack:
            try:
                subscription = await stack.enter_async_context(
                    subscriber(self.url, list(destinations), **self._subscription_options())
                )
            except _stomp_errors() as err:
                raise _stomp_failure(self.url, err) from err
            yield AsyncWatch(subscription, self.url)

    @overload
    def watch(
        self, kind: Literal["testbeds"], name: str | None = None
    ) -> AbstractAsyncContextManager[AsyncWatch[ExternalTestbed]]: ...
    @overload
    def watch(
        self, kind: Literal["jobs"], name: str | None = None
    ) -> AbstractAsyncContextManager[AsyncWatch[ExternalBatchJob]]: ...
    @overload
    def watch(
        self, kind: Literal["schedulings"], name: str | None = None
    ) -> AbstractAsyncContextManager[AsyncWatch[ExternalScheduling]]: ...
    def watch(self, kind: Kind, name: str | None = None) -> AbstractAsyncContextManager[AsyncWatch[Any]]:
        return self.subscribe(topic(kind, name))
