"""esi's processes, one table: what each is called, how it is started and where it says it lives and serves.

Every place that starts one builds its command line here: the local stack (``infra.stacks.local``), the cluster
stack's Deployments and probes (``infra.stacks.cluster``), the Flink stand-in's launcher
(``infra.stacks.flink_standin_process``), the benchmarks (``bench.stack``, ``bench.ghosts``) and the integration
tests. Locally each launcher picks the ports (``python`` is its interpreter); in a container the ports are
``port`` and ``extender_port`` of the table, and ``python`` is the image's.

A process's liveness endpoint is ``http://HOST:PORT<liveness>``, the URL it is given (``--liveness``,
``--health``) or, for the API, its own port; ``readiness`` says it serves (the API: once its caches are filled).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Final, TypeAlias

__all__ = [
    "API",
    "API_PORT",
    "EXTENDER_PATH",
    "EXTENDER_PORT",
    "FLINK_STANDIN",
    "OPERATORS",
    "OPERATORS_HEALTH_PORT",
    "PROCESSES",
    "SIM",
    "EsiProcess",
    "api_command",
    "extender_url",
    "flink_standin_command",
    "operators_command",
    "sim_command",
]

_Path: TypeAlias = str | PathLike[str]


@dataclass(frozen=True)
class EsiProcess:
    """One of esi's processes: ``name`` is its local component's and log's name and its Deployment's, ``module``
    what ``python -m`` runs, ``port`` its port in a container (None: it has none there)."""

    name: str
    module: str
    port: int | None = None
    liveness: str = "/healthz"
    readiness: str = "/healthz"

    def command(self, python: str, arguments: Sequence[str]) -> list[str]:
        return [python, "-m", self.module, *arguments]

    def live_url(self, port: int, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{port}{self.liveness}"

    def ready_url(self, port: int, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{port}{self.readiness}"


# Their ports in a container (the image's EXPOSE, the Deployments' containerPort); the API process serves the
# scheduler extender on a port of its own, at EXTENDER_PATH.
OPERATORS_HEALTH_PORT: Final = 8081
API_PORT: Final = 8082
EXTENDER_PORT: Final = 8080
EXTENDER_PATH: Final = "/extender"

OPERATORS: Final = EsiProcess("esi-operators", "operators", port=OPERATORS_HEALTH_PORT)
API: Final = EsiProcess("esi-api", "api", port=API_PORT, readiness="/readyz")
SIM: Final = EsiProcess("esi-sim", "sim")
FLINK_STANDIN: Final = EsiProcess("esi-flink-standin", "flink_standin")
PROCESSES: Final = (OPERATORS, API, SIM, FLINK_STANDIN)


def extender_url(host: str, port: int) -> str:
    return f"http://{host}:{port}{EXTENDER_PATH}"


def _option(name: str, value: object | None) -> list[str]:
    return [] if value is None else [f"--{name}={value}"]


def operators_command(
    python: str,
    *,
    kubeconfig: _Path | None = None,
    liveness: str | None = None,
    log_level: str | None = None,
    stalled_after: float | None = None,
    keep_runs: int | None = None,
    keep_runs_for: float | None = None,
    more: Sequence[str] = (),
) -> list[str]:
    """``python -m operators``: the reconcilers; ``liveness`` the URL it serves its liveness at, ``stalled_after``
    the seconds a run may wait to be Running before it is Stalled, ``keep_runs`` the Runs kept per namespace and
    ``keep_runs_for`` the seconds a Run is kept (None: the operators' default)."""
    stalled = None if stalled_after is None else f"{stalled_after:g}"
    kept_for = None if keep_runs_for is None else f"{keep_runs_for:g}"
    arguments = [
        *_option("kubeconfig", kubeconfig),
        *_option("liveness", liveness),
        *_option("log-level", log_level),
        *_option("stalled-after", stalled),
        *_option("keep-runs", keep_runs),
        *_option("keep-runs-for", kept_for),
        *more,
    ]
    return OPERATORS.command(python, arguments)


def api_command(
    python: str,
    *,
    kubeconfig: _Path | None = None,
    host: str | None = None,
    port: int,
    extender_host: str | None = None,
    extender_port: int,
    token_file: _Path | None = None,
    namespace: str | None = None,
    allow_anonymous: bool = False,
    log_format: str | None = None,
    log_level: str | None = None,
) -> list[str]:
    """``python -m api``: the REST API on ``port`` and the scheduler extender on ``extender_port``; ``token_file``
    where it writes the token it accepts, ``namespace`` the one of a request that names none."""
    arguments = [
        *_option("kubeconfig", kubeconfig),
        *_option("host", host),
        f"--port={port}",
        *_option("extender-host", extender_host),
        f"--extender-port={extender_port}",
        *_option("token-file", token_file),
        *_option("namespace", namespace),
        *(["--allow-anonymous"] if allow_anonymous else []),
        *_option("log-format", log_format),
        *_option("log-level", log_level),
    ]
    return API.command(python, arguments)


def sim_command(python: str, *, kubeconfig: _Path, liveness: str | None = None, more: Sequence[str] = ()) -> list[str]:
    """``python -m sim``: the simulated Spark and Flink operators; ``more`` its other arguments (namespaces,
    runtimes)."""
    return SIM.command(python, [f"--kubeconfig={kubeconfig}", *_option("liveness", liveness), *more])


def flink_standin_command(
    python: str,
    *,
    kubeconfig: _Path,
    namespaces: Sequence[str],
    flink_home: _Path,
    java_home: _Path,
    workdir: _Path,
    health: str | None = None,
) -> list[str]:
    """``python -m flink_standin``: FlinkDeployments of ``namespaces`` submitted with the Flink distribution at
    ``flink_home``; ``health`` the URL it serves its liveness at."""
    arguments = ["--kubeconfig", str(kubeconfig)]
    for namespace in namespaces:
        arguments += ["--namespace", namespace]
    arguments += ["--flink-home", str(flink_home), "--java-home", str(java_home), "--workdir", str(workdir)]
    return FLINK_STANDIN.command(python, [*arguments, *_option("health", health)])
