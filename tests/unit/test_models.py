"""The resource models accept what the CRDs accept and reject the same mistakes at the same field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from esi.resources.batchjob import BatchJob
from esi.resources.scheduling import Scheduling, SlotMode
from tests.manifests import INVALID, SPARK, VALID, Invalid, read


def api_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location the way the API server writes field paths: spec.jobs[0].slotIds."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


@pytest.mark.parametrize("manifest", VALID.values(), ids=VALID.keys())
def test_valid_manifests_are_accepted_and_round_trip(manifest: dict[str, Any]) -> None:
    model = read(manifest)

    again = read(model.model_dump(mode="json", exclude_none=True))
    assert again == model


@pytest.mark.parametrize("case", INVALID.values(), ids=INVALID.keys())
def test_invalid_manifests_are_refused_at_the_field_the_api_server_names(case: Invalid) -> None:
    with pytest.raises(ValidationError) as refused:
        read(case.manifest)

    paths = [api_path(e["loc"]) for e in refused.value.errors()]
    # pydantic names a list where the API server names the element in it (slotIds vs slotIds[2]).
    assert any(case.field == p or case.field.startswith(p + "[") for p in paths), paths


def test_unknown_fields_of_the_embedded_spark_spec_are_kept() -> None:
    job = BatchJob.model_validate(VALID["spark batchjob with the external scheduler's notes"])

    dumped = job.to_json_dict()["spec"]["sparkSpec"]
    assert dumped == SPARK  # imagePullPolicy is not modelled, yet it survives
    assert job.spec.external_scheduler == {"profiler": [{"flink-wordcount": "24 (16)", "spark-pi": "27 (16)"}]}


def test_the_original_upper_case_mode_is_understood() -> None:
    scheduling = Scheduling.model_validate(VALID["slot-based scheduling, original upper-case mode"])

    assert scheduling.spec.slot_based is not None
    assert scheduling.spec.slot_based.mode is SlotMode.STRICT
    assert scheduling.to_json_dict()["spec"]["slotBased"]["mode"] == "strict"


def test_unknown_top_level_spec_fields_are_refused() -> None:
    manifest = VALID["testbed from the thesis"] | {}
    manifest = {**manifest, "spec": {**manifest["spec"], "slots": 3}}

    with pytest.raises(ValidationError, match="slots"):
        read(manifest)
