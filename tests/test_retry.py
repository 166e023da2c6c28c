"""The one retry policy of deepgym's clients (``deepgym.retry``): pure, property-tested."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ConfigError
from deepgym.retry import RetryPolicy, retry_delay, retryable_status

policies = st.builds(
    RetryPolicy,
    attempts=st.integers(1, 100),
    base_s=st.floats(0.0, 10.0),
    max_s=st.floats(0.0, 60.0),
)


@given(policies, st.integers(-5, 10_000), st.none() | st.text(max_size=12))
def test_every_delay_is_within_the_cap(policy: RetryPolicy, retry: int, after: str | None) -> None:
    assert 0.0 <= retry_delay(policy, retry, after) <= policy.max_s


@given(policies, st.integers(1, 200))
def test_backoff_never_shrinks(policy: RetryPolicy, retry: int) -> None:
    assert retry_delay(policy, retry) <= retry_delay(policy, retry + 1)


def test_the_policy() -> None:
    p = RetryPolicy(attempts=5, base_s=0.5, max_s=4.0)
    assert [retry_delay(p, r) for r in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert retry_delay(p, 1, "2") == 2.0 and retry_delay(p, 1, "0.5") == 0.5
    assert retry_delay(p, 1, "600") == 4.0
    assert retry_delay(p, 2, "Wed, 21 Oct 2015 07:28:00 GMT") == 1.0  # the date form: backoff
    assert retry_delay(p, 2, "nan") == 1.0 and retry_delay(p, 1, "inf") == 0.5
    assert retry_delay(p, 1, "-3") == 0.0
    statuses = (200, 304, 400, 401, 404, 408, 429, 500, 502, 503, 504, 599, 600)
    assert [s for s in statuses if retryable_status(s)] == [408, 429, 500, 502, 503, 504, 599]


@pytest.mark.parametrize(
    ("fields", "name"),
    [({"attempts": 0}, "attempts"), ({"base_s": float("nan")}, "base_s"), ({"max_s": -1}, "max_s")],
)
def test_a_bad_policy_names_its_field(fields: dict[str, float], name: str) -> None:
    with pytest.raises(ConfigError, match=f"retry.{name}"):
        RetryPolicy(**fields)  # type: ignore[arg-type]
