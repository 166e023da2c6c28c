"""Applying an image's layers, in order, to a root directory: securely, streaming each tar once.

Threat model: a layer is untrusted data written by whoever built the image. Whatever it holds,
nothing is written, created, removed or changed outside the root, and nothing in the root can
later give anyone more than the unpacking user has. How each kind of entry is handled:

- **Paths** are taken relative to the root: a leading ``/`` is dropped (``/x`` is ``x``:
  confined, as Docker does). A name with a ``..`` component is **refused** (no image builder
  writes one), as is one deeper than 256 directories.
- **Parents** are resolved one component at a time from the root, each opened with
  ``O_NOFOLLOW`` relative to its parent's descriptor. A symlink met on the way is resolved *inside
  the root*, as if the root were ``/`` (an absolute target restarts at the root, ``..`` stops at
  it): so ``evil -> /tmp/outside`` then ``evil/file`` writes ``<root>/tmp/outside/file``
  (**confined**), and a missing directory on the way is created inside the root.
- The **last component** is never followed: what is there is removed first (unlinked, or a
  directory removed without following anything in it), then the entry is created with
  ``O_CREAT | O_EXCL | O_NOFOLLOW``.
- **Symlinks** are created as they are, absolute targets included: a link is data, never followed
  here. **Hardlinks** must name an entry already in the root that is not a directory, found the
  same way (a target outside, such as ``/etc/passwd`` when the root has none, or ``../x``, is
  **refused**).
- **Device nodes** (character or block) are **refused**, naming the layer and the path. FIFOs are
  made. Set-uid, set-gid and sticky bits are stripped; owners are not applied (every file belongs
  to the unpacking user) and extended attributes (file capabilities included) are not copied.
- **Whiteouts** (``.wh.<name>``) remove ``<name>`` as lower layers left it; an opaque marker
  (``.wh..wh..opq``) empties its directory of what lower layers put there. Neither touches what
  the same layer writes, whatever the order of the entries in the tar.
- **Modes**: directories are kept writable by their owner while layers are applied (a later layer
  may write into a read-only directory of a lower one); ``finish()`` sets their modes and times,
  deepest first.

- **Size**: an image may unpack to at most ``max_mb`` MiB of file data and ``MAX_ENTRIES``
  entries, all layers together (``DEEPGYM_IMAGE_MAX_MB``, 32 GiB by default): past either, the
  layer is **refused**, so a decompression bomb cannot fill the disk.

Layers may be uncompressed, gzip, bzip2 or xz; zstd needs the ``zstandard`` module and is
refused in one line without it. The stream is read to its end, so a ``VerifiedReader`` under it
checks the layer's digest; a caller that gets an exception must discard the root.

Every refusal is one ``ImageError`` line naming the layer and the entry: a bad image, as
``oci`` says, whatever its source (only a bad ``DEEPGYM_IMAGE_MAX_MB`` is ``ConfigError``).
"""

from __future__ import annotations

import errno
import importlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, cast

from deepgym.exceptions import ConfigError, ImageError

__all__ = ["Unpacker", "remove_tree", "unpack_layers"]

_OPAQUE = ".wh..wh..opq"
_WHITEOUT = ".wh."
_MAX_DEPTH = 256
_MAX_HOPS = 40  # symlinks followed while resolving one path, as the kernel's limit
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_HOST_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EMFILE})

MAX_MB_ENV = "DEEPGYM_IMAGE_MAX_MB"
DEFAULT_MAX_MB = 32 * 1024
MAX_ENTRIES = 4_000_000
"""The most entries an image's layers may hold, all together."""

Stream = IO[bytes] | io.RawIOBase  # a layer's bytes (a ``VerifiedReader``, say)
Path_ = tuple[str, ...]  # components from the root, none a symlink or "..", as resolved


class Unpacker:
    """Applies layers to ``root`` (an existing, empty directory), then ``finish()`` fixes the
    directories' modes. Close it (or use it as a context manager) to release the root."""

    def __init__(self, root: Path, max_mb: int | None = None) -> None:
        self._max_bytes = (max_mb if max_mb is not None else _max_mb()) << 20
        self._bytes = 0
        self._entries = 0
        self._root_fd = os.open(root, _DIR_FLAGS)
        self._dirs: dict[Path_, tuple[int, float | None]] = {}  # final mode and mtime
        self._layer = ""
        self._written: set[Path_] = set()

    def __enter__(self) -> Unpacker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the root's descriptor."""
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    def apply(self, stream: Stream, name: str) -> None:
        """Apply one layer (a tar, maybe compressed), read from ``stream`` to its end;
        ``name`` (the layer's digest, say) names it in errors."""
        self._layer, self._written = name, set()
        if isinstance(stream, io.BufferedReader):
            buffered = stream
        else:
            buffered = io.BufferedReader(cast(Any, stream))
        zstd = buffered.peek(4)[:4] == _ZSTD_MAGIC
        try:
            with _open_tar(buffered, name, zstd) as tar:
                for member in tar:
                    self._entry(tar, member)
        except (tarfile.TarError, EOFError) as exc:
            raise ImageError(f"layer {name} is not a readable tar: {exc}") from exc
        while buffered.read(1 << 20):  # the rest (tar padding): the digest covers it too
            pass

    def finish(self) -> None:
        """Set every directory's mode and time, deepest first (a parent may become read-only)."""
        for path, (mode, mtime) in sorted(self._dirs.items(), key=lambda kv: -len(kv[0])):
            try:
                fd = self._open(path)
            except OSError:  # removed or replaced by a later layer
                continue
            try:
                os.fchmod(fd, mode)
                if mtime is not None:
                    os.utime(fd, (mtime, mtime))
            finally:
                os.close(fd)

    def relock(self, locked: list[tuple[Path_, int]]) -> None:
        """Set back the modes of the base's directories made writable (``_link_copy``) that no
        layer gave a mode of its own, deepest first."""
        for path, mode in sorted(locked, key=lambda kv: -len(kv[0])):
            if path in self._dirs:
                continue
            try:
                fd = self._open(path)
            except OSError:  # removed or replaced by a layer
                continue
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)

    # -- one entry ----------------------------------------------------------------------

    def _count(self, member: tarfile.TarInfo) -> None:
        self._entries += 1
        self._bytes += max(member.size, 0) if member.isfile() else 0
        if self._bytes > self._max_bytes or self._entries > MAX_ENTRIES:
            raise ImageError(
                f"layer {self._layer}: the image unpacks past {self._max_bytes >> 20} MiB or "
                f"{MAX_ENTRIES} entries (at {member.name!r}; {MAX_MB_ENV} raises the size)"
            )

    def _entry(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self._count(member)
        parts = self._parts(member.name)
        if not parts:
            return  # the root itself: its mode is the store's
        *dirs, base = parts
        try:
            if base == _OPAQUE:
                self._opaque(dirs)
            elif base.startswith(_WHITEOUT + _WHITEOUT):
                return  # other AUFS metadata: nothing in the image
            elif base.startswith(_WHITEOUT):
                self._whiteout(dirs, base[len(_WHITEOUT) :], member.name)
            else:
                self._create(tar, member, dirs, base)
        except OSError as exc:
            if exc.errno in _HOST_ERRORS:
                raise
            raise ImageError(f"layer {self._layer}: {member.name}: {exc.strerror}") from exc

    def _create(
        self, tar: tarfile.TarFile, member: tarfile.TarInfo, dirs: list[str], base: str
    ) -> None:
        if member.ischr() or member.isblk():
            raise ImageError(f"layer {self._layer}: {member.name} is a device node: refused")
        if not (member.isdir() or member.isreg() or member.issym() or member.islnk()) and not (
            member.isfifo()
        ):
            raise ImageError(f"layer {self._layer}: {member.name} has an unknown type: refused")
        parent, fd = self._resolve(dirs)
        try:
            self._written.update(parent[:i] for i in range(1, len(parent) + 1))
            self._written.add((*parent, base))
            mode = member.mode & 0o777  # no set-uid, set-gid or sticky bit
            if member.isdir():
                self._mkdir(fd, base, (*parent, base), mode, float(member.mtime))
            elif member.islnk():
                self._hardlink(fd, base, member)
            else:
                _clear(fd, base)
                if member.issym():
                    os.symlink(member.linkname, base, dir_fd=fd)
                elif member.isfifo():
                    os.mkfifo(base, mode, dir_fd=fd)
                else:
                    _write(fd, base, tar.extractfile(member), mode, float(member.mtime))
        finally:
            os.close(fd)

    def _mkdir(self, fd: int, base: str, path: Path_, mode: int, mtime: float | None) -> None:
        try:
            st = os.stat(base, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is None or not stat.S_ISDIR(st.st_mode):
            _clear(fd, base)
            os.mkdir(base, 0o700, dir_fd=fd)
        self._dirs[path] = (mode, mtime)

    def _hardlink(self, fd: int, base: str, member: tarfile.TarInfo) -> None:
        *dirs, target = self._parts(member.linkname) or [""]
        found = self._find(dirs) if target else None
        if found is None:
            raise ImageError(
                f"layer {self._layer}: hardlink {member.name} -> {member.linkname}: "
                "the target is not in the root: refused"
            )
        _, src_fd = found
        try:
            st = _lstat(src_fd, target)
            if st is None or stat.S_ISDIR(st.st_mode):
                raise ImageError(
                    f"layer {self._layer}: hardlink {member.name} -> {member.linkname}: "
                    "the target is not a file in the root: refused"
                )
            there = _lstat(fd, base)
            if there is not None and os.path.samestat(st, there):
                return  # already this file (a link to itself)
            _clear(fd, base)
            os.link(target, base, src_dir_fd=src_fd, dst_dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(src_fd)

    def _whiteout(self, dirs: list[str], name: str, entry: str) -> None:
        if name in ("", ".", ".."):
            raise ImageError(f"layer {self._layer}: whiteout {entry!r} names nothing: refused")
        found = self._find(dirs)
        if found is None:
            return
        parent, fd = found
        try:
            if (*parent, name) not in self._written:
                _clear(fd, name)
        finally:
            os.close(fd)

    def _opaque(self, dirs: list[str]) -> None:
        parent, fd = self._resolve(dirs)
        try:
            self._written.update(parent[:i] for i in range(1, len(parent) + 1))
            self._prune(fd, parent)
        finally:
            os.close(fd)

    def _prune(self, fd: int, path: Path_) -> None:
        """Remove from the directory ``fd`` what this layer did not write, recursively."""
        for name in os.listdir(fd):
            child = (*path, name)
            if child not in self._written:
                _clear(fd, name)
                continue
            st = _lstat(fd, name)
            if st is not None and stat.S_ISDIR(st.st_mode):
                sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                try:
                    self._prune(sub, child)
                finally:
                    os.close(sub)

    # -- paths ----------------------------------------------------------------------------

    def _parts(self, name: str) -> list[str]:
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise ImageError(f"layer {self._layer}: {name!r} climbs out with '..': refused")
        if len(parts) > _MAX_DEPTH or "\0" in name:
            raise ImageError(f"layer {self._layer}: {name[:200]!r} is not a usable path: refused")
        return parts

    def _open(self, path: Path_) -> int:
        """A descriptor of ``path`` (resolved: no symlinks), walked from the root."""
        fd = os.dup(self._root_fd)
        for comp in path:
            try:
                nxt = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            finally:
                os.close(fd)
            fd = nxt
        return fd

    def _resolve(self, dirs: list[str]) -> tuple[Path_, int]:
        """``(path, fd)``: the directory ``dirs`` names, resolved inside the root, made (and
        its missing parents) if it is missing."""
        found = self._walk(dirs, create=True)
        if found is None:  # _walk makes what is missing, or raises
            raise ImageError(f"layer {self._layer}: {'/'.join(dirs)}: not a directory")
        return found

    def _find(self, dirs: list[str]) -> tuple[Path_, int] | None:
        """Like ``_resolve``, but None when the directory is not there."""
        return self._walk(dirs, create=False)

    def _walk(self, dirs: list[str], create: bool) -> tuple[Path_, int] | None:
        """The directory ``dirs`` names, resolved inside the root: symlinks as if the root
        were ``/``, missing directories made when ``create``, else None if one is missing."""
        todo, path, hops = list(reversed(dirs)), list[str](), 0
        fd = os.dup(self._root_fd)
        try:
            while todo:
                comp = todo.pop()
                if comp in ("", "."):
                    continue
                if comp == "..":
                    path = path[:-1]
                    fd = _swap(fd, self._open(tuple(path)))
                    continue
                st = _lstat(fd, comp)
                if st is None and not create:
                    os.close(fd)
                    return None
                if st is None:
                    os.mkdir(comp, 0o700, dir_fd=fd)
                    self._dirs[(*path, comp)] = (0o755, None)
                elif stat.S_ISLNK(st.st_mode):
                    hops += 1
                    if hops > _MAX_HOPS:
                        raise ImageError(f"layer {self._layer}: too many symlinks in {dirs}")
                    target = os.readlink(comp, dir_fd=fd)
                    if target.startswith("/"):
                        path = []
                        fd = _swap(fd, os.dup(self._root_fd))
                    todo.extend(reversed(target.split("/")))
                    continue
                elif not stat.S_ISDIR(st.st_mode):
                    if not create:
                        os.close(fd)
                        return None
                    raise ImageError(f"layer {self._layer}: {'/'.join(dirs)}: not a directory")
                fd = _swap(fd, os.open(comp, _DIR_FLAGS, dir_fd=fd))
                path.append(comp)
                if len(path) > _MAX_DEPTH:
                    raise ImageError(f"layer {self._layer}: {'/'.join(dirs)} is too deep")
        except BaseException:
            os.close(fd)
            raise
        return tuple(path), fd


def _swap(old: int, new: int) -> int:
    os.close(old)
    return new


def _lstat(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _clear(fd: int, name: str) -> None:
    """Remove ``name`` in the directory ``fd``, whatever it is, following nothing."""
    st = _lstat(fd, name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=fd)
        return
    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
    try:
        if st.st_mode & 0o700 != 0o700:
            os.fchmod(sub, 0o700)
        for child in os.listdir(sub):
            _clear(sub, child)
    finally:
        os.close(sub)
    os.rmdir(name, dir_fd=fd)


def _write(fd: int, base: str, source: IO[bytes] | None, mode: int, mtime: float) -> None:
    out = os.open(base, _NEW_FILE, 0o600, dir_fd=fd)
    with os.fdopen(out, "wb") as handle:
        if source is not None:
            shutil.copyfileobj(source, handle, 1 << 20)
        handle.flush()
        os.fchmod(out, mode)
        os.utime(out, (mtime, mtime))


def _open_tar(stream: IO[bytes], name: str, zstd: bool) -> tarfile.TarFile:
    """A streaming reader of the layer (any compression tarfile knows; zstd here)."""
    if zstd:
        return tarfile.open(fileobj=_zstd(stream, name), mode="r|")
    return tarfile.open(fileobj=stream, mode="r|*")


def _zstd(stream: IO[bytes], name: str) -> IO[bytes]:
    try:
        zstandard = importlib.import_module("zstandard")
    except ImportError:
        raise ImageError(
            f"layer {name} is zstd-compressed: install the zstandard module to read it"
        ) from None
    reader: IO[bytes] = zstandard.ZstdDecompressor().stream_reader(stream, closefd=False)
    return reader


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it, following no symlink, making read-only
    directories writable as it goes (an unpacked root may hold some)."""
    parent = os.open(path.parent, _DIR_FLAGS)
    try:
        _clear(parent, path.name)
    finally:
        os.close(parent)


def _max_mb() -> int:
    raw = os.environ.get(MAX_MB_ENV, "")
    if not raw:
        return DEFAULT_MAX_MB
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{MAX_MB_ENV}={raw!r}: a whole number of MiB, at least 1")
    return int(raw)


def _link_copy(base: Path, root: Path) -> list[tuple[Path_, int]]:
    """``root`` (empty) made a copy of the unpacked root ``base`` whose files are hard links
    to ``base``'s; its directories without the owner's write bit made writable for the layers
    to come. Those directories and their modes, to set back."""
    done = subprocess.run(
        ["cp", "-a", "--link", "--no-target-directory", str(base), str(root)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise ImageError(f"linking the root {base} failed: {done.stderr.strip()[-300:]}")
    locked: list[tuple[Path_, int]] = []
    for folder, dirs, _ in os.walk(root):
        for name in dirs:
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode) and not mode & stat.S_IWUSR:
                os.chmod(path, stat.S_IMODE(mode) | stat.S_IWUSR | stat.S_IXUSR)
                locked.append((Path(path).relative_to(root).parts, stat.S_IMODE(mode)))
    return locked


def unpack_layers(
    root: Path, layers: Iterable[tuple[str, Stream]], base: Path | None = None
) -> None:
    """Apply ``(name, stream)`` layers in order to the empty directory ``root``, then fix the
    directories' modes. Each stream is read to its end and closed.

    ``base``: an unpacked root of the layers that come before these (an image this one shares
    its first layers with). ``root`` starts as its copy, each file a hard link to ``base``'s:
    the two share their file data on disk, and neither changes the other, because an unpacked
    root is never written (sandboxes mount it read-only, under a layer of their own) and the
    unpacker never writes a file in place: every entry it writes is created anew, after what
    was there is unlinked. Directories are the copy's own. The size limits count these layers.
    """
    locked = _link_copy(base, root) if base is not None else []
    with Unpacker(root) as unpacker:
        for name, stream in layers:
            with stream:
                unpacker.apply(stream, name)
        unpacker.finish()
        unpacker.relock(locked)
