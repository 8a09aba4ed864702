"""``GET /external/testbeds`` and ``GET /external/testbeds/{name}``: Testbeds and their slots, read-only
(the Testbed reconciler alone writes their status); ``POST /external/testbeds/{name}/nodes``: label the N nodes
with the most room for a Testbed (``esi.decisions.node_choice`` chooses them)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Any, Final, TypeVar

from fastapi import APIRouter, Path, Response
from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.types import PatchType
from pydantic import TypeAdapter

from api.dependencies import AskedView, Cache, CheckedFirst, Kube, Namespace, may, may_cluster_wide
from api.problems import Problem, not_found, refusals
from api.routes.answers import listing, one
from esi.decisions.node_choice import NodeRefusal, choose_nodes
from esi.decisions.testbed_lifecycle import Resources
from esi.objects.ghosts import node_facts, other_requests
from esi.resources.meta import MAX_NAME_LENGTH, NAME_PATTERN
from esi.resources.quantity import Quantity
from esi.wire.rest import (
    ExternalTestbed,
    FieldProblem,
    OriginalTestbed,
    TestbedNodes,
    TestbedNodesRequest,
    View,
    external_testbed,
    testbed_nodes,
)
from kube.errors import Refusal, refusal
from kube.resources import NodeObjects, PodObjects, plain

__all__ = ["router"]

T = TypeVar("T")
_NOTHING: Final = Resources(Quantity(0), Quantity(0))

router = APIRouter(prefix="/external", tags=["external scheduler API"], route_class=CheckedFirst)

_TESTBEDS: Final[dict[View, TypeAdapter[Any]]] = {
    View.ORIGINAL: TypeAdapter(list[OriginalTestbed]),
    View.ESI: TypeAdapter(list[ExternalTestbed]),
}


@router.get(
    "/testbeds",
    summary="All Testbeds",
    response_model=list[OriginalTestbed] | list[ExternalTestbed],
    dependencies=[may("list", "testbeds")],
    responses=refusals(),
)
async def list_testbeds(cache: Cache, namespace: Namespace, view: AskedView) -> Response:
    def render() -> bytes:
        return bytes(_TESTBEDS[view].dump_json([external_testbed(t) for t in cache.testbeds.in_namespace(namespace)]))

    return listing(cache, ("testbeds", namespace, view), render)


@router.get(
    "/testbeds/{name}",
    summary="One Testbed",
    response_model=OriginalTestbed | ExternalTestbed,
    dependencies=[may("get", "testbeds")],
    responses=refusals(404),
)
async def get_testbed(name: str, cache: Cache, namespace: Namespace, view: AskedView) -> Response:
    testbed = cache.testbeds.get(namespace, name)
    if testbed is None:
        raise not_found("Testbed", name, namespace)
    return one(external_testbed(testbed), view)


@router.post(
    "/testbeds/{name}/nodes",
    summary="Set a Testbed up on the N nodes with the most room (label them)",
    description=(
        "esi's own route (the original had it as a debug endpoint). Chooses `count` nodes that fit the Testbed — "
        "Ready, not cordoned, no taint it does not tolerate, no other Testbed's node label, room for `slotsPerNode` "
        "slots of `resourcesPerSlot` beside the other pods' requests — those with the most room first (counted in "
        "slots; ties by name), and labels them with the Testbed's node label: nodes that carry it keep their id, "
        "new ones get the smallest free ids, and its nodes not chosen lose the label. With `dryRun` nothing is "
        "labelled. 409 naming each node's problem when too few fit, or when a node that would lose the label holds "
        "a Reserved or Occupied slot of the Testbed; nothing is changed then. The caller needs `get` on the "
        "Testbed and `patch` on nodes (cluster-wide); esi's own ServiceAccount needs `list` and `patch` on nodes."
    ),
    response_model=TestbedNodes,
    dependencies=[may("get", "testbeds"), may_cluster_wide("patch", "nodes", group="")],
    responses=refusals(404, 409),
)
async def set_up_nodes(
    name: Annotated[str, Path(max_length=MAX_NAME_LENGTH, pattern=NAME_PATTERN)],
    request: TestbedNodesRequest,
    cache: Cache,
    kube: Kube,
    namespace: Namespace,
) -> TestbedNodes:
    testbed = cache.testbeds.get(namespace, name)
    if testbed is None:
        raise not_found("Testbed", name, namespace)
    nodes = await _as_esi("list nodes", _nodes(kube))
    requested = other_requests(await _as_esi("list pods", _pods(kube)), namespace, name)
    others = [t for t in cache.testbeds.everything() if (t.metadata.namespace, t.metadata.name) != (namespace, name)]
    facts = [node_facts(node, requested.get(node["metadata"]["name"], _NOTHING)) for node in nodes]
    choice = choose_nodes(testbed, request.count, facts, others)
    if isinstance(choice, NodeRefusal):
        raise Problem(
            409, choice.message, [FieldProblem(field=f"node/{n}", problem=p) for n, p in choice.nodes.items()]
        )
    if not request.dry_run:
        # Removed before set: a new node may get the id a leaving one had.
        label = testbed.spec.node_label
        writes = [(node, None) for node in choice.remove_labels] + list(choice.set_labels.items())
        for node, value in writes:
            patch = {"metadata": {"labels": {label: value}}}
            await _as_esi("patch nodes", kube.patch(NodeObjects, node, patch, patch_type=PatchType.MERGE))
    return testbed_nodes(testbed, choice, dry_run=request.dry_run)


async def _nodes(kube: AsyncClient) -> list[dict[str, Any]]:
    return [plain(node) async for node in kube.list(NodeObjects)]


async def _pods(kube: AsyncClient) -> list[dict[str, Any]]:
    """Every pod of the cluster: a one-off read, for a command that is rarely run."""
    return [plain(pod) async for pod in kube.list(PodObjects, namespace="*")]


async def _as_esi(what: str, call: Awaitable[T]) -> T:
    """``call``'s result; the API server refusing esi itself is a 502 that says which permission it lacks."""
    try:
        return await call
    except KubeApiError as err:
        if refusal(err) is not Refusal.FORBIDDEN:
            raise
        raise Problem(
            502,
            f"esi's API may not {what}: its ServiceAccount needs list and patch on nodes and list on pods "
            f"(docs/how-to/install-on-a-cluster.md#labelling-nodes)",
        ) from err
