"""Run an environment's checker program on one test case, in testlib's convention.

``python -I -S _boot.py checker CHECKER INPUT EXPECTED OUTPUT``: the checker (the environment's
``checker.py``, trusted code) reads the case's input, the expected output and the answer's output
from those three files, and says by its exit code:

- ``ACCEPTED`` (0): the output is right (one of the valid answers, for a problem with several);
- ``WRONG_ANSWER`` (1): it is wrong;
- ``PRESENTATION_ERROR`` (2): right in substance, wrong in form;
- ``CHECKER_FAILED`` (3): the checker itself failed: no verdict.

A checker that raises, or exits with any other code, has failed (``CHECKER_FAILED``): a Python
traceback would otherwise exit 1 and read as a wrong answer. Its first words on stdout or stderr
are the case's message.
"""

from __future__ import annotations

import sys

ACCEPTED = 0
WRONG_ANSWER = 1
PRESENTATION_ERROR = 2
CHECKER_FAILED = 3
VERDICTS = {
    ACCEPTED: "accepted",
    WRONG_ANSWER: "wrong answer",
    PRESENTATION_ERROR: "presentation error",
}


def main(argv: list[str]) -> int:
    """``CHECKER INPUT EXPECTED OUTPUT``: run the checker as ``__main__`` with the three paths."""
    if len(argv) != 4:
        sys.stderr.write("usage: checker CHECKER INPUT EXPECTED OUTPUT\n")
        return CHECKER_FAILED
    import runpy

    sys.argv = list(argv)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return ACCEPTED
        if isinstance(code, int) and code in VERDICTS:
            return code
        if not isinstance(code, int):  # sys.exit("message"): testlib's quitf(_fail, ...)
            sys.stderr.write(f"{code}\n")
        return CHECKER_FAILED
    except BaseException as exc:  # the checker's own failure: never the answer's
        sys.stderr.write(f"the checker raised {type(exc).__name__}: {exc}\n")
        return CHECKER_FAILED
    return ACCEPTED
