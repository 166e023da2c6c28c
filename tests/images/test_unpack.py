"""The unpacker: layers applied in order, whiteouts honoured, and no layer able to write, remove
or link anything outside the root (``outside`` is checked after every attack)."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from deepgym.exceptions import ConfigError, ImageError
from deepgym.images.unpack import remove_tree, unpack_layers
from tests.images.conftest import TWO_LAYERS, Entry, Layer, make_layer


def _unpack(root: Path, *layers: Layer) -> None:
    root.mkdir(exist_ok=True)
    streams = [(f"layer{i}", io.BytesIO(make_layer(lay))) for i, lay in enumerate(layers)]
    unpack_layers(root, streams)


def _listing(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): p.read_text() for p in sorted(path.rglob("*"))}


def test_two_layers_whiteouts_opaque_directories_and_stripped_bits(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _unpack(root, *TWO_LAYERS)
    assert (root / "etc/motd").read_text() == "hello again\n"
    assert not (root / "etc/gone").exists()
    assert sorted(os.listdir(root / "opt/old")) == ["new"]  # the opaque dir kept only its own
    assert stat.S_IMODE((root / "usr/bin/tool").stat().st_mode) == 0o755  # no set-uid
    assert not list(root.rglob(".wh.*"))
    assert (root / "etc/motd").stat().st_mtime == 1_700_000_000


def test_an_opaque_marker_after_its_siblings_keeps_them(tmp_path: Path) -> None:
    root = tmp_path / "root"
    lower = {"d/old": "x", "d/sub/old": "x", "keep/a": "x"}
    upper = {"d/sub/new": "y", "d/.wh..wh..opq": "", "keep/.wh.a": "", "keep/a": "z"}
    _unpack(root, lower, upper)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())
    assert files == ["d/sub/new", "keep/a"]
    assert (root / "keep/a").read_text() == "z"  # the same layer's file is not whited out


@pytest.mark.parametrize("kind", ["chr", "blk"])
def test_a_device_node_is_refused_naming_the_layer_and_path(tmp_path: Path, kind: str) -> None:
    with pytest.raises(ImageError, match=r"layer1: dev/mem is a device node: refused"):
        _unpack(tmp_path / "root", {"ok": "x"}, {"dev/mem": Entry(kind)})


def test_fifos_hardlinks_and_symlinks_are_made(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _unpack(
        root,
        {"a": "data", "abs": Entry("symlink", link="/etc/passwd")},
        {"b": Entry("hardlink", link="a"), "p": Entry("fifo"), "rel": Entry("symlink", link="a")},
    )
    assert (root / "a").stat().st_ino == (root / "b").stat().st_ino
    assert stat.S_ISFIFO((root / "p").lstat().st_mode)
    assert os.readlink(root / "abs") == "/etc/passwd"  # made as it is, never followed
    assert (root / "rel").read_text() == "data"


REFUSED = "refused"


def _attacks(outside: Path) -> dict[str, tuple[list[Layer], str]]:
    """name -> (layers, REFUSED, or the path inside the root that the write is confined to)."""
    out = str(outside)
    inside = out.lstrip("/")  # where a symlink to ``outside`` points, seen from the root
    evil = {"evil": Entry("symlink", link=out)}
    up = Entry("symlink", link="../" * 12 + inside)
    return {
        "dotdot": ([{"../../x": "pwned"}], REFUSED),
        "dotdot-inside": ([{"a/../../x": "pwned"}], REFUSED),
        "absolute": ([{out + "/x": "pwned"}], inside + "/x"),
        "symlink-absolute": ([{**evil, "evil/x": "pwned"}], inside + "/x"),
        "symlink-relative": ([{"evil": up, "evil/x": "pwned"}], inside + "/x"),
        "symlink-next-layer": ([evil, {"evil/x": "pwned"}], inside + "/x"),
        "symlink-replaced": (
            [{"evil": Entry("symlink", link=out + "/keep")}, {"evil": "p"}],
            "evil",
        ),
        "symlink-deep": ([evil, {"evil/a/b/x": "pwned"}], inside + "/a/b/x"),
        "hardlink-etc": ([{"h": Entry("hardlink", link="/etc/passwd")}], REFUSED),
        "hardlink-dotdot": ([{"h": Entry("hardlink", link="../x")}], REFUSED),
        "hardlink-outside": ([{"h": Entry("hardlink", link=out + "/keep")}], REFUSED),
        "hardlink-via-symlink": ([{**evil, "h": Entry("hardlink", link="evil/keep")}], REFUSED),
        "whiteout-via-symlink": ([evil, {"evil/.wh.keep": ""}], "evil"),
        "opaque-via-symlink": ([evil, {"evil/.wh..wh..opq": ""}], inside),
        "whiteout-dotdot": ([{"a": "x"}, {"../.wh.outside": ""}], REFUSED),
        "whiteout-of-dotdot": ([{"a": "x"}, {"a/.wh..": ""}], REFUSED),
    }


ATTACKS = sorted(_attacks(Path("/o")))


@pytest.mark.parametrize("name", ATTACKS)
def test_no_layer_writes_outside_the_root(tmp_path: Path, outside: Path, name: str) -> None:
    """Each attack is refused (an ``ImageError``), or confined: what it writes lands inside
    the root (a symlink's target is resolved as if the root were ``/``)."""
    layers, expected = _attacks(outside)[name]
    before = _listing(outside)
    root = tmp_path / "root"
    if expected == REFUSED:
        with pytest.raises(ImageError, match="refused"):
            _unpack(root, *layers)
    else:
        _unpack(root, *layers)
        assert os.path.lexists(root / expected)
    assert _listing(outside) == before
    assert sorted(os.listdir(tmp_path)) == ["outside", "root"]


def test_zstd_needs_the_zstandard_module(tmp_path: Path) -> None:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        stream = io.BytesIO(b"\x28\xb5\x2f\xfd" + b"\0" * 64)
        (tmp_path / "root").mkdir()
        with pytest.raises(ImageError, match="zstd-compressed: install the zstandard module"):
            unpack_layers(tmp_path / "root", [("layer0", stream)])
    else:
        pytest.skip("zstandard is installed here")


def test_a_corrupt_layer_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    with pytest.raises(ImageError, match="layer0 is not a readable tar"):
        unpack_layers(tmp_path / "root", [("layer0", io.BytesIO(b"\x1f\x8bnot gzip at all"))])


def _as_nobody(work: Path) -> str:
    """Unpack a read-only lower directory and remove the result, in ``work`` (the cwd)."""
    root = Path("root")
    root.mkdir()
    lower = {"ro/": Entry("dir", mode=0o555), "ro/a": "x", "ro/sub/": Entry("dir", mode=0o500)}
    upper = {"ro/b": "y", "ro/sub/c": Entry("file", b"z", mode=0o400), "ro/a": "x2"}
    layers = [(n, io.BytesIO(make_layer(lay))) for n, lay in (("l0", lower), ("l1", upper))]
    unpack_layers(root, layers)
    modes = [oct(stat.S_IMODE((root / p).stat().st_mode)) for p in ("ro", "ro/sub")]
    (root / "ro/sub").chmod(0o700)  # to read c (mode 0400: ours)
    got = [
        (root / "ro/a").read_text(),
        (root / "ro/b").read_text(),
        (root / "ro/sub/c").read_text(),
    ]
    (root / "ro/sub").chmod(0o500)
    remove_tree(root)
    return repr((modes, got, root.exists()))


def test_read_only_lower_directories_as_an_unprivileged_user(tmp_path: Path) -> None:
    """Root ignores modes, so when the tests run as root a forked child drops to ``nobody``."""
    work = tmp_path / "work"
    work.mkdir()
    if os.geteuid() != 0:
        os.chdir(work)
        out = _as_nobody(work)
    else:
        os.chown(work, 65534, 65534)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.chdir(work)
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                os.write(write, _as_nobody(work).encode())
                code = 0
            except BaseException as exc:
                os.write(write, repr(exc).encode())
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read) as pipe:
            out = pipe.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, out
    assert out == repr((["0o555", "0o500"], ["x2", "y", "z"], False))


def test_remove_tree_follows_no_symlink(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    _unpack(root, {"link": Entry("symlink", link=str(outside)), "d/": Entry("dir", mode=0o500)})
    remove_tree(root)
    assert not root.exists()
    assert _listing(outside) == {"keep": "untouched\n"}


def test_a_layer_past_the_size_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decompression bomb: 3 MiB of zeros gzip to a few KiB; the limit counts what unpacks."""
    bomb = make_layer({f"z/{i}": b"\0" * (1 << 20) for i in range(3)})
    assert len(bomb) < 64 << 10
    monkeypatch.setenv("DEEPGYM_IMAGE_MAX_MB", "2")
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(ImageError, match=r"layer bomb: the image unpacks past 2 MiB .* 'z/2'"):
        unpack_layers(root, [("bomb", io.BytesIO(bomb))])
    monkeypatch.setenv("DEEPGYM_IMAGE_MAX_MB", "3")
    fits = tmp_path / "fits"
    fits.mkdir()
    unpack_layers(fits, [("bomb", io.BytesIO(bomb))])
    assert (fits / "z/2").stat().st_size == 1 << 20
    monkeypatch.setenv("DEEPGYM_IMAGE_MAX_MB", "lots")
    with pytest.raises(ConfigError, match="DEEPGYM_IMAGE_MAX_MB='lots'"):
        unpack_layers(tmp_path, [])
