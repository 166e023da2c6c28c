"""The barrier model against the seed's own figures (exact), and its invariants (hypothesis)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ConfigError
from deepgym.latency import model

BUSY, FAST, TIMEOUT, N, G = 24.5, 2.0, 30.0, 128, 8


# -- the seed's figures --------------------------------------------------------------------------


def test_one_percent_stalls_72_percent_of_steps_of_128() -> None:
    assert model.p_stall(0.01, 128) == 1 - 0.99**128
    assert f"{model.p_stall(0.01, 128):.0%}" == "72%"


def test_one_percent_corrupts_7_7_percent_of_groups_of_8() -> None:
    assert model.corrupted_group_share(0.01, 8) == 1 - 0.99**8
    assert f"{model.corrupted_group_share(0.01, 8):.1%}" == "7.7%"


def test_five_percent_corrupts_a_third_of_groups_and_stalls_a_third_of_steps_of_8() -> None:
    assert model.corrupted_group_share(0.05, 8) == pytest.approx(1 / 3, abs=0.005)
    assert model.p_stall(0.05, 8) == model.corrupted_group_share(0.05, 8)
    assert model.p_stall(0.05, 128) > 0.99  # "essentially every step stalls"


@pytest.mark.parametrize("p", [0.02, 0.05, 0.10])
def test_above_two_percent_128_completions_pay_the_timeout_92_percent_of_steps(p: float) -> None:
    assert model.p_stall(p, 128) > 0.92


@pytest.mark.parametrize(
    ("p", "seed_step"), [(0.05, "54.5"), (0.02, "52.4"), (0.01, "46.8"), (0.005, "39.8")]
)
def test_expected_step_at_each_rate(p: float, seed_step: str) -> None:
    step = model.expected_step_two_point(BUSY, FAST, TIMEOUT, p, N)
    assert step == BUSY + FAST + (TIMEOUT - FAST) * (1 - (1 - p) ** N)
    assert f"{step:.1f}" == seed_step


def test_the_exact_distribution_model_reduces_to_the_seeds_two_point_model() -> None:
    for p in (0.0, 0.005, 0.01, 0.02, 0.05, 1.0):
        exact = model.expected_step([FAST] * 50, p, N, BUSY, TIMEOUT)
        assert exact == pytest.approx(model.expected_step_two_point(BUSY, FAST, TIMEOUT, p, N))


def test_same_median_7_5_or_55_percent_idle() -> None:
    clean = model.expected_step_two_point(BUSY, FAST, TIMEOUT, 0.0, N)
    stalled = model.expected_step_two_point(BUSY, FAST, TIMEOUT, 1.0, N)
    assert (clean, stalled) == (26.5, 54.5)
    assert f"{model.gpu_idle(BUSY, clean):.1%}" == "7.5%"
    assert f"{model.gpu_idle(BUSY, stalled):.1%}" == "55.0%"


def test_a_ten_second_reward_costs_29_percent_idle() -> None:
    assert f"{model.gpu_idle(BUSY, BUSY + 10.0):.0%}" == "29%"


def test_an_outage_flips_a_correct_answers_advantage_from_plus_1_to_minus_0_77() -> None:
    half = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    o = model.outage(half, 0)
    assert f"{o.before[0]:+.2f}" == "+1.00"
    assert f"{o.scored_zero[0]:+.2f}" == "-0.77"
    # The contract's way: the lost sample is left out, the others keep the right sign.
    assert o.masked[0] is None
    assert all(a is not None and a > 0 for a in o.masked[1:4])
    assert all(a is not None and a < 0 for a in o.masked[4:])


def test_an_outage_manufactures_a_signal_in_an_all_correct_group() -> None:
    o = model.outage([1.0] * 8, 7)
    assert o.before == [0.0] * 8  # the right gradient is no gradient
    assert all(a is not None and a > 0 for a in o.scored_zero[:7])
    assert o.scored_zero[7] is not None and o.scored_zero[7] < -2
    assert o.masked == [0.0] * 7 + [None]


def test_per_group_pipelining_hides_11_4_of_12_2_seconds_of_a_stalled_step() -> None:
    # "Fifteen of my sixteen groups finish in about 2 seconds and then sit idle for 28 more
    # waiting on one straggler. Running each group's backward on arrival would hide 11.4 of the
    # 12.2 seconds of training under that wait, taking a stalled step from 54.7 to 43.2 seconds."
    est = model.stalled_step_pipelined(54.7, 12.2, 16, fast=2.0, timeout=30.0)
    assert est.hidden == pytest.approx(15 / 16 * 12.2)  # fits inside the 28 s wait: all hidden
    assert f"{est.hidden:.1f}" == "11.4"
    assert est.pipelined_step == pytest.approx(54.7 - 15 / 16 * 12.2)  # 43.2625
    # The seed prints its inputs to 0.1 s; 43.26 is its 43.2 within that rounding: the stalled
    # step (+-0.05) and the hidden 15/16 of training (+-0.05 * 15/16).
    assert abs(est.pipelined_step - 43.2) <= 0.05 + 0.05 * 15 / 16
    inside = model.stalled_step_pipelined(54.66, 12.2, 16, fast=2.0, timeout=30.0)
    assert (f"{54.66:.1f}", f"{inside.pipelined_step:.1f}") == ("54.7", "43.2")


def test_pipelining_cannot_hide_more_than_the_wait() -> None:
    # 4 groups, 40 s of training, a 1 s wait: only what runs before the straggler is hidden.
    est = model.stalled_step_pipelined(100.0, 40.0, 4, fast=0.0, timeout=1.0)
    assert est.hidden == pytest.approx(1.0)


def test_halving_the_timeout_halves_the_stall_once_the_tail_is_hit() -> None:
    full = model.expected_max([FAST], 0.10, N, 30.0)
    half = model.expected_max([FAST], 0.10, N, 15.0)
    assert half / full == pytest.approx(0.5, abs=1e-4)


def test_lowering_the_timeout_below_real_answers_turns_them_into_timeouts() -> None:
    ok, p = model.recap([1.0, 2.0, 3.0, 30.0], [False, False, False, True], 2.5)
    assert ok == [1.0, 2.0]
    assert p == 0.5


def test_the_knee_is_where_half_the_steps_stall() -> None:
    assert model.p_stall(model.knee_rate(128), 128) == pytest.approx(0.5)
    assert f"{model.knee_rate(128):.2%}" == "0.54%"


def test_expected_max_of_an_empirical_distribution_by_hand() -> None:
    # Two values, 1 and 3, no timeouts, two draws: max is 1 w.p. 1/4, else 3.
    assert model.expected_max([1.0, 3.0], 0.0, 2, 10.0) == pytest.approx(0.25 * 1 + 0.75 * 3)
    assert model.expected_max([], 0.0, 5, 7.0) == 7.0  # nothing finishes: every draw times out
    assert model.expected_max([1.0], 0.5, 0, 7.0) == 0.0


def test_monte_carlo_pipelining_agrees_with_the_closed_form() -> None:
    # Constant service and no timeouts: the barrier waits FAST, pipelining hides all but the
    # last group's training; a seeded estimate is deterministic.
    est = model.pipelined_step([FAST], 0.0, 30.0, n=16, group_size=8, generation=1, training=4)
    assert est.barrier_step == pytest.approx(1 + FAST + 4)
    assert est.pipelined_step == pytest.approx(1 + FAST + 2 + 2)  # both groups done at FAST
    again = model.pipelined_step([1.0, 5.0], 0.1, 9.0, n=16, group_size=8, generation=1, training=4)
    same = model.pipelined_step([1.0, 5.0], 0.1, 9.0, n=16, group_size=8, generation=1, training=4)
    assert again == same


def test_fewer_slots_than_completions_queue() -> None:
    one = model.pipelined_step(
        [1.0], 0.0, 9.0, n=4, group_size=2, generation=0, training=0, slots=1
    )
    assert one.barrier_step == pytest.approx(4.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: model.p_stall(1.5, 8),
        lambda: model.p_stall(-0.1, 8),
        lambda: model.p_stall(0.1, -1),
        lambda: model.corrupted_group_share(0.1, 0),
        lambda: model.gpu_idle(1.0, 0.0),
        lambda: model.expected_step_two_point(1.0, 5.0, 2.0, 0.1, 8),
        lambda: model.recap([1.0], [False, True], 2.0),
        lambda: model.outage([1.0, 0.0], 2),
        lambda: model.stalled_step_pipelined(10.0, 1.0, 4, fast=1.0, timeout=5.0, late_groups=5),
        lambda: model.pipelined_step([1.0], 0.0, 2.0, n=10, group_size=4, generation=0, training=0),
        lambda: model.expected_max([math.nan], 0.0, 2, 1.0),
    ],
)
def test_bad_arguments_are_config_errors(call: Callable[[], object]) -> None:
    with pytest.raises(ConfigError):
        call()


# -- invariants ----------------------------------------------------------------------------------

rates = st.floats(min_value=0.0, max_value=1.0)
counts = st.integers(min_value=0, max_value=5000)
seconds = st.floats(min_value=0.0, max_value=1e4, allow_nan=False)


@given(rates, counts)
def test_stall_probability_is_a_probability(p: float, n: int) -> None:
    assert 0.0 <= model.p_stall(p, n) <= 1.0


@given(rates, rates, counts)
def test_stall_probability_grows_with_the_rate(p: float, q: float, n: int) -> None:
    lo, hi = sorted((p, q))
    assert model.p_stall(lo, n) <= model.p_stall(hi, n)


@given(rates, counts, counts)
def test_stall_probability_grows_with_the_batch(p: float, n: int, m: int) -> None:
    lo, hi = sorted((n, m))
    assert model.p_stall(p, lo) <= model.p_stall(p, hi)
    if hi >= 1:
        assert model.corrupted_group_share(p, max(lo, 1)) <= model.p_stall(p, hi)


@given(seconds, st.floats(min_value=1e-6, max_value=1e4))
def test_idle_is_a_fraction(busy: float, step: float) -> None:
    assert 0.0 <= model.gpu_idle(busy, step) <= 1.0


@given(st.lists(seconds, max_size=30), rates, st.integers(0, 300), st.floats(0.001, 1e4))
def test_expected_max_lies_between_the_fastest_draw_and_the_cap(
    ok: list[float], p: float, n: int, cap: float
) -> None:
    e = model.expected_max(ok, p, n, cap)
    if n == 0:
        assert e == 0.0
        return
    low = min([min(x, cap) for x in ok] + ([cap] if not ok or p == 1 else []))
    assert low - 1e-9 * cap <= e <= cap * (1 + 1e-9)


@given(st.lists(seconds, min_size=1, max_size=20), rates, rates, st.integers(1, 200))
def test_expected_step_grows_with_the_rate(ok: list[float], p: float, q: float, n: int) -> None:
    cap = max(ok) + 1.0
    lo, hi = sorted((p, q))
    assert model.expected_max(ok, lo, n, cap) <= model.expected_max(ok, hi, n, cap) + 1e-9 * cap


@given(st.integers(1, 1000), st.floats(0.0, 0.999))
def test_rate_for_stall_inverts_p_stall(n: int, stall: float) -> None:
    assert model.p_stall(model.rate_for_stall(n, stall), n) == pytest.approx(stall, abs=1e-9)


@given(st.lists(seconds, min_size=1, max_size=40), st.floats(0.0, 100.0))
def test_pipelining_never_ends_later_than_the_barrier(done: list[float], per: float) -> None:
    tail = model.pipelined_tail(done, per)
    assert max(done) + per <= tail + 1e-9 * (tail + 1)
    assert tail <= model.barrier_tail(done, per) + 1e-9 * (tail + 1)
