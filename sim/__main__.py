"""Run the simulated Spark and Flink operators: ``python -m sim --kubeconfig PATH [options]``.

Acts on every SparkApplication (sparkoperator.k8s.io/v1beta2) and FlinkDeployment (flink.apache.org/v1beta1)
in the cluster (or in the --namespace ones) as the kubeflow Spark operator and the Apache Flink Kubernetes
operator would, creating their pods and reporting their status, for a local cluster whose nodes run no
containers. A run starts
when all its executors (TaskManagers) run and lasts what the co-location table says for its job (the pod
label esi.tu-berlin.de/job, else the application's name) next to the jobs of other applications'
executors on the same nodes, times --time-scale; its executors come after its job's start-up, if the table has
one. A namespace's own table (a ConfigMap) replaces --table for its jobs, and may set their time scale, without a
restart (sim.runtime says which table applies). Install the CRDs first (crds/sim/, or
sim.crds.application_crds()); the simulator runs beside esi's operators (python -m operators).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import kopf

from sim.lifecycle import SimSettings
from sim.runtime import DEFAULT_TABLE, InterferenceModel, ModelError


def _float(text: str) -> float:
    """The number, or NaN (which every range below refuses) for what is not one."""
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def _number(accepts: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    """An argparse type: a finite number ``accepts`` holds for, else "expected <expected>, not '<text>'"."""

    def parse(text: str) -> float:
        value = _float(text)
        if not accepts(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, not {text!r}")
        return value

    return parse


_positive = _number(lambda value: value > 0, "a positive number")
_probability = _number(lambda value: 0 <= value <= 1, "a probability between 0 and 1")
_fraction = _number(lambda value: 0 <= value < 1, "a fraction from 0 up to (not including) 1")


def _base(text: str) -> tuple[str, float]:
    job, sep, seconds = text.partition("=")
    value = _float(seconds)
    if not sep or not job or not value > 0:
        raise argparse.ArgumentTypeError(f"expected JOB=SECONDS with positive seconds, not {text!r}")
    return job, value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sim", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG, then in-cluster)")
    parser.add_argument("--liveness", help="serve a liveness endpoint, e.g. http://127.0.0.1:8082/healthz")
    parser.add_argument(
        "--table",
        type=Path,
        default=DEFAULT_TABLE,
        help="the default co-location table, CSV job,colocated_with,mean_runtime_s,samples[,stdev_s[,mean_startup_s]] "
        "as `esi calibrate` writes it (default: the thesis' table); a namespace's ConfigMap esi-colocation replaces it "
        "for its jobs",
    )
    parser.add_argument(
        "--base",
        type=_base,
        action="append",
        default=[],
        metavar="JOB=SECONDS",
        help="runtime of JOB alone with the default table (default: its row alone, else its smallest runtime in the "
        "table, else --default-runtime); repeatable",
    )
    parser.add_argument(
        "--default-runtime",
        type=_positive,
        default=60.0,
        metavar="SECONDS",
        help="runtime of a job the table does not know (default: %(default)s)",
    )
    parser.add_argument(
        "--unknown-pair-factor",
        type=_positive,
        default=1.2,
        metavar="FACTOR",
        help="a job next to a job the table has no row for runs base x FACTOR (default: %(default)s)",
    )
    parser.add_argument(
        "--time-scale",
        type=_positive,
        default=1.0,
        metavar="FACTOR",
        help="wall-clock seconds per modelled second, e.g. 0.01 runs 444 s in 4.44 s (default: %(default)s)",
    )
    parser.add_argument(
        "--failure-rate",
        type=_probability,
        default=0.0,
        metavar="P",
        help="chance that a run fails at its end instead of completing (default: %(default)s)",
    )
    parser.add_argument(
        "--runtime-jitter",
        type=_fraction,
        default=0.0,
        metavar="FRACTION",
        help="runs vary around the table's runtime: normally distributed, this standard deviation relative to "
        "it, e.g. 0.1 (default: %(default)s, every run takes exactly the table's time)",
    )
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        dest="namespaces",
        metavar="NAMESPACE",
        help="act only on applications in NAMESPACE (repeatable; default: every namespace), e.g. to leave "
        "others to a real operator; a kopf pattern too: '!real' is every namespace but real",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random failures and jitter; same seed, same runs (default: 0)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        model = InterferenceModel.from_csv(
            args.table,
            bases=dict(args.base),
            default_runtime=args.default_runtime,
            unknown_pair_factor=args.unknown_pair_factor,
            time_scale=args.time_scale,
        )
    except (OSError, ModelError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    import sim.controller  # noqa: F401, PLC0415 (registers its handlers with kopf)

    settings = SimSettings(model, failure_rate=args.failure_rate, seed=args.seed, runtime_jitter=args.runtime_jitter)
    kopf.run(
        clusterwide=not args.namespaces,
        namespaces=args.namespaces,
        standalone=True,
        liveness_endpoint=args.liveness,
        memo=kopf.Memo(sim_settings=settings),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
