"""LocalCluster.create starts a control plane that did not come up afresh, once; its errors carry the logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.local_cluster import ClusterError, LocalCluster
from infra.local_cluster import control_plane as local_cluster


class _Recorder(LocalCluster):
    """A cluster whose control plane fails ``failures`` times; records the waits it was given and deletions."""

    def __init__(self, workdir: Path, failures: int) -> None:
        super().__init__("unit", workdir)
        self.failures = failures
        self.waits: list[float] = []
        self.deletions = 0

    def _kwokctl_config(self) -> dict[str, Any]:
        return {"kind": "KwokctlConfiguration"}  # the real one names the built binaries

    def _create_control_plane(self, config_path: Path, timeout: float) -> None:
        assert config_path.is_file()
        self.waits.append(timeout)
        if len(self.waits) <= self.failures:
            raise ClusterError(f"attempt {len(self.waits)} not ready")

    def delete(self) -> None:
        self.deletions += 1


def test_a_control_plane_that_comes_up_is_created_once(tmp_path: Path) -> None:
    cluster = _Recorder(tmp_path, failures=0)
    cluster.create(timeout=180)
    assert cluster.waits == [local_cluster.FIRST_ATTEMPT_TIMEOUT]
    assert cluster.deletions == 0


def test_a_control_plane_that_does_not_come_up_is_deleted_and_created_once_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = _Recorder(tmp_path, failures=1)
    cluster.create(timeout=180)
    assert cluster.waits == [local_cluster.FIRST_ATTEMPT_TIMEOUT, 180]
    assert cluster.deletions == 1
    assert "attempt 1 not ready" in capsys.readouterr().err


def test_the_second_failure_is_the_error(tmp_path: Path) -> None:
    cluster = _Recorder(tmp_path, failures=2)
    with pytest.raises(ClusterError, match="attempt 2 not ready"):
        cluster.create(timeout=180)
    assert cluster.deletions == 1


def test_a_short_timeout_is_one_attempt(tmp_path: Path) -> None:
    cluster = _Recorder(tmp_path, failures=1)
    with pytest.raises(ClusterError, match="attempt 1"):
        cluster.create(timeout=30)
    assert cluster.waits == [30]


def test_the_logs_tail_names_each_component_and_ends_with_its_last_lines(tmp_path: Path) -> None:
    cluster = LocalCluster("unit", tmp_path)
    assert "no component logs" in cluster.logs_tail()
    cluster.logs_dir.mkdir(parents=True)
    (cluster.logs_dir / "etcd.log").write_text("".join(f"line {i}\n" for i in range(30)))
    (cluster.logs_dir / "kube-apiserver.log").write_text("bind: address already in use\n")
    tail = cluster.logs_tail(lines=3)
    assert tail.splitlines()[:4] == [f"--- etcd ({cluster.logs_dir / 'etcd.log'}):", "line 27", "line 28", "line 29"]
    assert "--- kube-apiserver" in tail
    assert tail.endswith("bind: address already in use")


def test_a_port_handed_out_is_not_handed_out_again_while_its_caller_may_still_start_its_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_cluster, "PORTS_HANDED_OUT", tmp_path / "ports")
    monkeypatch.setattr(local_cluster, "_listen_ports", lambda: range(20001, 20003))
    monkeypatch.setattr(local_cluster, "_free_now", lambda port: True)

    assert {local_cluster.free_port(), local_cluster.free_port()} == {20001, 20002}
    with pytest.raises(ClusterError, match=r"no free TCP port on 127.0.0.1 in range\(20001, 20003\)"):
        local_cluster.free_port()


def test_a_port_something_is_bound_to_is_not_handed_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_cluster, "PORTS_HANDED_OUT", tmp_path / "ports")
    monkeypatch.setattr(local_cluster, "_listen_ports", lambda: range(20001, 20003))
    monkeypatch.setattr(local_cluster, "_free_now", lambda port: port != 20001)

    assert local_cluster.free_port() == 20002


def test_ports_are_handed_out_below_the_kernels_ephemeral_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outgoing connections take their local ports from that range: one could take a port before its listener starts.
    monkeypatch.setattr(local_cluster, "PORTS_HANDED_OUT", tmp_path / "ports")
    ephemeral_from = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])

    ports = [local_cluster.free_port() for _ in range(20)]

    assert all(local_cluster.LISTEN_PORTS_FROM <= port < ephemeral_from for port in ports), ports
