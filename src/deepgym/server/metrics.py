"""The service's Prometheus metrics, in the plain text exposition format (version 0.0.4).

Written by hand: a few counters, two gauges and one histogram need no client library. Every
update happens on the event loop's thread, so plain integers suffice.

- ``deepgym_runs_total{outcome}``: runs returned, by ``passed``, ``failed`` (judged) or
  ``no_verdict``.
- ``deepgym_no_verdict_total{error_type}``: runs without a verdict, by error type.
- ``deepgym_service_seconds``: histogram of a run's service time (``ServiceTime.run_ms``: start,
  verifier and solution, without the wait for a sandbox), for runs that reached a sandbox.
- ``deepgym_queue_depth``: runs waiting for a sandbox slot; ``deepgym_runs_in_flight``: runs in one.
- ``deepgym_http_requests_total{route,code}``: requests by route (known routes only) and status.
"""

from __future__ import annotations

from collections import Counter

from deepgym.models import RunResult

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Upper bounds of the service-time buckets, in seconds (``+Inf`` follows)."""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


def _num(x: float) -> str:
    return "+Inf" if x == float("inf") else repr(float(x))


class Metrics:
    """Counters, gauges and the service-time histogram of one service."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.no_verdict: Counter[str] = Counter()
        self.buckets = [0] * len(BUCKETS_S)
        self.service_sum_s = 0.0
        self.service_count = 0
        self.queue_depth = 0
        self.in_flight = 0
        self.requests: Counter[tuple[str, str]] = Counter()

    def observe(self, result: RunResult, *, ran: bool = True) -> None:
        """Count one returned run; ``ran=False`` for a run that never reached a sandbox."""
        if not result.has_verdict:
            self.runs["no_verdict"] += 1
            self.no_verdict[result.error_type or "verifier_exit_2"] += 1
        else:
            self.runs["passed" if result.passed else "failed"] += 1
        if not ran:
            return
        seconds = result.service.run_ms / 1000.0
        self.service_sum_s += seconds
        self.service_count += 1
        for i, bound in enumerate(BUCKETS_S):
            if seconds <= bound:
                self.buckets[i] += 1

    def request(self, route: str, code: int) -> None:
        """Count one request to ``route`` answered with status ``code``."""
        self.requests[(route, str(code))] += 1

    def render(self) -> str:
        """The exposition text."""
        out: list[str] = []

        def family(name: str, kind: str, help_: str) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")

        family("deepgym_runs_total", "counter", "Runs returned, by outcome.")
        for outcome in ("passed", "failed", "no_verdict"):
            out.append(f"deepgym_runs_total{_labels(outcome=outcome)} {self.runs[outcome]}")
        family("deepgym_no_verdict_total", "counter", "Runs without a verdict, by error type.")
        for error_type, n in sorted(self.no_verdict.items()):
            out.append(f"deepgym_no_verdict_total{_labels(error_type=error_type)} {n}")
        family(
            "deepgym_service_seconds",
            "histogram",
            "Service time of one run (start, verifier, solution), without the wait for a sandbox.",
        )
        for bound, n in zip(BUCKETS_S, self.buckets, strict=True):
            out.append(f"deepgym_service_seconds_bucket{_labels(le=_num(bound))} {n}")
        inf = _labels(le="+Inf")
        out.append(f"deepgym_service_seconds_bucket{inf} {self.service_count}")
        out.append(f"deepgym_service_seconds_sum {_num(self.service_sum_s)}")
        out.append(f"deepgym_service_seconds_count {self.service_count}")
        family("deepgym_queue_depth", "gauge", "Runs waiting for a sandbox slot.")
        out.append(f"deepgym_queue_depth {self.queue_depth}")
        family("deepgym_runs_in_flight", "gauge", "Runs holding a sandbox slot.")
        out.append(f"deepgym_runs_in_flight {self.in_flight}")
        family("deepgym_http_requests_total", "counter", "HTTP requests, by route and status.")
        for (route, code), n in sorted(self.requests.items()):
            out.append(f"deepgym_http_requests_total{_labels(route=route, code=code)} {n}")
        return "\n".join(out) + "\n"
