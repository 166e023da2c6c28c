"""MultiPL-E's HumanEval in each of its 18 languages: the pass rate of each problem's
``gpt_solution`` (a model's answer, right on most problems, not all) on both sandboxes.

Each language's suite (``multipl_e_humaneval_<lang>``) is scored with the file's
``gpt_solution`` as every problem's answer, once on the pool and once on the strict sandbox;
the two must agree problem by problem (a disagreement is listed). For each language the
failures are grouped by how they failed (a compile error, an assert, a run-time error, a
refusal), with each problem's first words, so that a rate that looks wrong can be read: a harness
bug of ours, or the answer's own fault. ``--data`` is a folder of MultiPL-E files
(SandboxFusion's sample of HumanEval by default, ``../shared/data``: read from there, never
copied); ``--limit N`` scores the first N problems of each language.

    python benchmarks/multipl_e.py [--langs cpp,rb] [--limit N] [--sandboxes pool,strict]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _common import write_json

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("DEEPGYM_SHARED_DATA") or ROOT.parent / "shared" / "data")
"""``../shared/data`` beside the project's root, or ``$DEEPGYM_SHARED_DATA`` (a checkout whose
``../shared`` is elsewhere), as the tests find it."""
DEFAULT_DATA = SHARED / "sandboxfusion-samples" / "Multi-PLE"


def _why(result: Any) -> str:
    """A failed run in a line: its error, or its first failed case's message."""
    if result.error_type:
        text = f"{result.error_type}: {result.error or ''}"
    else:
        text = next((c.message for c in result.cases if not c.passed), "") or "failed"
    return " ".join(text.split())[:240]


def _kind(result: Any) -> str:
    if not result.has_verdict:
        return "no verdict"
    if result.passed:
        return "passed"
    if result.error_type:
        return result.error_type
    message = next((c.message for c in result.cases if not c.passed), "")
    return "runtime error" if message.startswith("runtime error") else "test failed"


def score(lang: str, sandbox: str, limit: int | None) -> dict[str, Any]:
    """One language on one sandbox: each problem's outcome."""
    from deepgym import DeepGym, load_suite

    path = Path(os.environ["DEEPGYM_MULTIPL_E"]) / f"humaneval-{lang}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    envs = load_suite(f"multipl_e_humaneval_{lang}")
    if limit:
        rows, envs = rows[:limit], envs[:limit]
    t0 = time.monotonic()
    with DeepGym(sandbox=sandbox) as dg:
        batch = dg.run_batch(envs, [r["gpt_solution"] for r in rows], max_parallel=2)
    seconds = time.monotonic() - t0
    problems = {
        env.name.partition("/")[2]: {"kind": _kind(r), "why": "" if r.passed else _why(r)}
        for env, r in zip(envs, batch.results, strict=True)
    }
    passed = sum(p["kind"] == "passed" for p in problems.values())
    return {"problems": problems, "passed": passed, "total": len(problems), "seconds": seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--langs", default="")
    ap.add_argument("--sandboxes", default="pool,strict")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default="multipl_e")
    args = ap.parse_args()
    os.environ["DEEPGYM_MULTIPL_E"] = str(args.data)
    from deepgym.envs.multipl_e import LANGUAGES

    langs = [x for x in args.langs.split(",") if x] or sorted(LANGUAGES)
    sandboxes = [x for x in args.sandboxes.split(",") if x]
    results: dict[str, Any] = {}
    for lang in langs:
        results[lang] = {sb: score(lang, sb, args.limit) for sb in sandboxes}
        by = results[lang]
        first = by[sandboxes[0]]
        disagree = sorted(
            name
            for name, p in first["problems"].items()
            if any(by[sb]["problems"][name]["kind"] != p["kind"] for sb in sandboxes[1:])
        )
        results[lang]["disagree"] = disagree
        kinds = Counter(p["kind"] for p in first["problems"].values())
        rates = ", ".join(f"{sb} {by[sb]['passed']}/{by[sb]['total']}" for sb in sandboxes)
        print(f"{lang}: {rates}; {dict(kinds)}; disagree {disagree}", flush=True)
        for name, p in sorted(first["problems"].items()):
            if p["kind"] != "passed":
                print(f"    {name}: {p['why']}", flush=True)
        write_json(args.out, {"langs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
