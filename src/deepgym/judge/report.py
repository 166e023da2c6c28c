"""A verifier's return value as the judge's report: one rule for function tasks and sessions.

``report_from_value(value)`` is pure and total. Whatever a ``verify`` returned (any Python value),
it gives a report the host classifies (``deepgym.verdict.classify``): only the keys the host reads,
strict JSON (str keys, finite numbers, no depth beyond a case's fields), so it always crosses
the result channel. It decides the report's shape (a score that is not a finite number is
``invalid_score``); the host decides whether a score is reward (``checked_score``: one outside
[0, 1] never is).

What a verifier may return (a function task's ``verify(solution, test_cases)`` and a session's
``verify(work, tests)`` or ``verify_step(work, tests)`` alike):

- a bool or a number: the score (``True`` is 1.0, ``False`` 0.0);
- a dict of ``score`` (a number; without one, a bool ``passed`` gives 1.0 or 0.0), ``passed``
  (a bool; else the host says a score of 1.0 passes), ``reward_components`` (numbers by name),
  ``cases`` (a list of dicts of ``name``, ``passed``, ``score`` and ``message``), ``message``
  (text) and ``status``. Other keys are dropped. A ``score`` that is not a number is
  ``invalid_score``;
- anything else: ``invalid_score``.

``status`` is ``"ok"`` (the default) or a model fault (``codes.MODEL_FAULT_STATUSES``:
``solution_error``, ``solution_timeout``, ...), which the host judges the answer's 0 once the
answer is in play (a Harbor task's verifier reports a test script past its timeout this way). No
other status is taken from a verifier's value. One that names a failure without a verdict
(``sandbox_error``, ``timeout``, ``verifier_error``, ``invalid_score``), or anything else, makes
the report ``verifier_error``: the report of a verifier that raised, which has no verdict before
the answer came into play and is the answer's 0 after.

Why so strict: a returned value may carry what the answer made (a verifier that returns what the
solution computed, or what an agent wrote in its work dir), so nothing in it may buy a
no-verdict once the answer is in play (a policy must not learn to break its verifier into
masking its sample), nor a score beside a failing status. A verifier that cannot judge says so
before it touches the answer (it raises), or, in a function task, exits 2; a session's verifier
has no way to report no verdict once it has touched the work dir.

Standard library only: it runs inside the sandbox, in the judge package.
"""

from __future__ import annotations

import math

from .codes import MODEL_FAULT_STATUSES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_CASES = 10_000
"""Cases kept of a report (the host keeps no more)."""
CASE_MESSAGE_CHARS = 500
"""Characters kept of a case's message (the host keeps no more)."""
MESSAGE_CHARS = 3000
"""Characters kept of a report's message (a traceback's worth)."""
_STATUSES = frozenset({"ok"}) | MODEL_FAULT_STATUSES


def report_from_value(value: Any) -> dict[str, Any]:
    """``verify``'s return value as a report (see the module's docstring for the rule)."""
    if isinstance(value, bool | int | float):
        score, why = _score(value)
        return _invalid(why) if why else {"status": "ok", "score": score}
    if not isinstance(value, dict):
        return _invalid(f"verify returned a {type(value).__name__}, not a bool, number or dict")
    get = dict.get  # the plain dict's own: a subclass's overrides never run here
    out: dict[str, Any] = {}
    cases = get(value, "cases")
    if isinstance(cases, list):
        kept = list.copy(cases)[:MAX_CASES]  # the plain list's own, as for the dict
        out["cases"] = [_case(i, c) for i, c in enumerate(kept) if isinstance(c, dict)]
    status = get(value, "status", "ok")
    if type(status) is not str or status not in _STATUSES:
        said = (
            repr(_text(status, 100)) if type(status) is str else f"of type {type(status).__name__}"
        )
        return {
            "status": "verifier_error",
            "message": f"verify returned a status {said}: a verifier's value may report only "
            f"'ok' or the answer's failure ({', '.join(sorted(MODEL_FAULT_STATUSES))})",
            **out,
        }
    out["status"] = status
    message = get(value, "message")
    if message is not None:
        out["message"] = _text(message, MESSAGE_CHARS)
    passed = get(value, "passed")
    if isinstance(passed, bool):
        out["passed"] = passed
    score = get(value, "score")
    if score is None and isinstance(passed, bool):
        score = passed
    out["score"], why = _score(score) if score is not None else (None, "")
    if why and status == "ok":  # beside the answer's failure, a score changes nothing
        return _invalid(why)
    components = get(value, "reward_components")
    if isinstance(components, dict):
        out["reward_components"] = {
            _text(k, 200): number
            for k, v in dict.items(components)
            if (number := _finite(v)) is not None and not isinstance(v, bool)
        }
    return out


def _invalid(message: str) -> dict[str, Any]:
    return {"status": "invalid_score", "message": message}


def _score(score: Any) -> tuple[float | None, str]:
    """``score`` as a float, or why it is none: not a finite number (JSON has no other; the
    range is the host's to check). None, with no why, is the host's to refuse too."""
    if not isinstance(score, bool | int | float):
        return None, f"verify returned a score of type {type(score).__name__}, not a number"
    number = _number(score)
    if not math.isfinite(number):
        return None, f"verify returned a score of {_text(score, 40)}, not a finite number"
    return number, ""


def _number(x: bool | float) -> float:
    """A bool or number as a float (an int too big for one is an infinity, never reward)."""
    if isinstance(x, bool):
        return 1.0 if x else 0.0
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf
    except Exception:  # a float subclass's own __float__ failed: not a number anyone can use
        return math.nan


def _finite(x: Any) -> float | None:
    """``x`` as a finite float, if it is a bool or a number that has one."""
    if not isinstance(x, bool | int | float):
        return None
    number = _number(x)
    return number if math.isfinite(number) else None


def _text(x: Any, limit: int) -> str:
    """``x`` as text, cut to ``limit`` characters; never raises (an int past Python's digit
    limit, an object whose ``__str__`` fails)."""
    if isinstance(x, str):
        return str.__str__(x)[:limit]
    try:
        return str(x)[:limit]
    except Exception:
        return f"<{type(x).__name__}>"


def _truth(x: Any) -> bool:
    try:
        return bool(x)
    except Exception:
        return False


def _case(i: int, case: dict[Any, Any]) -> dict[str, Any]:
    """One case as the host reads it: ``name``, ``passed``, ``message``, and ``score`` if it is
    a number."""
    get = dict.get
    name, message = get(case, "name"), get(case, "message")
    out: dict[str, Any] = {
        "name": _text(name, 200) if _truth(name) else f"test_{i}",
        "passed": _truth(get(case, "passed")),
        "message": _text(message, CASE_MESSAGE_CHARS) if _truth(message) else "",
    }
    score = _finite(get(case, "score"))
    if score is not None:
        out["score"] = score
    return out


# -- fitting a report on the result channel -----------------------------------------------------
def _shorter(text: Any, chars: int) -> Any:
    """``text`` in about ``chars`` characters: its start, a line naming how many were left out,
    and its end (a traceback's error); anything not text as it is."""
    if not isinstance(text, str) or len(text) <= chars:
        return text
    half = max(chars // 2, 1)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def _texts(report: dict[str, Any], chars: int, *, outputs: bool, messages: int) -> dict[str, Any]:
    """``report`` with the answer's kept output each in ``chars`` characters (a case's dropped
    where not ``outputs``) and each case's message in ``messages``."""
    out = dict(report)
    solution = out.get("solution")
    if isinstance(solution, dict):
        out["solution"] = {
            k: _shorter(v, chars) if k in ("stdout", "stderr") else v for k, v in solution.items()
        }
    cases = out.get("cases")
    if isinstance(cases, list):
        fitted = []
        for case in cases:
            if not isinstance(case, dict):
                continue
            case = dict(case)
            case["message"] = _shorter(case.get("message", ""), messages) if messages else ""
            kept = case.get("output")
            if isinstance(kept, dict) and outputs:
                case["output"] = {
                    k: _shorter(v, chars) if k in ("stdout", "stderr") else v
                    for k, v in kept.items()
                }
            elif kept is not None:
                case.pop("output")
            fitted.append(case)
        out["cases"] = fitted
    return out


def fit(report: dict[str, Any], limit: int, dumps: Callable[[Any], str]) -> str:
    """``report`` as one JSON line (``dumps``, ASCII) of at most ``limit`` characters, so the
    host always reads it: its verdict (status, score, passed) is never lost to what the answer
    printed. Over the limit, it sheds detail in steps until it fits: the kept output shortened
    to a share of the limit; then the cases' output dropped and their messages shortened; then
    their messages; last, the cases and reward components left out (the verdict and the
    report's message stay: they fit in 16 KiB, less than any ``limit`` used). A report within
    the limit comes back as ``dumps`` gives it."""
    line = dumps(report)
    if len(line) <= limit:
        return line
    cases = report.get("cases")
    n = len(cases) if isinstance(cases, list) else 0
    share = max(limit // (16 * (2 * n + 2)), 64)  # at most 12 ASCII characters a character
    steps = [
        _texts(report, share, outputs=True, messages=CASE_MESSAGE_CHARS),
        _texts(report, min(share, 4096), outputs=False, messages=60),
        _texts(report, min(share, 4096), outputs=False, messages=0),
    ]
    for fitted in steps:
        line = dumps(fitted)
        if len(line) <= limit:
            return line
    bare: dict[str, Any] = {
        k: report[k] for k in ("event", "status", "score", "passed") if k in report
    }
    for key in ("message", "elapsed_ms"):
        if key in report:
            bare[key] = _shorter(report[key], 1000) if key == "message" else report[key]
    solution = report.get("solution")
    if isinstance(solution, dict):
        bare["solution"] = {k: solution[k] for k in ("cpu_ms", "limit") if k in solution}
    return dumps(bare)


def ends(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its first line (a traceback's
    header, or what leads it: at most a tenth of ``limit``) and its last lines (the frames
    nearest the error, and the error). The one cut of a message's middle, for the judge and
    the host alike."""
    if len(text) <= limit:
        return text
    head = max(limit // 10, 1)
    tail = text[-(limit - head) :]
    return text[: text.find("\n") + 1][:head] + "  ...\n" + tail[tail.find("\n") + 1 :]
