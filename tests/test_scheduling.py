"""Pure scheduling rules: time limits, groups, retries, one env per answer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ConfigError
from deepgym.models import Environment, Evidence, RunResult, ServiceTime
from deepgym.scheduling import (
    TimeLimitPolicy,
    broadcast_envs,
    fixed_limit,
    group_slices,
    holds_under,
    should_resend,
    should_retry,
)


@given(
    ref=st.floats(min_value=0, max_value=1e4, allow_nan=False),
    factor=st.floats(min_value=0.1, max_value=100),
    floor=st.floats(min_value=0.01, max_value=10),
    cap=st.floats(min_value=0.01, max_value=1e3),
)
def test_limit_is_clamped_between_floor_and_cap(
    ref: float, factor: float, floor: float, cap: float
) -> None:
    limit = TimeLimitPolicy(factor=factor, floor=floor).limit(ref, cap)
    assert limit <= cap
    assert limit >= min(floor, cap)
    if floor <= factor * ref <= cap:
        assert limit == pytest.approx(factor * ref)


def test_limit_without_reference_or_factor_is_the_cap() -> None:
    assert TimeLimitPolicy().limit(None, 7.0) == 7.0
    assert TimeLimitPolicy(factor=None).limit(0.01, 7.0) == 7.0
    assert TimeLimitPolicy(factor=10, floor=1).limit(0.5, 30) == 5.0


@pytest.mark.parametrize("bad", [{"factor": 0}, {"factor": -1}, {"floor": 0}])
def test_bad_policy_names_the_field(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match=next(iter(bad))):
        TimeLimitPolicy(**bad)


@given(n=st.integers(0, 300), g=st.integers(1, 50))
def test_groups_cover_every_index_once_in_order(n: int, g: int) -> None:
    groups = group_slices(n, g)
    flat = [i for r in groups for i in r]
    assert flat == list(range(n))
    assert all(len(r) == g for r in groups[:-1])


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_group_size(bad: object) -> None:
    with pytest.raises(ConfigError, match="group_size"):
        group_slices(10, bad)  # type: ignore[arg-type]


def _nv(error_type: str, in_play: float | None = None) -> RunResult:
    return RunResult.no_verdict(
        error_type, "x", time_limit_s=1.0, evidence=Evidence(in_play_ms=in_play)
    )


def test_retry_only_ours_once_within_deadline() -> None:
    assert should_retry(_nv("sandbox_error"), 1, 10.0)
    assert should_retry(_nv("timeout", in_play=3.0), 1, 10.0)
    assert not should_retry(_nv("sandbox_error"), 2, 10.0)  # once only
    assert not should_retry(_nv("sandbox_error"), 1, 0.5)  # no time left for another try
    assert not should_retry(_nv("verifier_error"), 1, 10.0)  # the verifier's own failure
    judged = RunResult(score=0.0, passed=False, error_type="solution_timeout")
    assert not should_retry(judged, 1, 10.0)  # a verdict is never retried


def test_a_lost_chunk_is_sent_again_once_within_its_deadline() -> None:
    assert should_resend(1, 5.0)
    assert not should_resend(2, 5.0)  # once only
    assert not should_resend(1, 0.0) and not should_resend(1, -1.0)  # its deadline has passed


def test_broadcast_envs() -> None:
    assert broadcast_envs("a", 3) == ["a", "a", "a"]
    assert broadcast_envs(["a", "b"], 2) == ["a", "b"]
    with pytest.raises(ConfigError, match="one or 3"):
        broadcast_envs(["a", "b"], 3)


def test_a_sandbox_failure_with_the_answer_in_play_is_not_retried() -> None:
    assert not should_retry(_nv("sandbox_error", in_play=2.0), 1, 10.0)
    assert should_retry(_nv("sandbox_error"), 1, 10.0)


def test_a_result_holds_under_a_shorter_limit_only_if_no_clock_or_rlimit_could_fire() -> None:
    def run(total: float, queue: float = 0.0, start: float = 0.0, cpu: float = 0.0) -> RunResult:
        return RunResult(
            score=1.0,
            passed=True,
            service=ServiceTime(total_ms=total, queue_ms=queue, start_ms=start),
            evidence=Evidence(solution_cpu_ms=cpu),
        )

    assert holds_under(run(900.0), 1.0)
    assert not holds_under(run(1100.0), 1.0)
    # Waiting for a worker or for the sandbox to start is not the run's own time.
    assert holds_under(run(1900.0, queue=600.0, start=400.0), 1.0)
    # Threads that used more CPU than the limit: the CPU rlimit that follows it may fire.
    assert not holds_under(run(600.0, cpu=1500.0), 1.0)


def test_a_limit_that_no_reference_decides_is_the_calls_the_envs_or_the_cap_held_to_it() -> None:
    env = Environment(
        name="toy", entry_point="f", test_cases=[], timeout=8.0, reference_solution="ref"
    )
    policy = TimeLimitPolicy()
    assert fixed_limit(policy, env) is None  # derived from the reference
    assert fixed_limit(policy, env, 3) == 3.0  # the call's
    assert fixed_limit(policy, env, 20.0) == 8.0  # ... held to the cap
    own = env.model_copy(update={"time_limit": 2.0})
    assert fixed_limit(policy, own) == 2.0 and fixed_limit(policy, own, 5.0) == 5.0
    assert fixed_limit(policy, env.model_copy(update={"time_limit": 9.0})) == 8.0
    assert fixed_limit(TimeLimitPolicy(factor=None), env) == 8.0  # the policy derives none
    assert fixed_limit(policy, env.model_copy(update={"reference_solution": None})) == 8.0
