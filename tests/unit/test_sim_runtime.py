"""The workload model: base runtimes, measured pairs, unmeasured pairs, the time scale, and which table applies."""

from __future__ import annotations

from datetime import timedelta

import pytest

from esi.results.calibration import TABLE_CONFIGMAP, TABLE_KEY, TIME_SCALE_KEY
from sim.runtime import DEFAULT_TABLE, InterferenceModel, ModelError, Tables

THESIS = InterferenceModel.from_csv(DEFAULT_TABLE)
TABLE = """job,colocated_with,mean_runtime_s,samples
a,b,100,3
a,c,120,2
b,a,50,4
"""


def test_the_shipped_table_is_the_theses_measurements() -> None:
    assert THESIS.runtime("batchjob-sample3", ["batchjob-flink"]) == 444
    assert THESIS.runtime("spark-crawler", ["batchjob-flink2"]) == 171
    # Not symmetric: each row is the runtime of its own job only.
    assert THESIS.runtime("batchjob-flink", ["spark-crawler"]) == 34
    assert THESIS.runtime("spark-crawler", ["batchjob-flink"]) == 173


@pytest.mark.parametrize(
    ("bases", "job", "base"),
    [
        pytest.param({}, "a", 100, id="the mildest measured neighbour"),
        pytest.param({"a": 80}, "a", 80, id="an explicit base wins"),
        pytest.param({}, "z", 60, id="an unknown job: the default runtime"),
    ],
)
def test_a_job_alone_runs_its_base(bases: dict[str, float], job: str, base: float) -> None:
    model = InterferenceModel.from_csv(TABLE, bases=bases)

    assert model.base(job) == base
    assert model.runtime(job, []) == base


@pytest.mark.parametrize(
    ("colocated", "runtime"),
    [
        pytest.param(["b"], 100, id="a measured pair"),
        pytest.param(["b", "c"], 120, id="the slowest neighbour decides"),
        pytest.param(["x"], 120, id="an unmeasured pair: base x factor"),
        pytest.param(["b", "x", "x"], 120, id="measured and unmeasured"),
        pytest.param(["c", "x"], 120, id="a tie"),
    ],
)
def test_a_job_next_to_others(colocated: list[str], runtime: float) -> None:
    model = InterferenceModel.from_csv(TABLE, unknown_pair_factor=1.2)

    assert model.runtime("a", colocated) == pytest.approx(runtime)


def test_the_unmeasured_pair_factor_applies_to_the_explicit_base() -> None:
    model = InterferenceModel.from_csv(TABLE, bases={"z": 10}, unknown_pair_factor=1.5, default_runtime=30)

    assert model.runtime("z", ["a"]) == 15
    assert model.runtime("q", ["a"]) == 45


def test_the_time_scale_turns_model_seconds_into_wall_clock_time() -> None:
    model = InterferenceModel.from_csv(DEFAULT_TABLE, time_scale=0.01)

    assert model.duration("batchjob-sample3", []) == timedelta(seconds=4.44)
    assert model.duration("batchjob-sample3", ["spark-crawler"]) == timedelta(seconds=4.93)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("job,with,runtime\na,b,1\n", "header", id="wrong header"),
        pytest.param(TABLE + "a,d,fast,1\n", "line 5", id="not a number"),
        pytest.param(TABLE + "a,d,-1,1\n", "positive", id="negative runtime"),
        pytest.param(TABLE + "a,b,99,1\n", "a second row for a next to b", id="duplicate pair"),
        pytest.param(TABLE + ",b,99,1\n", "must not be empty", id="no job"),
    ],
)
def test_a_table_that_cannot_be_used_is_refused_saying_where(text: str, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        InterferenceModel.from_csv(text)


def test_settings_must_be_positive() -> None:
    with pytest.raises(ModelError, match="time_scale"):
        InterferenceModel.from_csv(TABLE, time_scale=0)
    with pytest.raises(ModelError, match="base of a"):
        InterferenceModel.from_csv(TABLE, bases={"a": -5})


def test_an_alone_row_is_the_base_and_a_base_option_overrides_it() -> None:
    table = TABLE + "a,-,90,3\n"

    assert InterferenceModel.from_csv(table).base("a") == 90
    assert InterferenceModel.from_csv(table, bases={"a": 70}).base("a") == 70


def table_configmap(namespace: str, text: str, *, name: str = TABLE_CONFIGMAP) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": namespace}, "data": {TABLE_KEY: text}}


DEFAULT = InterferenceModel.from_csv(TABLE, bases={"b": 5}, time_scale=0.5, default_runtime=30)
TEAM_A = "job,colocated_with,mean_runtime_s,samples,stdev_s\na,-,10,2,1\na,b,20,2,\n"


def test_a_namespaces_table_replaces_the_default_for_its_jobs_only() -> None:
    tables = Tables(DEFAULT).changed(table_configmap("team-a", TEAM_A))

    team_a = tables.model_for("team-a")
    assert (team_a.runtime("a", []), team_a.runtime("a", ["b"])) == (10, 20)
    assert team_a.runtime("b", []) == 30  # not merged with the default's rows, nor its --base
    assert team_a.time_scale == 0.5  # the simulator's settings hold for every table
    assert tables.model_for("team-b") is DEFAULT


def test_a_changed_table_replaces_the_one_before_and_deleting_it_goes_back_to_the_default() -> None:
    first = Tables(DEFAULT).changed(table_configmap("team-a", TEAM_A))
    second = first.changed(table_configmap("team-a", TEAM_A.replace("a,-,10", "a,-,12")))

    assert second.model_for("team-a").runtime("a", []) == 12
    assert second.removed(table_configmap("team-a", "")).model_for("team-a") is DEFAULT


@pytest.mark.parametrize(
    ("configmap", "message"),
    [
        pytest.param(
            table_configmap("team-a", TEAM_A + "a,c,soon,1,\n"),
            "ConfigMap team-a/esi-colocation, key colocation.csv, line 4, field mean_runtime_s",
            id="a bad table",
        ),
        pytest.param({"metadata": {"name": TABLE_CONFIGMAP, "namespace": "team-a"}}, "key colocation.csv is missing"),
        pytest.param(table_configmap("team-a", TEAM_A, name="other"), "not used", id="another name"),
    ],
)
def test_a_configmap_without_a_usable_table_is_refused_and_the_table_before_stays(
    configmap: dict[str, object], message: str
) -> None:
    before = Tables(DEFAULT).changed(table_configmap("team-a", TEAM_A))

    with pytest.raises(ModelError, match=message):
        before.changed(configmap)
    assert before.removed(table_configmap("team-a", "", name="other")) == before


STARTUPS = InterferenceModel.from_csv(
    """job,colocated_with,mean_runtime_s,samples,stdev_s,mean_startup_s
a,-,10,2,,12
a,b,20,2,,18
a,c,20,1,,15
a,d,20,1,,
b,c,30,1,,10
b,d,30,3,,20
c,a,40,1,,
""",
    time_scale=0.5,
)


@pytest.mark.parametrize(
    ("job", "colocated", "startup"),
    [
        pytest.param("a", [], 12, id="alone: its alone row"),
        pytest.param("a", ["b"], 18, id="next to a neighbour: its row"),
        pytest.param("a", ["b", "c"], 18, id="next to several: the longest of their rows"),
        pytest.param("a", ["d"], 12, id="a row without a start-up: the alone row"),
        pytest.param("a", ["z"], 12, id="an unknown neighbour: the alone row"),
        pytest.param("b", [], 17.5, id="never alone: the samples-weighted mean of its rows, (10 + 3 x 20) / 4"),
        pytest.param("c", ["a"], 0, id="no start-up measured: none"),
        pytest.param("z", [], 0, id="an unknown job: none"),
    ],
)
def test_the_start_up_of_a_job(job: str, colocated: list[str], startup: float) -> None:
    assert STARTUPS.startup(job, colocated) == startup
    assert STARTUPS.startup_delay(job, colocated) == timedelta(seconds=startup * 0.5)


def test_the_theses_table_has_no_start_up() -> None:
    assert THESIS.startup("batchjob-sample3", ["batchjob-flink"]) == 0


def test_a_namespaces_configmap_may_set_its_time_scale() -> None:
    def with_scale(scale: str) -> dict[str, object]:
        return table_configmap("team-a", TEAM_A) | {"data": {TABLE_KEY: TEAM_A, TIME_SCALE_KEY: scale}}

    tables = Tables(DEFAULT).changed(with_scale("1"))

    assert tables.model_for("team-a").time_scale == 1
    assert tables.model_for("team-a").duration("a", []) == timedelta(seconds=10)
    assert tables.model_for("team-b").time_scale == 0.5
    for bad in ("0", "fast", "nan"):
        with pytest.raises(ModelError, match=f"key time-scale: expected a positive factor, not '{bad}'"):
            tables.changed(with_scale(bad))
