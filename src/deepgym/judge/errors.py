"""The judge's exceptions, in a module of their own so that the launcher, the RPC and the
harness all import them without a cycle (nothing here imports anything).

The tree, and who raises what::

    Exception
     +-- SolutionError      the answer raised, or sent something malformed (a verifier may catch it)
     +-- SolutionDied       the solution process ended before it replied (crash, kill, a limit)
    BaseException
     +-- SolutionTimeout    a call into the answer ran past its limit (or the host held it back)
     +-- AheadError         requests sent ahead were not taken as planned: the verifier's error
     +-- LaunchError        the solution process could not be started: ours, the sandbox's

The last three derive from ``BaseException`` so that a verifier's ``except Exception`` cannot
swallow them and score the run: a timeout is judged by the harness from its evidence, and the
other two are never the answer's fault. They live here, not in ``deepgym.exceptions``: the judge
runs inside the sandbox and imports nothing of ``deepgym``.
"""

from __future__ import annotations


class SolutionError(Exception):
    """The answer raised (``exc_type`` names its exception) or sent something malformed."""

    def __init__(self, message: str, exc_type: str = "", tb: str = "") -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.traceback = tb


class SolutionDied(Exception):
    """The solution process ended before it replied (``limit``: the limit that ended it)."""

    def __init__(self, message: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


class SolutionTimeout(BaseException):
    """A call into the answer ran past its time limit (cannot be caught by ``except Exception``);
    ``blame_solution``: the answer used its CPU time or chose to wait, so it is to blame (else
    the host held it back: no verdict); ``whole_run``: the run's own limit, not only the call's,
    ran out (no further call can be judged)."""

    def __init__(self, message: str, blame_solution: bool = True, whole_run: bool = False) -> None:
        super().__init__(message)
        self.blame_solution = blame_solution
        self.whole_run = whole_run


class AheadError(BaseException):
    """Requests sent ahead (``Session.ahead``) were not taken as planned: the verifier's own
    error, never the answer's (a ``BaseException``, so ``except Exception`` cannot score it)."""


class LaunchError(BaseException):
    """Ours, not the answer's: the solution process could not be started. A ``BaseException``
    so that a verifier's ``except Exception`` cannot turn it into the answer's failure."""
