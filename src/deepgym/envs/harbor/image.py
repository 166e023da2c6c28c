"""Harbor tasks whose Dockerfile only a container image gives: the image, built here.

``import_task`` imports a task on the host sandbox where ``plan``
says the host stands in for its image. Otherwise, where the Dockerfile lies in the subset that
``deepgym.images.build`` builds without a daemon (``deepgym.images.recipe``), the import builds
the image and the session runs on it (``Environment.image``); a Dockerfile outside that subset
is refused in one ``ConfigError`` line naming its instruction.

- **The name**: ``harbor/<task>:<hash>``, the hash (``context_hash``) over every file of the
  task's ``environment/`` folder (paths, bytes, executable bits): a changed task is a new image,
  an unchanged one is the store's image, built once.
- **Rebuilding elsewhere**: the environment folder keeps ``environment/`` as ``image/`` (the
  Dockerfile and its context). The image itself lives in the image store (``DEEPGYM_HOME``); on
  a machine whose store lacks it the sandbox's resolver cannot pull it (it is in no registry)
  and says, in one line, to build it: ``deepgym image build ENV_DIR/image -t harbor/<task>:<hash>``.
- **The work dir**: Harbor's tests and solution use the image's ``WORKDIR`` (often ``/app``),
  but a session's work, the part the final verifier sees, is ``/work``. So the import maps the
  ``WORKDIR`` onto ``/work`` as for a host task (``paths.path_map``): the work dir is seeded
  with what the built image holds in its ``WORKDIR`` (files copied and made by its ``RUN``
  lines), its text rewritten like the rest, the image's variables that name the ``WORKDIR`` are
  set again rewritten, and the setup script starts the agent's shell in ``/work``. What the
  image holds elsewhere (installed packages, tools) is the image's, read as built. A path to
  the ``WORKDIR`` written into a binary file, or into a file outside it, is not rewritten.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
import shutil
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from deepgym.envs.harbor import files as harbor_files
from deepgym.envs.harbor.plan import DEFAULT_WORKDIR, inside
from deepgym.exceptions import ConfigError
from deepgym.images.dockerfile import Instruction
from deepgym.images.recipe import Recipe, recipe

__all__ = [
    "build_image",
    "context_hash",
    "image_recipe",
    "image_ref",
    "image_setup",
    "image_user",
    "link_workdir",
    "owner_writable",
    "seed_work",
]

HASH_CHARS = 12
"""Hex digits of ``context_hash`` in an image's tag."""
_FORBIDDEN_WORKDIRS = ("/logs", "/tests", "/solution", "/proc", "/work", "/tmp")


def image_recipe(instructions: list[Instruction], task: str) -> Recipe:
    """The build of a task's Dockerfile; ``ConfigError`` (one line: the task, the line and the
    instruction) for one outside the subset deepgym builds, or a ``WORKDIR`` that a session's
    work dir cannot stand for."""
    try:
        built = recipe(instructions)
    except ConfigError as exc:
        raise ConfigError(
            f"{task}: environment/Dockerfile {exc}, and needs a container build deepgym does not do"
        ) from None
    work = built.workdir or DEFAULT_WORKDIR
    if work == "/" or any(inside(work, d) for d in _FORBIDDEN_WORKDIRS):
        raise ConfigError(
            f"{task}: environment/Dockerfile WORKDIR {work}: not a folder a session's work dir "
            "can stand for"
        )
    return built


def context_hash(context: Path) -> str:
    """A short hash of the folder ``context``: every file's path, executable bit and bytes, and
    every link's target, in path order."""
    digest = hashlib.sha256()
    for path in sorted(context.rglob("*")):
        rel = path.relative_to(context).as_posix().encode()
        if path.is_symlink():
            digest.update(b"L" + rel + b"\0" + str(path.readlink()).encode() + b"\0")
        elif path.is_file():
            executable = b"x" if path.stat().st_mode & 0o111 else b"-"
            digest.update(b"F" + executable + rel + b"\0")
            with path.open("rb") as f:
                digest.update(hashlib.file_digest(f, "sha256").digest())
        elif path.is_dir():
            digest.update(b"D" + rel + b"\0")
    return digest.hexdigest()[:HASH_CHARS]


def image_ref(task_name: str, context: Path, bases: Mapping[str, str] | None = None) -> str:
    """``harbor/<task>:<hash of context>``, the task's name made a valid repository name; the
    hash covers the stand-ins ``bases`` names too (another stand-in, another image)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", task_name.lower()).strip("-._") or "task"
    tag = context_hash(context)
    if bases:
        mixed = hashlib.sha256((tag + json.dumps(sorted(bases.items()))).encode())
        tag = mixed.hexdigest()[:HASH_CHARS]
    return f"harbor/{name}:{tag}"


def image_user(built: Recipe) -> str:
    """Who a session on the task's image runs as (``Environment.user``): ``"root"``, as a
    container runs, unless the Dockerfile's last ``USER`` names another user."""
    return "root" if built.user in ("", "root", "0", "0:0", "root:root") else "agent"


def build_image(
    context: Path,
    ref: str,
    progress: Callable[[str], None] | None = None,
    bases: Mapping[str, str] | None = None,
) -> tuple[Path, dict[str, str]]:
    """Build ``context``'s Dockerfile as ``ref`` in the image store (each step cached), on the
    stand-ins ``bases`` names, and return its unpacked root and its variables. A step that
    fails is the Dockerfile's ``ConfigError``; a base that cannot be had is ``ImageError``."""
    from deepgym.images.build import build
    from deepgym.images.store import ImageStore
    from deepgym.sandbox.image_root import parse_env

    store = ImageStore()
    try:
        store.lookup(ref)
    except ConfigError:
        build(context / "Dockerfile", context, ref, store=store, progress=progress, bases=bases)
    else:
        if progress is not None:
            progress(f"image {ref}: in the image store")
    got = store.resolve(ref)
    return Path(got.rootfs), parse_env(got.config.env)


def seed_work(rootfs: Path, workdir: str, repo: Path) -> bool:
    """Copy what the image holds in ``workdir`` into ``repo`` (links kept as links), within the
    import's limits (``harbor_files``: its files are a task's); whether it held anything."""
    source = rootfs / workdir.lstrip("/")
    if source.is_symlink() or not source.is_dir() or not any(source.iterdir()):
        return False
    harbor_files.inventory([source], source, follow=False, label=f"the image's WORKDIR {workdir}")
    shutil.copytree(source, repo, symlinks=True, copy_function=harbor_files.copy_file)
    return True


def link_workdir(workdir: str, work: str) -> str:
    """A bash command that makes the image's ``workdir`` a link to the work dir ``work``, so a
    path the rewrite cannot see (one computed at run time, a default such as
    ``${APP_DIR:-/app}``, one in a binary) reaches the agent's work too. The root is the
    session's own layer: what the image held there is in the work dir already (``seed_work``)."""
    w = shlex.quote(workdir)
    clear = f"{{ test -L {w} || ! test -d {w} || chmod -R u+rwX {w}; }} && rm -rf {w}"
    return f'{clear} && mkdir -p "$(dirname {w})" && ln -sfn {shlex.quote(work)} {w}'


def owner_writable(folder: Path) -> None:
    """Give the owner write (and search, on folders) on everything under ``folder``, links
    aside: the work dir of a task run as root. Root in a container writes whatever its mode
    says (its capabilities override it); a session's root has none, and owns the work dir, so
    the import gives it the write its task expects (files the image copied read-only, say)."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        extra = stat.S_IWUSR | (stat.S_IXUSR if path.is_dir() else 0)
        path.chmod(stat.S_IMODE(path.stat().st_mode) | extra | stat.S_IRUSR)


def image_setup(variables: dict[str, str], work: str, workdir: str | None = None) -> str:
    """The setup script of a session on a task's image: ``variables`` exported, the image's
    ``workdir`` made a link to the work dir ``work`` (``link_workdir``), then the agent's
    shell moved to the work dir."""
    lines = [
        "# From the Harbor task: its variables (those naming the image's WORKDIR, rewritten),",
        "# its WORKDIR a link to the work dir, then the agent's shell starts in the work dir.",
        "set -e",
        *(f"export {key}={shlex.quote(value)}" for key, value in variables.items()),
        *([link_workdir(workdir, work)] if workdir and workdir != work else []),
        f"cd {shlex.quote(posixpath.normpath(work))}",
    ]
    return "\n".join(lines) + "\n"
