"""Entry point of both sandbox processes: ``python -I -S _boot.py verifier|solution|worker ...``.

``-I`` keeps the script's folder off ``sys.path``, so put the judge package's parent there, import
the role's module from the package, and run it.
"""

import os
import sys


def _main() -> int:
    pkg_dir = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(pkg_dir)
    sys.path.insert(0, parent)
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    module = {
        "verifier": "harness",
        "solution": "solution_host",
        "worker": "worker",
        "session": "agent_shell",
        "session_verify": "session_verify",
        "checker": "checker",
    }.get(role)
    if module is None:
        sys.stderr.write(
            "usage: _boot.py verifier|solution|worker|session|session_verify|checker ...\n"
        )
        return 2
    name = f"{os.path.basename(pkg_dir)}.{module}"
    __import__(name)
    mod = sys.modules[name]
    if role in ("solution", "checker"):  # the code it runs gets no view of the judge's path
        sys.path.remove(parent)
    code: int = mod.main(sys.argv[2:])
    return code


if __name__ == "__main__":
    _code = _main()
    for _stream in (sys.stdout, sys.stderr):
        try:
            _stream.flush()
        except Exception:  # a closed pipe: nothing more to say
            pass
    os._exit(_code)  # no interpreter teardown: the sandbox ends with this process anyway
