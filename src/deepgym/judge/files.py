"""Files in and out of a program's run: SandboxFusion's ``files`` and ``fetch_files``.

Each script or program process (``script`` and ``exec`` modes) has an io socket of its own
(``IO_FD`` in the solution process, ``"io"`` among the judge's descriptors). Before the answer's
first line, the solution process (ours) reads the judge's message on it (``receive``: a JSON
object ``{"files": {name: base64}, "fetch": bool}``, or nothing), writes the files into its
work dir (``put``), and, where the run reads files back, sends the judge a descriptor of its work
dir (``O_PATH``, ``SCM_RIGHTS``); then it closes the socket. After the run, however it ended (an
exit, a signal, its time limit), the judge reads the named files through that descriptor
(``fetch``): the work dir's file system lives as long as a descriptor of it is open, the
solution's namespaces gone or not.

Threat model: the names come from a request. They are checked where the request is read
(``check_name``, on the host) and again here before anything is written: relative, no empty,
``.`` or ``..`` part, at most ``MAX_NAME_CHARS``. The files read back are the answer's to make,
so each is opened beneath the work dir one part at a time with ``O_NOFOLLOW`` (a link is never
followed, to the verifier's files or anywhere else), non-blocking (a FIFO never holds the
judge), and read only if it is a regular file, up to ``FETCH_MAX_BYTES`` for all of them. What
comes back is the program's output, as its stdout is: never part of a verdict. A descriptor the
answer could have put in the judge's way cannot come first: the solution process sends its own
before the answer runs, and the judge reads only that one message.

Standard library only: it runs inside the sandbox, on both sides.
"""

from __future__ import annotations

import binascii
import os
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

IO_FD = 5
"""The io socket's descriptor in a solution process (after its call pipes, 3 and 4)."""
MAX_FILES = 256
"""The most files one run may bring (SandboxFusion's ``files``)."""
MAX_FILES_BYTES = 16 * 2**20
"""The most bytes (decoded) the files of one run may hold in all: well under a run's file-size
and work-dir limits (64 MiB a file, twice that in all, by default)."""
MAX_FETCH = 64
"""The most files one run may read back (SandboxFusion's ``fetch_files``)."""
FETCH_MAX_BYTES = 4 * 2**20
"""The most bytes of files read back per run, in all: base64 in the report, beside the run's
kept output, under the report's line (``codes.REPORT_MAX_BYTES``). A file that does not fit in
what is left is not read, and named as left out."""
MAX_NAME_CHARS = 1024
PROGRAM_NAME = "solution.py"
"""The program's own file in the work dir: no file may take its name."""
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


def check_name(name: Any) -> str:
    """Why ``name`` cannot be a file of a run's work dir ("" where it can): a relative path of
    plain parts, not the program's own file."""
    if not isinstance(name, str) or not name:
        return "a file's name must be a non-empty string"
    if len(name) > MAX_NAME_CHARS or "\0" in name:
        return f"a file's name must be at most {MAX_NAME_CHARS} characters, without NUL"
    if name.startswith("/"):
        return "a file's name must be relative to the work dir, not absolute"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "a file's name must not have an empty, '.' or '..' part"
    if name == PROGRAM_NAME:
        return f"{PROGRAM_NAME!r} is the program's own file"
    return ""


def put(root: str, files: dict[str, str]) -> None:
    """Write ``files`` (name: base64) under ``root``, making folders on the way, never through a
    link. ``ValueError`` for a name or content that is not
    allowed (checked on the host already: the request's fault, never the answer's)."""
    for name, content in files.items():
        why = check_name(name)
        if why:
            raise ValueError(f"files: {name!r}: {why}")
        data = binascii.a2b_base64(content)
        *folders, leaf = name.split("/")
        fd = os.open(root, _DIR_FLAGS)
        try:
            for folder in folders:
                try:
                    os.mkdir(folder, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                inner = os.open(folder, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
            out = os.open(leaf, _WRITE_FLAGS, 0o644, dir_fd=fd)
        finally:
            os.close(fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
        finally:
            os.close(out)


def receive(io: int) -> tuple[dict[str, str], bool]:
    """The judge's message on the io socket ``io``: the files to write, and whether the judge
    reads files back (nothing sent: none, and no)."""
    parts = []
    while chunk := os.read(io, 1 << 20):
        parts.append(chunk)
    if not parts:
        return {}, False
    import json

    msg = json.loads(b"".join(parts))
    return dict(msg.get("files") or {}), bool(msg.get("fetch"))


def send_dir(io: int, path: str) -> None:
    """Send the judge a descriptor of the folder ``path`` (``O_PATH``) on the io socket."""
    import _socket

    fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    sock = _socket.socket(fileno=os.dup(io))
    try:
        rights = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd.to_bytes(4, sys.byteorder))]
        sock.sendmsg([b"d"], rights)
    finally:
        sock.close()
        os.close(fd)


def serve_io(io: int, root: str) -> None:
    """The solution process's side, before the answer runs: the judge's files written under
    ``root``, the work dir's descriptor sent where it reads files back; ``io`` closed."""
    try:
        files, fetch = receive(io)
        if files:
            put(root, files)
        if fetch:
            send_dir(io, root)
    finally:
        os.close(io)


def message(files: dict[str, str], fetch: bool) -> bytes:
    """The judge's message to a solution process (``b""``: nothing to send)."""
    if not files and not fetch:
        return b""
    import json

    return json.dumps({"files": files, "fetch": fetch}).encode()


def end_message(io: int) -> None:
    """End the judge's message on ``io`` (its write side shut: the solution process reads to
    the end, and can still send back on it)."""
    import _socket

    sock = _socket.socket(fileno=os.dup(io))
    try:
        sock.shutdown(_socket.SHUT_WR)
    finally:
        sock.close()


def take_dir(io: int) -> int | None:
    """The work dir's descriptor the solution process sent on ``io`` (None: it sent none, as a
    process that failed before the answer ran)."""
    import _socket

    sock = _socket.socket(fileno=os.dup(io))
    try:
        sock.setblocking(False)
        try:
            data, ancdata, _, _ = sock.recvmsg(16, _socket.CMSG_LEN(4 * 4))
        except OSError:  # (BlockingIOError: nothing was sent)
            return None
    finally:
        sock.close()
    fds = [
        int.from_bytes(raw[i : i + 4], sys.byteorder)
        for level, kind, raw in ancdata
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
        for i in range(0, len(raw) - len(raw) % 4, 4)
    ]
    if data == b"d" and len(fds) == 1:
        return fds[0]
    for fd in fds:
        os.close(fd)
    return None


def _open_beneath(dir_fd: int, name: str) -> int:
    """``name`` opened for reading beneath ``dir_fd``, no part of it a link (``OSError``)."""
    *folders, leaf = name.split("/")
    fd = dir_fd
    try:
        for folder in folders:
            inner = os.open(folder, _DIR_FLAGS, dir_fd=fd)
            if fd != dir_fd:
                os.close(fd)
            fd = inner
        return os.open(leaf, _READ_FLAGS, dir_fd=fd)
    finally:
        if fd != dir_fd:
            os.close(fd)


def fetch(dir_fd: int, names: list[str]) -> tuple[dict[str, str], list[str]]:
    """Read ``names`` beneath the work dir ``dir_fd``: each regular file's content (base64),
    and the names left out for want of room (``FETCH_MAX_BYTES`` in all). A name that is not
    there, not a regular file, or a link, is not read and not named: as SandboxFusion, which
    returns the files it finds."""
    got: dict[str, str] = {}
    over: list[str] = []
    room = FETCH_MAX_BYTES
    for name in names[:MAX_FETCH]:
        if check_name(name) and name != PROGRAM_NAME:
            continue
        try:
            fd = _open_beneath(dir_fd, name)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_size > room:
                over.append(name)
                continue
            data = os.read(fd, room + 1)
            while len(data) <= room and (more := os.read(fd, room + 1 - len(data))):
                data += more
        except OSError:
            continue
        finally:
            os.close(fd)
        if len(data) > room:  # grew since it was measured
            over.append(name)
            continue
        room -= len(data)
        got[name] = binascii.b2a_base64(data, newline=False).decode("ascii")
    return got, over
