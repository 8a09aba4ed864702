"""The Manual Scheduler (``/ui/``) in headless Chromium, against the whole local stack.

A researcher signs in, sees the Testbed's slots laid out per node, builds a slot Scheduling in the builder,
watches it run — the page follows it over STOMP, without a reload — sees a refused Scheduling's reasons,
and deletes the Scheduling. The page's activity log is the record of what the page was told and drew;
the test reads it rather than racing the simulated run for a glimpse of the slot states. The Gantt view of
a Testbed's runs is read through its Vega view (``window.esiGantt.view``) and its SVG marks.

The page is served by the session's ``python -m api``, with the session's reconcilers, extender, second
scheduler and simulated Spark operator behind it. Chromium is Debian's (``python -m infra.toolchain.browser ensure``),
driven by Playwright.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod
from playwright.sync_api import ConsoleMessage, Locator, Page, expect, sync_playwright

from infra.local_cluster import LocalCluster
from infra.stacks import processes
from infra.toolchain import browser
from tests.integration.conftest import AddNodes, EsiApi
from tests.integration.esi_objects import new_testbed_on_nodes, spark_job
from tests.integration.kube import create_in, create_testbed, get, pod, running_on, status, wait_for
from tests.manifests import scheduling_manifest

# The simulator runs a job the co-location table knows for its measured time times the session's time scale:
# batchjob-sample3 for 4.4 s, long enough for its executors to be seen in their slots.
JOB = "batchjob-sample3"
OTHER_JOB = "spark-crawler"
FLAKY = "flaky"  # its first run fails (the simulator's failAttempts), its second succeeds
SLOW = 120_000  # ms: whole runs on a loaded 2-core machine
QUICK = 30_000  # ms: the page reacting to what is already there
# ESI_UI_SCREENSHOTS=DIR: the tests save the pictures of the docs into DIR (docs/images): ui.png, the page with
# its slots in use, and ui-gantt.png, the Gantt view of a Testbed's runs, one of them failed and retried.
DOCS_SCREENSHOTS = Path(os.environ["ESI_UI_SCREENSHOTS"]) if os.environ.get("ESI_UI_SCREENSHOTS") else None
# Chromium logs every refused request to the console; the test provokes one (the invalid Scheduling).
PROVOKED = re.compile(r"^Failed to load resource: the server responded with a status of 422\b")


@dataclass
class Browser:
    """A page of a fresh Chromium profile, and what the page's console said."""

    page: Page
    console_errors: list[str] = field(default_factory=list)

    def note(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)


@pytest.fixture
def ui_url(esi_endpoint: EsiApi) -> str:
    """The session's API, which serves the UI."""
    wait_for(
        "the API's caches", lambda: httpx.get(f"{esi_endpoint.url}{processes.API.readiness}").status_code == 200 or None
    )
    return esi_endpoint.url


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Browser]:
    if not browser.CHROMIUM.exists():
        pytest.fail(f"{browser.CHROMIUM} is missing: run `python -m infra.toolchain.browser ensure` (make test does)")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tmp_path / "chromium-profile",
            executable_path=browser.CHROMIUM,
            headless=True,
            args=list(browser.LAUNCH_ARGS),
            viewport={"width": 1440, "height": 1100},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            session = Browser(page)
            page.on("console", session.note)
            page.on("pageerror", lambda error: session.console_errors.append(f"uncaught: {error}"))
            yield session
        finally:
            context.close()


@contextlib.contextmanager
def screenshot_on_failure(page: Page, directory: Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        path = directory / "failure.png"
        with contextlib.suppress(Exception):  # the report is about the first failure, not the screenshot
            page.screenshot(path=path, full_page=True)
            print(f"screenshot of the page at the failure: {path}")
        raise


def slot_changes(page: Page) -> list[dict[str, Any]]:
    """The slot state changes the page has drawn, oldest first (from its activity log)."""
    entries: list[dict[str, Any]] = page.locator("[data-testid=activity-entry][data-kind=slot]").evaluate_all(
        "entries => entries.map(e => ({...e.dataset})).reverse()"
    )
    return entries


def columns(cells: Locator) -> list[list[str]]:
    """Which slot ids are drawn in which column, each top to bottom, columns left to right: the layout as a
    person sees it, judged by where the cells are drawn rather than by the DOM's nesting."""
    drawn = cells.evaluate_all(
        """cells => cells.map(c => { const r = c.getBoundingClientRect();
                                     return {id: c.dataset.slot ?? c.textContent, x: r.left, y: r.top}; })"""
    )
    by_x: dict[int, list[tuple[float, str]]] = {}
    for c in drawn:
        by_x.setdefault(round(c["x"]), []).append((c["y"], str(c["id"])))
    return [[slot for _, slot in sorted(by_x[x])] for x in sorted(by_x)]


def sign_in(page: Page, url: str, token: str) -> None:
    page.goto(url)
    page.get_by_test_id("login-token").fill(token)
    page.get_by_test_id("login-submit").click()
    expect(page.get_by_test_id("connection-status")).to_have_attribute("data-state", "connected", timeout=QUICK)


def preview(page: Page) -> Any:
    """The request body the builder would send."""
    return json.loads(page.get_by_test_id("builder-preview").text_content() or "")


def add_jobs(page: Page, *jobs: str) -> None:
    for job in jobs:
        page.get_by_test_id("builder-job").select_option(job)
        page.get_by_test_id("builder-add-job").click()


def build_slot_scheduling(page: Page) -> None:
    """Queue mode first (jobs added, reordered, removed), then slots 0 and 1 for JOB, strictly."""
    expect(page.get_by_test_id("builder-job").locator(f"option[value={OTHER_JOB}]")).to_have_count(1)
    page.get_by_test_id("builder-name").fill("pinned")
    page.get_by_test_id("builder-testbed").select_option("tb")
    add_jobs(page, JOB, OTHER_JOB, JOB)
    page.get_by_test_id("builder-up-1").click()
    page.get_by_test_id("builder-remove-2").click()
    assert preview(page) == {"name": "pinned", "testBed": "tb", "queue": [OTHER_JOB, JOB]}
    page.get_by_test_id("builder-remove-0").click()

    page.get_by_test_id("builder-mode-slots").check()
    # The grid is laid out as the Testbed is: a column per node, so 0 and 1 are one slot on each node.
    assert columns(page.get_by_test_id("builder-grid-0").locator("button")) == [["0", "2"], ["1", "3"]]
    page.get_by_test_id("builder-slot-0-0").click()
    page.get_by_test_id("builder-slot-0-1").click()
    expect(page.get_by_test_id("builder-slot-0-1")).to_have_attribute("aria-pressed", "true")
    page.get_by_test_id("builder-strict").check()
    assert preview(page) == {
        "name": "pinned",
        "testBed": "tb",
        "slots": {"mode": "STRICT", "jobs": [{"name": JOB, "slots": [0, 1]}]},
    }


def check_slots_were_used_as_built(page: Page) -> None:
    """From the activity log: slots 0 and 1 went into use by JOB (an executor pod in each) and were freed;
    slots 2 and 3 never changed."""
    changes = slot_changes(page)
    for slot in ("0", "1"):
        seen = [c for c in changes if c["slot"] == slot]
        assert {"Reserved", "Occupied"} & {c["to"] for c in seen}, f"slot {slot} never drawn in use: {changes}"
        assert all(c["job"] == JOB for c in seen if c["to"] != "Free"), changes
        assert any(c["to"] == "Occupied" and c.get("pod") for c in seen), f"no executor in slot {slot}: {changes}"
        assert seen[-1]["to"] == "Free", changes
    assert not [c for c in changes if c["slot"] in ("2", "3")], f"slots not chosen were used: {changes}"


def check_run_history(page: Page) -> None:
    """The run in the job's history: for this Scheduling, on the chosen slots, successful."""
    page.get_by_test_id(f"job-toggle-{JOB}").click()
    run = page.get_by_test_id(f"job-history-{JOB}").get_by_test_id("run")
    expect(run).to_have_count(1, timeout=QUICK)
    expect(run).to_contain_text("succeeded", timeout=QUICK)
    expect(run).to_contain_text("pinned")
    expect(run.locator("td").nth(6)).to_have_text("0, 1")


@pytest.fixture
def page_url(ui_url: str, esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes) -> str:
    """The UI of a namespace holding Testbed ``tb`` (2 nodes x 2 slots, Ready) and the jobs JOB and OTHER_JOB."""
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes)
    spark_job(esi_stack, namespace, JOB)
    spark_job(esi_stack, namespace, OTHER_JOB)
    return f"{ui_url}/ui/?namespace={namespace}"


def test_a_researcher_builds_a_slot_scheduling_in_the_ui_and_watches_it_run(
    page_url: str, esi_endpoint: EsiApi, esi_stack: LocalCluster, chromium: Browser, namespace: str, tmp_path: Path
) -> None:
    page = chromium.page
    with screenshot_on_failure(page, tmp_path):
        sign_in(page, page_url, esi_endpoint.token)
        loaded_at = page.evaluate("performance.timeOrigin")

        # The Testbed: two node columns of two free slots, the ids interleaved across the nodes.
        testbed = page.get_by_test_id("testbed-tb")
        free = testbed.locator("[data-testid^='slot-tb-'][data-state=Free]")
        expect(free).to_have_count(4, timeout=QUICK)
        expect(testbed.locator("[data-testid^='node-tb-']")).to_have_count(2)
        expect(page.get_by_test_id("testbed-state-tb")).to_have_text("Ready")
        assert columns(testbed.locator("[data-testid^='slot-tb-']")) == [["0", "2"], ["1", "3"]]

        build_slot_scheduling(page)
        page.screenshot(path=tmp_path / "built.png", full_page=True)
        page.get_by_test_id("builder-submit").click()
        success = page.locator("[data-testid=flash-message][data-kind=success]")
        expect(success).to_contain_text("Scheduling pinned created")
        assert get(esi_stack, namespace, "scheduling", "pinned")["spec"]["slotBased"]["jobs"] == [
            {"name": {"name": JOB}, "slotIds": [0, 1]}
        ]

        # It runs, and the page, told over STOMP, draws the slots filling and emptying.
        occupied = page.locator("[data-testid=activity-entry][data-kind=slot][data-to=Occupied]")
        expect(occupied).not_to_have_count(0, timeout=SLOW)
        page.screenshot(path=tmp_path / "running.png", full_page=True)
        if DOCS_SCREENSHOTS:
            page.screenshot(path=DOCS_SCREENSHOTS / "ui.png")
        expect(page.get_by_test_id("scheduling-state-pinned")).to_have_text("Completed", timeout=SLOW)
        progress = page.get_by_test_id("scheduling-progress-pinned").get_by_test_id("job-status")
        expect(progress).to_have_attribute("data-state", "Completed")
        expect(page.get_by_test_id(f"job-state-{JOB}")).to_have_text("Succeeded", timeout=QUICK)
        expect(free).to_have_count(4, timeout=SLOW)
        check_slots_were_used_as_built(page)
        check_run_history(page)

        # Edit: the Scheduling goes back into the builder as it was submitted (a new submit replaces it).
        page.get_by_test_id("scheduling-edit-pinned").click()
        expect(page.get_by_test_id("builder-name")).to_have_value("pinned")
        expect(page.get_by_test_id("builder-slot-0-0")).to_have_attribute("aria-pressed", "true")
        assert preview(page)["slots"] == {"mode": "STRICT", "jobs": [{"name": JOB, "slots": [0, 1]}]}

        # Refused: slot mode with a job but no slots; the API's reasons are shown, field by field.
        page.get_by_test_id("builder-reset").click()
        page.get_by_test_id("builder-name").fill("no-slots")
        add_jobs(page, JOB)
        page.get_by_test_id("builder-submit").click()
        refusal = page.locator("[data-testid=flash-message][data-kind=error]")
        expect(refusal).to_contain_text("Scheduling no-slots was not accepted")
        expect(refusal.get_by_test_id("flash-problem")).to_have_attribute("data-field", "slots.jobs.0.slots")
        assert get(esi_stack, namespace, "scheduling", "no-slots") == {}
        page.screenshot(path=tmp_path / "refused.png", full_page=True)

        # Delete, confirmed in the browser's dialog: the Scheduling leaves the page once it is gone.
        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_test_id("scheduling-delete-pinned").click()
        expect(page.get_by_test_id("scheduling-pinned")).to_have_count(0, timeout=SLOW)
        assert get(esi_stack, namespace, "scheduling", "pinned") == {}

        assert page.evaluate("performance.timeOrigin") == loaded_at, "the page was reloaded"
        assert [m for m in chromium.console_errors if PROVOKED.match(m)] != [], chromium.console_errors
        assert [m for m in chromium.console_errors if not PROVOKED.match(m)] == []


def test_a_queue_built_in_the_ui_runs_its_jobs_in_order(
    page_url: str, esi_endpoint: EsiApi, esi_stack: LocalCluster, chromium: Browser, namespace: str, tmp_path: Path
) -> None:
    page = chromium.page
    with screenshot_on_failure(page, tmp_path):
        sign_in(page, page_url, esi_endpoint.token)
        expect(page.get_by_test_id("builder-job").locator(f"option[value={OTHER_JOB}]")).to_have_count(1)
        page.get_by_test_id("builder-name").fill("queued")
        page.get_by_test_id("builder-testbed").select_option("tb")
        add_jobs(page, JOB, OTHER_JOB)
        assert preview(page) == {"name": "queued", "testBed": "tb", "queue": [JOB, OTHER_JOB]}
        page.get_by_test_id("builder-submit").click()

        expect(page.locator("[data-testid=flash-message][data-kind=success]")).to_contain_text(
            "Scheduling queued created"
        )
        assert get(esi_stack, namespace, "scheduling", "queued")["spec"]["queueBased"] == [
            {"name": JOB},
            {"name": OTHER_JOB},
        ]
        expect(page.get_by_test_id("scheduling-state-queued")).to_have_text("Completed", timeout=SLOW)
        progress = page.get_by_test_id("scheduling-progress-queued").get_by_test_id("job-status")
        expect(progress).to_have_count(2)
        for status in progress.all():
            expect(status).to_have_attribute("data-state", "Completed")
        # The queue took the free slots in id order: one each (a job listed once runs one executor).
        for job, slots in ((JOB, "0"), (OTHER_JOB, "1")):
            page.get_by_test_id(f"job-toggle-{job}").click()
            run = page.get_by_test_id(f"job-history-{job}").get_by_test_id("run")
            expect(run).to_contain_text("queued", timeout=QUICK)
            expect(run).to_contain_text("succeeded", timeout=QUICK)
            expect(run.locator("td").nth(6)).to_have_text(slots)
        assert chromium.console_errors == []


def test_a_slot_whose_room_other_pods_hold_is_drawn_so_until_they_go(
    ui_url: str,
    esi_endpoint: EsiApi,
    esi_stack: LocalCluster,
    client: Client,
    chromium: Browser,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    tmp_path: Path,
) -> None:
    label = f"esi.test/ui-{unique}"
    (node,) = add_nodes(1, cpu="2", labels={label: "0"})
    client.create(pod("squatter", namespace, cpu="1", node_name=node))
    wait_for("the other pod to run", running_on(client, "squatter", namespace))
    create_testbed(esi_stack, namespace, label)
    page = chromium.page
    with screenshot_on_failure(page, tmp_path):
        sign_in(page, f"{ui_url}/ui/?namespace={namespace}", esi_endpoint.token)

        marker = page.get_by_test_id("slot-no-room-tb-1")
        expect(marker).to_have_text("no room", timeout=QUICK)
        expect(page.get_by_test_id("slot-tb-1")).to_have_attribute(
            "title", re.compile(rf"no room: other pods on node {node} request 1 cpu .*: room for 1 of its 2 slots$")
        )
        expect(page.get_by_test_id("slot-no-room-tb-0")).to_have_text("")
        page.screenshot(path=tmp_path / "no-room.png", full_page=True)

        client.delete(Pod, "squatter", namespace=namespace)

        expect(marker).to_have_text("", timeout=QUICK)
        expect(page.get_by_test_id("slot-tb-1")).to_have_attribute("data-no-room", "")
        assert chromium.console_errors == []


def queue(cluster: LocalCluster, namespace: str, name: str, jobs: list[str]) -> None:
    """Scheduling ``name``, ``jobs`` in order on Testbed ``tb`` (a failed run retried once, after 1 s), run to
    completion."""
    manifest = scheduling_manifest(
        testbed={"name": "tb"}, queueBased=[{"name": j} for j in jobs], retry={"limit": 1, "backoffSeconds": 1}
    )
    create_in(cluster, namespace, manifest | {"metadata": {"name": name}})
    wait_for(
        f"Scheduling {name} to complete",
        lambda: status(cluster, namespace, "scheduling", name).get("state") == "Completed",
        timeout=SLOW / 1000,
    )


def runs_on_slots(cluster: LocalCluster, namespace: str, *jobs: str) -> list[tuple[str, str, int, int, str]]:
    """(job, Scheduling, attempt, slot, outcome) of each run and slot of ``jobs``, as their BatchJobs record
    them, sorted."""
    return sorted(
        (job, run["scheduling"], run["attempt"], slot, run["outcome"].lower())
        for job in jobs
        for run in status(cluster, namespace, "batchjob", job)["runs"]
        for slot in run["slots"]
    )


def gantt_bars(page: Page) -> list[dict[str, Any]]:
    """The bars of the Gantt view, as its Vega view holds them (one per run and slot)."""
    bars: list[dict[str, Any]] = page.evaluate(
        """window.esiGantt.view.data('gantt').filter((d) => d.kind === 'run')
             .map((d) => ({...d.tooltip, slot: d.slot, node: d.node, outcome: d.outcome}))"""
    )
    return bars


def rows_drawn(chart: Locator) -> list[tuple[str, list[int]]]:
    """(node, its slot ids) of each part of the Gantt view, top to bottom, from the ARIA labels of the SVG's
    titles ("Title text 'node-0'") and slot axes ("Y-axis for a discrete scale with 2 values: 0, 2")."""
    labels = chart.locator("svg [aria-roledescription=title], svg [aria-roledescription=axis]").evaluate_all(
        "marks => marks.map(m => m.getAttribute('aria-label'))"
    )
    nodes = [re.fullmatch(r"Title text '(.*)'", label) for label in labels]
    slots = [re.fullmatch(r"Y-axis .* values: (.*)", label) for label in labels]
    return list(
        zip(
            [node[1] for node in nodes if node],
            [[int(s) for s in slot[1].split(", ")] for slot in slots if slot],
            strict=True,
        )
    )


def drawn(bars: list[dict[str, Any]]) -> list[tuple[str, str, int, int, str]]:
    return sorted((b["job"], b["Scheduling"], b["attempt"], b["slot"], b["outcome"]) for b in bars)


def test_the_gantt_view_draws_a_testbeds_runs_per_slot_and_follows_new_ones(
    page_url: str, esi_endpoint: EsiApi, esi_stack: LocalCluster, chromium: Browser, namespace: str, tmp_path: Path
) -> None:
    spark_job(esi_stack, namespace, FLAKY, **{"spark.esi.sim.failAttempts": "1"})
    queue(esi_stack, namespace, "first", [JOB, OTHER_JOB, FLAKY])
    recorded = runs_on_slots(esi_stack, namespace, JOB, OTHER_JOB, FLAKY)
    # The queue took the free slots in id order; the failed run was retried once.
    assert [r for r in recorded if r[0] != FLAKY] == [
        (JOB, "first", 1, 0, "succeeded"),
        (OTHER_JOB, "first", 1, 1, "succeeded"),
    ]
    assert [r[4] for r in recorded if r[0] == FLAKY] == ["failed", "succeeded"], recorded
    page = chromium.page
    with screenshot_on_failure(page, tmp_path):
        sign_in(page, page_url, esi_endpoint.token)
        loaded_at = page.evaluate("performance.timeOrigin")
        expect(page.get_by_test_id("gantt-testbed")).to_have_value("tb", timeout=QUICK)
        chart = page.get_by_test_id("gantt-chart")
        expect(chart).to_have_attribute("data-bars", str(len(recorded)), timeout=QUICK)

        # A bar per run and slot, on the row of the slot it used, under the node that slot is on.
        bars = gantt_bars(page)
        assert drawn(bars) == recorded
        slots = status(esi_stack, namespace, "testbed", "tb")["slots"]
        assert all(bar["node"] == next(s["nodeName"] for s in slots if s["id"] == bar["slot"]) for bar in bars), bars
        # A row per slot, runs or not, under its node, the nodes in the Testbed's order, as the SVG names them.
        by_node = sorted({(s["nodeId"], s["nodeName"]) for s in slots})
        assert rows_drawn(chart) == [
            (node, sorted(s["id"] for s in slots if s["nodeName"] == node)) for _, node in by_node
        ]
        svg_bars = chart.locator("svg [role=graphics-symbol][aria-roledescription=bar]")
        expect(svg_bars).to_have_count(len(recorded))

        # The failed run is marked, and its tooltip says why.
        failed = chart.locator(f"svg [aria-roledescription=bar][aria-label^='{FLAKY} run 1 ']")
        expect(failed).to_have_attribute("stroke", "#b42318")
        failed.hover()
        tooltip = page.locator("#vg-tooltip-element.visible")
        expect(tooltip).to_contain_text("failed")
        reason = next(
            r["reason"] for r in status(esi_stack, namespace, "batchjob", FLAKY)["runs"] if r["outcome"] == "Failed"
        )
        expect(tooltip).to_contain_text(reason[:60])
        page.mouse.move(0, 0)
        expect(tooltip).to_have_count(0)
        for directory in (tmp_path, *([DOCS_SCREENSHOTS] if DOCS_SCREENSHOTS else [])):
            page.get_by_test_id("gantt").screenshot(path=directory / "ui-gantt.png")

        # A later run appears where it ran, without a reload: a new Scheduling runs JOB again, on slot 0.
        esi_stack.kubectl("delete", "-n", namespace, "scheduling", "first", "--wait=true", "--timeout=60s")
        queue(esi_stack, namespace, "second", [JOB])
        expect(chart).to_have_attribute("data-bars", str(len(recorded) + 1), timeout=QUICK)
        page.wait_for_function(
            """window.esiGantt.view.data('gantt').some((d) => d.kind === 'run' && d.tooltip.Scheduling === 'second'
                                                            && d.outcome === 'succeeded')""",
            timeout=QUICK,
        )
        assert drawn(gantt_bars(page)) == sorted([*recorded, (JOB, "second", 1, 0, "succeeded")])
        expect(svg_bars).to_have_count(len(recorded) + 1)
        page.get_by_test_id("gantt").screenshot(path=tmp_path / "ui-gantt-later.png")

        assert page.evaluate("performance.timeOrigin") == loaded_at, "the page was reloaded"
        assert chromium.console_errors == []
