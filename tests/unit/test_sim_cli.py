"""``python -m sim``'s options: what the simulation is told, and what it refuses before starting."""

from __future__ import annotations

import pytest

from sim.__main__ import parse_args


def test_the_options_of_a_varying_scaled_workload() -> None:
    args = parse_args(["--time-scale", "0.05", "--runtime-jitter", "0.1", "--seed", "4", "--base", "j=5"])

    assert (args.time_scale, args.runtime_jitter, args.seed, args.base) == (0.05, 0.1, 4, [("j", 5.0)])
    assert parse_args([]).runtime_jitter == 0.0


def test_it_acts_in_every_namespace_unless_told_which() -> None:
    assert parse_args([]).namespaces == []
    assert parse_args(["--namespace", "a", "--namespace", "b"]).namespaces == ["a", "b"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--runtime-jitter", "1"], "expected a fraction from 0 up to (not including) 1, not '1'"),
        (["--runtime-jitter", "-0.1"], "not '-0.1'"),
        (["--runtime-jitter", "lots"], "not 'lots'"),
        (["--time-scale", "0"], "expected a positive number, not '0'"),
        (["--failure-rate", "1.5"], "expected a probability between 0 and 1, not '1.5'"),
        (["--default-runtime", "inf"], "expected a positive number, not 'inf'"),
        (["--base", "j=nan"], "expected JOB=SECONDS with positive seconds, not 'j=nan'"),
        (["--base", "=5"], "not '=5'"),
    ],
)
def test_values_that_make_no_workload_are_refused(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)

    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
