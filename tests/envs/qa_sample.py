"""A QA report as ``deepgym qa --mutants --json`` prints it: three environments, one below the
mutation threshold with a hostile survivor, one without mutation testing (a session)."""

from __future__ import annotations

from typing import Any

HOSTILE = "<script>alert(1)</script>"


def _checks(*failed: str, probes: bool = True) -> list[dict[str, Any]]:
    names = ["reference", "deterministic", "time_limits", "empty", "stub", "constant[0]"]
    if probes:
        names += ["exploit[sys_exit]", "exploit[always_equal]"]
    return [
        {
            "name": n,
            "ok": n not in failed,
            "message": f"{n} scored 0.40" if n in failed else f"{n}: scored 0.00",
        }
        for n in names
    ]


def _mutation(env: str, killed: int, survivors: list[dict[str, Any]]) -> dict[str, Any]:
    equivalents = [
        {
            "id": f"{env}-eq1",
            "operator": "comparison",
            "line": 4,
            "description": "`<` to `<=` at a bound no input reaches",
            "diff": "-    if i < n:\n+    if i <= n:\n",
            "why": "agreed with the reference on 200 generated inputs",
        }
    ]
    mutants = killed + len(survivors) + len(equivalents)
    return {
        "env": env,
        "kind": "function",
        "mutants": mutants,
        "killed": killed,
        "equivalent": len(equivalents),
        "survived": len(survivors),
        "no_verdict": 0,
        "score": killed / (mutants - len(equivalents)),
        "seconds": 12.5,
        "threshold": 0.9,
        "ok": killed / (mutants - len(equivalents)) >= 0.9,
        "gated": True,
        "survivors": survivors,
        "equivalents": equivalents,
    }


def sample_entries() -> list[dict[str, Any]]:
    """The report's entries (a fresh copy each call)."""
    good_survivor = {
        "id": "coin_change-m7",
        "operator": "constant",
        "line": 9,
        "description": "`0` to `1`",
        "diff": "--- reference\n+++ mutant\n-    best = 0\n+    best = 1\n",
        "killing_input": "coin_change([2], 3)",
    }
    bad_survivors = [
        {
            "id": "fizzbuzz-m3",
            "operator": "statement",
            "line": 5,
            "description": f"drop `{HOSTILE}`",
            "diff": f"--- reference\n+++ mutant\n-    out.append('{HOSTILE}')\n",
            "killing_input": f"fizzbuzz('{HOSTILE}')",
        },
        {
            "id": "fizzbuzz-m4",
            "operator": "return",
            "line": 8,
            "description": "return early",
            "diff": "+    return []\n",
            "killing_input": None,
        },
    ]
    return [
        {
            "env": "coin_change",
            "ok": True,
            "kind": "function",
            "checks": _checks(),
            "mutation": _mutation("coin_change", 19, [good_survivor]),
        },
        {
            "env": "fizzbuzz",
            "ok": False,
            "kind": "function",
            "checks": _checks("constant[0]"),
            "mutation": _mutation("fizzbuzz", 8, bad_survivors),
        },
        {
            "env": "agent/fix_add",
            "ok": True,
            "kind": "session",
            "checks": [
                {"name": "reference", "ok": True, "message": "scored 1.00"},
                {"name": "no-op", "ok": True, "message": "scored 0.00"},
            ],
            "mutation": None,
        },
    ]
