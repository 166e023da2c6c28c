"""A stand-in for ``python -m pip install`` in scripts/install-torch.sh's tests.

It logs each call's arguments and "installs" torch by writing its metadata beside itself
(``importlib.metadata`` then finds it). Which sources hold a ``+cpu`` wheel comes from
``FAKE_PIP_HAS`` (comma-separated): ``local`` (where pip looks already), ``index`` (the index
given by ``--index-url``), ``broken`` (every install fails with an error other than not found),
``constrained`` (a pip constraint on torch: not found reads as a resolution conflict).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _installed() -> str | None:
    found = sorted(HERE.glob("torch-*.dist-info"))
    return found[0].name.removeprefix("torch-").removesuffix(".dist-info") if found else None


def _install(version: str) -> None:
    for old in HERE.glob("torch-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    info = HERE / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")


def main(args: list[str]) -> int:
    with (HERE / "calls.jsonl").open("a") as log:
        log.write(json.dumps(args) + "\n")
    has = set(os.environ.get("FAKE_PIP_HAS", "").split(","))
    if args[0] != "install":
        return 2
    if "broken" in has:
        print("ERROR: [Errno 28] No space left on device", file=sys.stderr)
        return 1
    requirement = args[-1]
    version = requirement.removeprefix("torch==")
    if _installed() == version:
        return 0  # satisfied: only its dependencies would be installed
    if version.endswith("+cpu") and ("index" if "--index-url" in args else "local") not in has:
        if "constrained" in has:
            print(
                f"ERROR: Cannot install {requirement} because these package versions have "
                "conflicting dependencies.\nERROR: ResolutionImpossible: ...",
                file=sys.stderr,
            )
        else:
            print(f"ERROR: No matching distribution found for {requirement}", file=sys.stderr)
        return 1
    _install(version)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
