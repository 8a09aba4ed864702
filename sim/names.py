"""The labels, annotations and configuration keys the simulated operator writes or reads.

Its own names carry the prefix ``sim.esi.tu-berlin.de`` (so they never clash with esi's operator, which
uses ``esi.tu-berlin.de``). A run's plan is recorded on the application itself, so a restarted simulator
continues the same run: ``started-at`` and ``ends-at`` (ISO 8601 times), ``colocated`` (the jobs its
executors shared nodes with when it started, comma-separated) and ``failure`` (present only when the run
is going to fail: why); a FlinkDeployment's ``taskmanagers`` lists the numbers of the TaskManagers it has had;
``seen-at`` (ISO 8601) the simulator's first sight of it and ``executors-at`` when its executors are due after
its start-up from then, where the workload model has start-ups.

esi's own labels that it reads (``esi.objects.names``): ``JOB_LABEL`` on a pod names the job for the workload
model (the application's name when absent); ``ATTEMPT_ANNOTATION`` on an application numbers its attempt. A
namespace's co-location table is a ConfigMap named, labelled and keyed as ``esi.results.calibration`` says
(``esi calibrate`` writes it, so the names live there).
"""

from __future__ import annotations

from typing import Final

from esi.resources.meta import GROUP

__all__ = [
    "APP_UID_LABEL",
    "COLOCATED_ANNOTATION",
    "ENDS_AT_ANNOTATION",
    "EXECUTORS_AT_ANNOTATION",
    "FAILURE_ANNOTATION",
    "FLINK_FAIL_ATTEMPTS",
    "PREFIX",
    "SEEN_AT_ANNOTATION",
    "SPARK_FAIL_ATTEMPTS",
    "STARTED_AT_ANNOTATION",
    "TASKMANAGERS_ANNOTATION",
]

PREFIX: Final = f"sim.{GROUP}"

APP_UID_LABEL: Final = f"{PREFIX}/app-uid"  # every simulated pod: the uid of the application it belongs to

STARTED_AT_ANNOTATION: Final = f"{PREFIX}/started-at"
ENDS_AT_ANNOTATION: Final = f"{PREFIX}/ends-at"
COLOCATED_ANNOTATION: Final = f"{PREFIX}/colocated"
FAILURE_ANNOTATION: Final = f"{PREFIX}/failure"
SEEN_AT_ANNOTATION: Final = f"{PREFIX}/seen-at"
EXECUTORS_AT_ANNOTATION: Final = f"{PREFIX}/executors-at"
# A FlinkDeployment's TaskManagers seen so far, by number (comma-separated): a lost one's number is never reused.
TASKMANAGERS_ANNOTATION: Final = f"{PREFIX}/taskmanagers"

# Failure injection: a run fails (at its end time, instead of completing) while the application's attempt
# (its ATTEMPT_ANNOTATION, 1 when absent) is at most this number.
SPARK_FAIL_ATTEMPTS: Final = "spark.esi.sim.failAttempts"  # in spec.sparkConf
FLINK_FAIL_ATTEMPTS: Final = "esi.sim.fail-attempts"  # in spec.flinkConfiguration
