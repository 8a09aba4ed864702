"""The ``esi`` command against a fake API: what a user reads on stdout and stderr, and the exit codes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner, Result

from esi.client.cli import Connector, app
from tests.unit.fake_api import (
    FakeApi,
    FakeStomp,
    message,
    refusal,
    wire_job,
    wire_overview,
    wire_scheduling,
    wire_slot,
    wire_testbed,
)

COMMANDS = ["overview", "testbeds", "jobs", "schedulings", "submit", "delete", "set-external-scheduler", "watch"]
SCHEDULINGS = "/external/schedulings"


def run(
    api: FakeApi | None = None,
    *args: str,
    stomp: FakeStomp | None = None,
    env: Mapping[str, str | None] | None = None,
    stdin: str | None = None,
) -> Result:
    """``esi ARGS`` with the fakes in place of the network, a wide terminal, and none of the caller's ESI_*."""
    connector = Connector(
        transport=api.transport if api is not None else None, subscriber=stomp.subscribe if stomp else None
    )
    clean: dict[str, str | None] = {"ESI_URL": None, "ESI_TOKEN": None, "ESI_NAMESPACE": None, "FORCE_COLOR": None}
    environment = clean | {"COLUMNS": "160", "TTY_COMPATIBLE": "0"} | dict(env or {})
    return CliRunner().invoke(app, list(args), obj=connector, env=environment, input=stdin)


def lines_with(output: str, *needles: str) -> list[str]:
    return [line for line in output.splitlines() if all(n in line for n in needles)]


# ---------------------------------------------------------------------------------------------- help


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_explains_itself(command: str) -> None:
    result = run(None, command, "--help")

    assert result.exit_code == 0, result.output
    assert f"Usage: esi {command}" in result.stdout


def test_the_top_level_help_lists_every_command_and_the_environment_variables() -> None:
    result = run(None, "--help")

    assert result.exit_code == 0
    for command in COMMANDS:
        assert lines_with(result.stdout, f" {command} "), command
    for variable in ("ESI_URL", "ESI_TOKEN", "ESI_NAMESPACE"):
        assert variable in result.stdout


def test_an_unknown_option_is_a_usage_error() -> None:
    assert run(FakeApi(), "testbeds", "--colour").exit_code == 2


# ---------------------------------------------------------------------------------------------- reading


def test_the_slot_grid_has_a_column_per_node_and_shows_the_interleaved_ids_row_by_row() -> None:
    testbed = wire_testbed(nodes=3, per_node=2, state="RUNNING", esiState="InUse", heldBy="s1")
    # The API's map is ordered by node name; node ids decide the columns.
    testbed["slotsByNode"] = {
        "zeta": [wire_slot(0, 0, 0), wire_slot(3, 0, 1)],
        "alpha": [wire_slot(1, 1, 0, "OCCUPIED", "wordcount"), wire_slot(4, 1, 1, "RESERVED", "wordcount")],
        "mid": [wire_slot(2, 2, 0), wire_slot(5, 2, 1)],
    }
    api = FakeApi().answer("GET", "/external/testbeds/tb", body=testbed)

    result = run(api, "testbeds", "tb")

    assert result.exit_code == 0, result.output
    (header,) = lines_with(result.stdout, "zeta", "alpha", "mid")
    assert header.index("zeta (id 0)") < header.index("alpha (id 1)") < header.index("mid (id 2)")
    (first_row,) = lines_with(result.stdout, "#0 ")
    (second_row,) = lines_with(result.stdout, "#3 ")
    assert first_row.index("#0 Free") < first_row.index("#1 Occupied") < first_row.index("#2 Free")
    assert second_row.index("#3 Free") < second_row.index("#4 Reserved") < second_row.index("#5 Free")
    lines = result.stdout.splitlines()
    assert lines.index(first_row) < lines.index(second_row)
    # the job in a slot is shown under the slot's id, in its node's column
    job_line = lines_with(result.stdout, "wordcount")[0]
    assert job_line.index("wordcount") == first_row.index("#1") == header.index("alpha")
    assert "InUse" in result.stdout
    assert not {"RUNNING", "FREE", "OCCUPIED", "RESERVED"} & set(result.stdout.split()), "esi's names, not the wire's"
    assert "held by s1" in result.stdout


def test_a_slot_without_room_is_marked_in_the_grid_and_says_why_below_it() -> None:
    testbed = wire_testbed(state="ERROR", esiState="Degraded")
    why = (
        "other pods on node node-1 request 1 cpu and 64Mi memory of its 2 cpu and 4Gi memory: room for 1 of its 2 slots"
    )
    testbed["slotsByNode"]["node-1"][1]["noRoom"] = why
    api = FakeApi().answer("GET", "/external/testbeds/tb", body=testbed)

    result = run(api, "testbeds", "tb")

    assert result.exit_code == 0, result.output
    (marked,) = lines_with(result.stdout, "no room")[:1]
    assert marked.index("no room") > marked.index("│", marked.index("│") + 1), "in node-1's column"
    assert f"slot 3: no room: {why}" in " ".join(result.stdout.split())


def test_the_testbed_list_counts_slots_by_state() -> None:
    testbed = wire_testbed()
    testbed["slotsByNode"]["node-0"][0]["state"] = "OCCUPIED"
    api = FakeApi().answer("GET", "/external/testbeds", body=[testbed])

    result = run(api, "testbeds")

    (row,) = lines_with(result.stdout, "tb ")
    assert [cell.strip() for cell in row.split("│")[5:8]] == ["3", "0", "1"]


def test_json_output_is_what_the_api_returned_whichever_side_of_the_command_o_is_on() -> None:
    api = FakeApi().answer("GET", "/external/testbeds", body=[wire_testbed("a"), wire_testbed("b")])

    before = run(api, "-o", "json", "testbeds")
    after = run(api, "testbeds", "-o", "json")

    assert before.exit_code == after.exit_code == 0
    assert [t["name"] for t in json.loads(before.stdout)] == ["a", "b"]
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert json.loads(before.stdout)[0]["slotsByNode"]["node-1"][0]["position"] == 1


def test_yaml_output_parses() -> None:
    api = FakeApi().answer("GET", "/external/jobs", body={"wordcount": wire_job()})

    result = run(api, "-o", "yaml", "jobs")

    assert yaml.safe_load(result.stdout)["wordcount"]["state"] == "ReadyState"


@pytest.mark.parametrize("name", ["257e71", "1e3", "0o17", "123", "1.5"])
def test_yaml_output_quotes_a_name_that_a_yaml_1_2_reader_would_take_for_a_number(name: str) -> None:
    # kubectl and Pulumi read YAML 1.2, where a bare 1e3 is a float and 0o17 an int; PyYAML reads YAML 1.1.
    api = FakeApi().answer("GET", "/external/jobs", body={name: wire_job(name)})

    result = run(api, "-o", "yaml", "jobs")

    assert f"'{name}':" in result.stdout, result.stdout
    assert f"name: '{name}'" in result.stdout, result.stdout
    assert yaml.safe_load(result.stdout)[name]["name"] == name


def test_url_token_and_namespace_come_from_the_environment_and_the_command_line_wins() -> None:
    api = FakeApi().answer("GET", "/external/overview", body=wire_overview())
    env = {"ESI_URL": "http://esi.example:9000", "ESI_TOKEN": "secret", "ESI_NAMESPACE": "team"}

    run(api, "overview", env=env)
    from_env = api.last
    run(api, "overview", "-n", "other", env=env)

    assert str(from_env.url) == "http://esi.example:9000/external/overview?namespace=team"
    assert from_env.headers["authorization"] == "Bearer secret"
    assert api.last.url.params["namespace"] == "other"


def test_the_overview_counts_and_lists_each_kind() -> None:
    api = FakeApi().answer("GET", "/external/overview", body=wire_overview())

    result = run(api, "overview")

    assert result.exit_code == 0, result.output
    assert "namespace team: 1 Testbeds (0 in use), 1 BatchJobs, 1 Schedulings (1 unfinished)" in result.stdout
    assert lines_with(result.stdout, "s1", "Pending", "the Testbed")


def test_an_empty_namespace_says_there_is_nothing_instead_of_empty_tables() -> None:
    empty = wire_overview() | {"testbeds": [], "jobs": [], "schedulings": []}
    api = FakeApi().answer("GET", "/external/overview", body=empty)
    api.answer("GET", "/external/testbeds", body=[]).answer("GET", "/external/jobs", body={})
    api.answer("GET", "/external/schedulings", body=[])

    overview = run(api, "overview")
    lists = [run(api, kind) for kind in ("testbeds", "jobs", "schedulings")]

    assert overview.exit_code == 0, overview.output
    assert overview.stdout.splitlines()[1:] == ["no Testbeds", "no BatchJobs", "no Schedulings"]
    assert [r.stdout for r in lists] == ["no Testbeds\n", "no BatchJobs\n", "no Schedulings\n"]


def test_a_jobs_history_shows_each_run() -> None:
    run_record = {"start": "2026-01-01T10:00:00Z", "stop": "2026-01-01T10:02:05Z", "successful": False,
                  "scheduling": {"name": "s1", "namespace": "team"}, "attempt": 2, "slots": [0, 2],
                  "nodes": ["node-0"], "colocatedJobs": ["pagerank"]}  # fmt: skip
    job = wire_job(scheduledEvents=[run_record], externalScheduler={"profiler": [{"pagerank": "63 (2)"}]})
    api = FakeApi().answer("GET", "/external/jobs/wordcount", body=job)

    result = run(api, "jobs", "wordcount")

    assert result.exit_code == 0, result.output
    (row,) = lines_with(result.stdout, "2026-01-01 10:00:00")
    for shown in ("2026-01-01 10:02:05", "2m 05s", "failed", "s1", "0, 2", "node-0", "pagerank"):
        assert shown in row
    assert lines_with(result.stdout, "profiler", "pagerank: 63 (2)")


def test_piped_with_no_columns_given_a_table_keeps_every_cell_whole() -> None:
    run_record = {"start": "2026-01-01T10:00:00Z", "stop": "2026-01-01T10:02:05Z", "successful": True,
                  "scheduling": {"name": "a-scheduling-with-a-long-name", "namespace": "team"}, "attempt": 1,
                  "slots": [0, 1, 2, 3], "nodes": ["a-node-with-a-long-name-0", "a-node-with-a-long-name-1"],
                  "colocatedJobs": ["pagerank", "wordcount-the-second"]}  # fmt: skip
    api = FakeApi().answer("GET", "/external/jobs/wordcount", body=wire_job(scheduledEvents=[run_record]))

    piped = run(api, "jobs", "wordcount", env={"COLUMNS": None})
    narrow = run(api, "jobs", "wordcount", env={"COLUMNS": "80"})

    assert piped.exit_code == 0, piped.output
    (row,) = lines_with(piped.stdout, "2026-01-01 10:00:00")
    for shown in ("2026-01-01 10:02:05", "a-scheduling-with-a-long-name", "0, 1, 2, 3", "a-node-with-a-long-name-1",
                  "wordcount-the-second"):  # fmt: skip
        assert shown in row
    assert "…" not in piped.stdout
    assert "…" in narrow.stdout, "COLUMNS is the width asked for"


def test_a_job_says_what_holds_it_up_and_a_record_that_lacks_its_nodes_says_unknown() -> None:
    run_record = {"start": "2026-01-01T10:00:00Z", "stop": "2026-01-01T10:02:05Z", "successful": True,
                  "scheduling": {"name": "s1", "namespace": "team"}, "attempt": 1, "slots": [3], "nodes": [],
                  "colocatedJobs": [], "incomplete": "nodes unknown: ..."}  # fmt: skip
    held_up = "executor wordcount-exec-1 unschedulable: 0/3 nodes are available: 3 node(s) were unschedulable."
    job = wire_job(scheduledEvents=[run_record], waitingFor=held_up)
    api = FakeApi().answer("GET", "/external/jobs/wordcount", body=job)

    result = run(api, "jobs", "wordcount")

    assert result.exit_code == 0, result.output
    assert "waiting for: executor wordcount-exec-1 unschedulable" in " ".join(result.stdout.split())
    (row,) = lines_with(result.stdout, "2026-01-01 10:00:00")
    assert row.count("unknown") == 2, row


def test_a_schedulings_jobs_show_their_state_and_what_they_get() -> None:
    scheduling = wire_scheduling(
        state="SubmissionState",
        esiState="Running",
        queue=["wordcount", "pagerank", "wordcount"],
        jobStatus=[{"name": "wordcount", "state": "Scheduled"}],
        waitingFor="slots for pagerank",
    )
    api = FakeApi().answer("GET", f"{SCHEDULINGS}/s1", body=scheduling)

    result = run(api, "schedulings", "s1")

    assert lines_with(result.stdout, "Scheduling s1 in team: Running on Testbed tb")
    assert lines_with(result.stdout, "wordcount", "Running", "2 executor(s)")
    assert lines_with(result.stdout, "pagerank", "-", "1 executor(s)")
    assert "waiting for: slots for pagerank" in result.stdout
    assert "deadlocked" not in result.stdout


def test_a_scheduling_and_a_job_tell_of_a_cycle_of_waits_and_a_stall() -> None:
    def condition(type_: str, status: str, message: str) -> dict[str, str]:
        return {"type": type_, "status": status, "reason": "Why", "message": message,
                "lastTransitionTime": "2026-01-01T10:00:00Z"}  # fmt: skip

    cycle = "schedulings s1 -> s2 -> s1 wait on each other (...); s1 joined the cycle last and lets go of job x"
    scheduling = wire_scheduling(conditions=[condition("Stalled", "False", ""), condition("Deadlocked", "True", cycle)])
    stalled = wire_job(conditions=[condition("Stalled", "True", "not running 5 min after submission: ...")])
    api = FakeApi().answer("GET", f"{SCHEDULINGS}/s1", body=scheduling)
    api.answer("GET", "/external/jobs/wordcount", body=stalled)

    told = " ".join(run(api, "schedulings", "s1").stdout.split())
    job = " ".join(run(api, "jobs", "wordcount").stdout.split())

    assert f"deadlocked: {cycle}" in told
    assert "stalled" not in told
    assert "stalled: not running 5 min after submission: ..." in job


# ---------------------------------------------------------------------------------------------- submitting

MANIFEST = """\
apiVersion: esi.tu-berlin.de/v1alpha1
kind: Scheduling
metadata:
  name: pinned
  namespace: team
spec:
  testbed:
    name: tb
  slotBased:
    mode: relaxed
    jobs:
      - name: {name: wordcount}
        slotIds: [0, 2]
      - name: {name: pagerank}
        slotIds: [1]
"""


def test_submitting_a_manifest_sends_it_in_the_originals_shape(tmp_path: Path) -> None:
    manifest = tmp_path / "pinned.yaml"
    manifest.write_text(MANIFEST)
    api = FakeApi().answer("POST", SCHEDULINGS, 201, wire_scheduling("pinned"))

    result = run(api, "submit", str(manifest))

    assert result.exit_code == 0, result.output
    assert api.body() == {
        "name": "pinned",
        "testBed": "tb",
        "slots": {
            "mode": "RELAXED",
            "jobs": [{"name": "wordcount", "slots": [0, 2]}, {"name": "pagerank", "slots": [1]}],
        },
    }
    assert api.last.url.params["namespace"] == "team"
    assert "Scheduling pinned created" in result.stdout


def test_submitting_the_originals_json_from_stdin_replaces_an_existing_one() -> None:
    body = {"name": "s1", "testBed": "tb", "queue": ["wordcount", "wordcount"], "state": "ignored"}
    api = FakeApi().answer("POST", SCHEDULINGS, 200, wire_scheduling())

    result = run(api, "-o", "json", "submit", "-", stdin=json.dumps(body))

    assert result.exit_code == 0, result.output
    assert api.body() == {"name": "s1", "testBed": "tb", "queue": ["wordcount", "wordcount"]}
    assert json.loads(result.stdout)["name"] == "s1"


def test_a_manifest_in_another_namespace_than_asked_for_is_refused_before_sending(tmp_path: Path) -> None:
    manifest = tmp_path / "pinned.yaml"
    manifest.write_text(MANIFEST)
    api = FakeApi()

    result = run(api, "-n", "elsewhere", "submit", str(manifest))

    assert result.exit_code == 1
    assert "names namespace team, but the client uses elsewhere" in result.stderr
    assert api.requests == []


def test_an_invalid_manifest_names_each_field_and_sends_nothing(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(MANIFEST.replace("slotIds: [1]", "slotIds: []") + "  queueBased: [{name: wordcount}]\n")
    api = FakeApi()

    result = run(api, "submit", str(manifest))

    assert result.exit_code == 1
    assert "not a valid Scheduling (pinned)" in result.stderr
    assert "spec.slotBased.jobs.1.slotIds" in result.stderr
    assert api.requests == []


def test_a_file_that_is_not_yaml_is_reported(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")

    result = run(FakeApi(), "submit", str(broken))

    assert result.exit_code == 1
    assert "is neither YAML nor JSON" in result.stderr


def test_a_refusal_prints_the_message_and_each_field_in_stderr_and_exits_1(tmp_path: Path) -> None:
    manifest = tmp_path / "pinned.yaml"
    manifest.write_text(MANIFEST)
    problem = ("slots.jobs.0.slots", "slot 2 does not exist in Testbed tb (slots 0..1)")
    api = FakeApi().answer("POST", SCHEDULINGS, 422, refusal("not a valid Scheduling: slots.jobs.0.slots", problem))

    result = run(api, "submit", str(manifest))

    assert result.exit_code == 1
    assert "not a valid Scheduling: slots.jobs.0.slots" in result.stderr
    assert lines_with(result.stderr, "slots.jobs.0.slots:", "slot 2 does not exist")
    assert result.stdout == ""


def test_an_unreachable_api_says_where_it_looked_and_how_to_start_one() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    api = FakeApi()
    api.routes[("GET", SCHEDULINGS)] = refuse

    result = run(api, "--url", "http://10.0.0.9:8082", "schedulings")

    assert result.exit_code == 1
    assert "could not reach the esi API at http://10.0.0.9:8082" in result.stderr
    assert "make up" in result.stderr
    assert "ESI_URL" in result.stderr


def test_a_missing_token_is_hinted_at() -> None:
    api = FakeApi().answer("GET", SCHEDULINGS, 401, refusal("a bearer token is required"))

    result = run(api, "schedulings")

    assert result.exit_code == 1
    assert "a bearer token is required" in result.stderr
    assert "ESI_TOKEN" in result.stderr


def test_delete_names_the_scheduling_and_its_last_state() -> None:
    api = FakeApi().answer(
        "DELETE", f"{SCHEDULINGS}/s1", body=wire_scheduling(state="CompletedState", esiState="Completed")
    )

    result = run(api, "delete", "s1")

    assert result.exit_code == 0, result.output
    assert "Scheduling s1 deleted; it was Completed" in result.stdout


def test_set_external_scheduler_puts_the_files_data(tmp_path: Path) -> None:
    data = tmp_path / "profile.yaml"
    data.write_text("profiler:\n  - pagerank: 63 (2)\n")
    api = FakeApi().answer(
        "PUT", "/external/jobs", body=wire_job(externalScheduler={"profiler": [{"pagerank": "63 (2)"}]})
    )

    result = run(api, "set-external-scheduler", "wordcount", str(data))

    assert result.exit_code == 0, result.output
    assert api.body() == {"name": "wordcount", "externalScheduler": {"profiler": [{"pagerank": "63 (2)"}]}}
    assert lines_with(result.stdout, "profiler", "pagerank: 63 (2)")


def test_external_scheduler_data_must_be_lists_of_string_maps(tmp_path: Path) -> None:
    data = tmp_path / "profile.yaml"
    data.write_text("profiler: {pagerank: 63}\n")

    result = run(FakeApi(), "set-external-scheduler", "wordcount", str(data))

    assert result.exit_code == 1
    assert "profiler" in result.stderr


# ---------------------------------------------------------------------------------------------- labelling nodes

TESTBED_NODES = "/external/testbeds/tb/nodes"


def labelled_nodes(dry_run: bool = False) -> dict[str, Any]:
    node = {"name": "big", "nodeId": 0, "freeCpu": "16", "freeMemory": "64Gi", "room": 16, "labelled": True}
    kept = {"name": "kept", "nodeId": 1, "freeCpu": "3500m", "freeMemory": "8Gi", "room": 3, "labelled": False}
    return {"testbed": "tb", "namespace": "team", "nodeLabel": "esi/slots", "dryRun": dry_run,
            "nodes": [node, kept], "unlabelled": ["old"]}  # fmt: skip


def test_the_help_says_what_it_does_and_the_top_level_help_lists_it() -> None:
    own = run(None, "label-nodes", "--help")
    top = run(None, "--help")

    assert own.exit_code == 0, own.output
    assert "Usage: esi label-nodes" in own.stdout
    assert "most room" in own.stdout
    assert "--dry-run" in own.stdout
    assert lines_with(top.stdout, " label-nodes ")


def test_the_chosen_nodes_are_a_table_with_their_ids_room_and_what_was_labelled() -> None:
    api = FakeApi().answer("POST", TESTBED_NODES, 200, labelled_nodes())

    result = run(api, "-n", "team", "label-nodes", "tb", "--count", "2")

    assert result.exit_code == 0, result.output
    assert api.body() == {"count": 2, "dryRun": False}
    assert api.last.url.params["namespace"] == "team"
    assert lines_with(result.stdout, "big", "0", "16", "64Gi", "set")
    assert lines_with(result.stdout, "kept", "1", "3500m", "8Gi", "kept")
    assert "label removed from: old" in result.stdout


def test_a_dry_run_asks_for_one_and_says_nothing_is_labelled() -> None:
    api = FakeApi().answer("POST", TESTBED_NODES, 200, labelled_nodes(dry_run=True))

    result = run(api, "label-nodes", "tb", "-c", "2", "--dry-run")

    assert result.exit_code == 0, result.output
    assert api.body() == {"count": 2, "dryRun": True}
    assert "a dry run, no node is labelled" in result.stdout
    assert "label to be removed from: old" in result.stdout


def test_a_refusal_names_each_node_and_what_it_lacks() -> None:
    api = FakeApi().answer(
        "POST",
        TESTBED_NODES,
        409,
        refusal("only 1 of the 2 nodes Testbed tb asks for fit", ("node/small", "has room for 1 of its 2 slots")),
    )

    result = run(api, "label-nodes", "tb", "--count", "2")

    assert result.exit_code == 1
    assert "only 1 of the 2 nodes Testbed tb asks for fit" in result.stderr
    assert "node/small: has room for 1 of its 2 slots" in result.stderr


def test_json_output_is_the_apis_answer() -> None:
    api = FakeApi().answer("POST", TESTBED_NODES, 200, labelled_nodes())

    result = run(api, "label-nodes", "tb", "--count", "2", "-o", "json")

    assert result.exit_code == 0, result.output
    assert '"nodeId": 0' in result.stdout


def test_count_is_required_and_positive_and_the_api_judges_the_rest() -> None:
    api = FakeApi().answer("POST", TESTBED_NODES, 422, refusal("invalid request: count", ("count", "at most 4096")))

    assert run(FakeApi(), "label-nodes", "tb").exit_code == 2
    assert run(FakeApi(), "label-nodes", "tb", "--count", "0").exit_code == 2
    too_many = run(api, "label-nodes", "tb", "--count", "5000")
    assert (too_many.exit_code, api.body()["count"]) == (1, 5000)
    assert "count: at most 4096" in too_many.stderr


# ---------------------------------------------------------------------------------------------- watching


def watched(*events: tuple[str, str, Any]) -> list[Any]:
    return [message(destination, action, resource) for destination, action, resource in events]


def test_watch_prints_a_line_per_event_and_ctrl_c_ends_it_cleanly() -> None:
    stomp = FakeStomp(
        watched(
            (
                "/topic/schedulings/s1",
                "MODIFIED",
                wire_scheduling(state="SubmissionState", esiState="Running", waitingFor="slots"),
            ),
            ("/topic/schedulings/s1", "MODIFIED", wire_scheduling(state="CompletedState", esiState="Completed")),
        ),
        then=KeyboardInterrupt(),
    )

    result = run(FakeApi(), "-n", "team", "watch", "schedulings", "s1", stomp=stomp)

    assert result.exit_code == 0, result.output
    first, second = result.stdout.splitlines()
    assert "MODIFIED" in first
    assert "scheduling/s1 Running 0/2 done, waiting for slots" in first
    assert "scheduling/s1 Completed" in second
    assert stomp.subscriptions[0]["destinations"] == ["/topic/schedulings/s1"]
    assert stomp.subscriptions[0]["namespace"] == "team"


def test_watch_without_a_kind_follows_every_kind_and_reads_each_object_named() -> None:
    stomp = FakeStomp(
        watched(
            ("/topic/jobs", "ADDED", "wordcount"),
            ("/topic/schedulings", "MODIFIED", "s1"),
            ("/topic/schedulings", "MODIFIED", "gone"),
            ("/topic/jobs", "DELETED", "pagerank"),
        ),
        then=KeyboardInterrupt(),
    )
    api = FakeApi().answer("GET", "/external/jobs/wordcount", body=wire_job(state="RunningState", esiState="Running"))
    api.answer(
        "GET", "/external/schedulings/s1", body=wire_scheduling(state="AwaitingCompletionState", esiState="Running")
    )

    result = run(api, "-n", "team", "watch", stomp=stomp)

    assert result.exit_code == 0, result.output
    assert stomp.subscriptions[0]["destinations"] == ["/topic/testbeds", "/topic/jobs", "/topic/schedulings"]
    assert lines_with(result.stdout, "ADDED", "job/wordcount Running 0 runs")
    assert lines_with(result.stdout, "MODIFIED", "scheduling/s1 Running 0/2 done")
    (gone,) = lines_with(result.stdout, "MODIFIED", "scheduling/gone")
    assert gone.rstrip().endswith("scheduling/gone"), "deleted meanwhile (404): the line names it only"
    assert lines_with(result.stdout, "DELETED", "job/pagerank")
    read = [(r.url.path, r.url.params.get("namespace")) for r in api.requests]
    assert read == [("/external/jobs/wordcount", "team"), ("/external/schedulings/s1", "team"),
                    ("/external/schedulings/gone", "team")], "a deletion is not read"  # fmt: skip


def test_watch_as_json_prints_one_object_per_line() -> None:
    stomp = FakeStomp(watched(("/topic/testbeds/tb", "DELETED", wire_testbed())), then=KeyboardInterrupt())

    result = run(FakeApi(), "-o", "json", "watch", "testbeds", "tb", stomp=stomp)

    (line,) = result.stdout.splitlines()
    event = json.loads(line)
    assert (event["action"], event["name"], event["resource"]["numberOfNodes"]) == ("DELETED", "tb", 2)


def test_watch_reports_a_connection_the_server_closed() -> None:
    result = run(FakeApi(), "watch", "jobs", stomp=FakeStomp())

    assert result.exit_code == 1
    assert "closed the STOMP connection" in result.stderr


def test_watch_knows_only_the_three_kinds() -> None:
    assert run(FakeApi(), "watch", "s1", stomp=FakeStomp()).exit_code == 2
