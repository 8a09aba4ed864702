"""esi's model of Flink's memory split (``esi.objects.flink_memory``) against Flink's own: the pinned Flink
distribution's ``BashJavaUtils``, which Flink's start scripts run to size a JobManager's or TaskManager's JVM.

For each configuration and process size: Flink refuses exactly when the model does, and where it accepts, the
sizes it derives are the model's to the byte.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import pytest

from esi.objects.flink_memory import (
    MIB,
    MemoryConfigError,
    fitted_task_manager,
    job_manager_heap,
    smallest_task_manager,
    task_manager_memory,
)
from infra.images.flink import flink_home
from infra.images.java_runtime import JavaRuntimeError, host_java_home

try:
    _JAVA = host_java_home() / "bin" / "java"
except JavaRuntimeError as err:  # pragma: no cover - machines without a Java runtime
    pytest.skip(str(err), allow_module_level=True)

_RESULT = "BASH_JAVA_UTILS_EXEC_RESULT:"
T = TypeVar("T")

_CONFIGS: dict[str, dict[str, str]] = {
    "defaults": {},
    "less managed": {"taskmanager.memory.managed.fraction": "0.1", "taskmanager.memory.jvm-metaspace.size": "128m"},
    "managed size": {"taskmanager.memory.managed.size": "100m", "taskmanager.memory.network.fraction": "0.2"},
    "small overhead": {
        "taskmanager.memory.jvm-overhead.min": "64m",
        "taskmanager.memory.framework.off-heap.size": "64m",
        "jobmanager.memory.jvm-overhead.min": "64m",
        "jobmanager.memory.off-heap.size": "64m",
    },
}


def _bash_java_utils(command: str, conf: Mapping[str, str], config_dir: Path) -> list[str] | str:
    """The result lines of ``BashJavaUtils <command>``, or Flink's refusal (its exception's message)."""
    home = flink_home()
    (config_dir / "config.yaml").write_text("")
    classpath = f"{home / 'bin' / 'bash-java-utils.jar'}:{next((home / 'lib').glob('flink-dist-*.jar'))}"
    argv = [str(_JAVA), "-cp", classpath, "org.apache.flink.runtime.util.bash.BashJavaUtils", command]
    argv += ["--configDir", str(config_dir), *(f"-D{key}={value}" for key, value in conf.items())]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    results = [line.removeprefix(_RESULT) for line in done.stdout.splitlines() if line.startswith(_RESULT)]
    if done.returncode == 0 and results:
        return results
    refusal = re.search(r"IllegalConfigurationException: (.*)", done.stdout + done.stderr)
    assert refusal is not None, done.stdout[-2000:] + done.stderr[-2000:]
    return refusal.group(1)


def _dynamic(line: str) -> dict[str, int]:
    return {key: int(value) for key, value in re.findall(r"-D (\S+)=(\d+)b", line)}


def _both(flink: list[str] | str, ours: Callable[[], T], what: str) -> tuple[list[str], T] | None:
    """Flink's result lines and the model's answer when both accept; None when both refuse; else a failure."""
    try:
        answer = ours()
    except MemoryConfigError:
        assert isinstance(flink, str), f"{what}: Flink starts it, esi refuses it: {flink}"
        return None
    assert not isinstance(flink, str), f"{what}: Flink refuses it, esi accepts it: {flink}"
    return flink, answer


@pytest.mark.parametrize("config", list(_CONFIGS))
def test_task_manager_sizes_are_flinks(config: str, tmp_path: Path) -> None:
    # Flink's own split, as written: managed memory named (at Flink's default where the config leaves it), so esi
    # fits nothing (fitted ones: test_a_taskmanager_fitted_to_its_slot_is_split_by_flink_as_esi_says).
    conf = {"taskmanager.memory.managed.fraction": "0.4", **_CONFIGS[config]}
    smallest = smallest_task_manager(conf) // MIB
    accepted = []
    for mib in (smallest - 1, smallest, 1024, 1500, 4096):
        flink = _bash_java_utils(
            "GET_TM_RESOURCE_PARAMS", {**conf, "taskmanager.memory.process.size": f"{mib}m"}, tmp_path
        )
        both = _both(flink, lambda: task_manager_memory(mib * MIB, conf), f"a TaskManager of {mib} MiB")  # noqa: B023
        if both is None:
            continue
        accepted.append(mib)
        derived, ours = _dynamic(both[0][1]), both[1]
        assert (
            derived["taskmanager.memory.task.heap.size"],
            derived["taskmanager.memory.managed.size"],
            derived["taskmanager.memory.network.min"],
        ) == (ours.task_heap, ours.managed, ours.network), mib
    assert smallest - 1 not in accepted
    assert smallest in accepted


@pytest.mark.parametrize(("config", "largest_refused"), [("defaults", 576), ("small overhead", 384)])
def test_job_manager_sizes_are_flinks(config: str, largest_refused: int, tmp_path: Path) -> None:
    conf = _CONFIGS[config]
    accepted = []
    for mib in (largest_refused - 100, largest_refused, largest_refused + 1, 704, 1024, 2048):
        flink = _bash_java_utils(
            "GET_JM_RESOURCE_PARAMS", {**conf, "jobmanager.memory.process.size": f"{mib}m"}, tmp_path
        )
        both = _both(flink, lambda: job_manager_heap(mib * MIB, conf), f"a JobManager of {mib} MiB")  # noqa: B023
        if both is not None:
            accepted.append(mib)
            assert re.search(rf"-Xmx{both[1]}\b", both[0][0]), (mib, both)
    assert accepted == [largest_refused + 1, 704, 1024, 2048]


@pytest.mark.parametrize("mib", [771, 896, 981, 1024])
def test_a_taskmanager_fitted_to_its_slot_is_split_by_flink_as_esi_says(mib: int, tmp_path: Path) -> None:
    fitted = fitted_task_manager(mib * MIB, {})

    flink = _bash_java_utils(
        "GET_TM_RESOURCE_PARAMS", {**fitted.settings, "taskmanager.memory.process.size": f"{mib}m"}, tmp_path
    )

    assert not isinstance(flink, str), f"Flink refuses the fitted TaskManager of {mib} MiB: {flink}"
    derived = _dynamic(flink[1])
    assert (
        derived["taskmanager.memory.task.heap.size"],
        derived["taskmanager.memory.managed.size"],
        derived["taskmanager.memory.network.min"],
    ) == (fitted.task_heap, fitted.managed, fitted.network)
