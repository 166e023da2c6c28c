"""Reading images from disk and the image store: digests verified, platforms chosen, roots
unpacked once and atomically, refs, prune."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from deepgym.exceptions import ConfigError, ImageError
from deepgym.images import store as store_module
from deepgym.images.layout import open_image
from deepgym.images.oci import Platform, parse_manifest
from deepgym.images.store import ImageStore
from deepgym.images.unpack import Unpacker
from tests.images.conftest import (
    TWO_LAYERS,
    Entry,
    write_docker_save,
    write_oci_layout,
)


def _tree(root: Path) -> dict[str, object]:
    """What a root holds: each path's type, mode, and content or link target."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        body = (
            os.readlink(path)
            if path.is_symlink()
            else path.read_bytes()
            if path.is_file()
            else None
        )
        out[str(path.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), body)
    return out


LAYERS = [*TWO_LAYERS, {"bin": Entry("symlink", link="usr/bin"), "work/": Entry("dir")}]


@pytest.fixture
def store(tmp_path: Path) -> ImageStore:
    return ImageStore(tmp_path / "home")


# -- reading images ---------------------------------------------------------------------------


def test_a_docker_save_tarball_and_a_two_platform_layout_give_the_same_root(
    tmp_path: Path, store: ImageStore
) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS, ref="v1", other_platform="linux/s390x")
    write_docker_save(tmp_path / "saved.tar", LAYERS, tag="test/image:latest")
    from_layout = store.resolve(store.import_layout(tmp_path / "oci", "from-layout"))
    from_tar = store.resolve(store.import_tarball(tmp_path / "saved.tar"))
    assert from_layout.digest != from_tar.digest
    assert _tree(from_layout.rootfs) == _tree(from_tar.rootfs)
    assert (from_layout.rootfs / "etc/motd").read_text() == "hello again\n"
    assert not (from_layout.rootfs / "platform").exists()  # not the other platform's image
    assert from_tar.config.working_dir == "/work"
    assert from_tar.config.env == ("PATH=/usr/bin:/bin",)
    assert [e.ref for e in store.list()] == ["from-layout", "test/image:latest"]
    with tarfile.open(tmp_path / "oci.tar", "w") as tar:  # newer docker save: a layout in a tar
        tar.add(tmp_path / "oci", arcname=".")
    from_oci_tar = store.resolve(store.import_tarball(tmp_path / "oci.tar", "oci-tar"))
    assert from_oci_tar.digest == from_layout.digest


def test_docker_media_types_read_as_oci_ones(tmp_path: Path, store: ImageStore) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS, other_platform="linux/arm64", docker=True)
    write_oci_layout(tmp_path / "plain", LAYERS)
    docker = store.resolve(store.import_layout(tmp_path / "oci", "docker"))
    assert _tree(docker.rootfs) == _tree(
        store.resolve(store.import_layout(tmp_path / "plain")).rootfs
    )


def test_a_layout_of_several_images_needs_a_name(tmp_path: Path, store: ImageStore) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS, ref="one")
    first = json.loads((tmp_path / "oci/index.json").read_text())["manifests"][0]
    write_oci_layout(tmp_path / "oci", [{"two": "2"}], ref="two")
    index = json.loads((tmp_path / "oci/index.json").read_text())
    index["manifests"].insert(0, first)
    (tmp_path / "oci/index.json").write_text(json.dumps(index))
    with pytest.raises(ConfigError, match="holds several images; name one of: one, two"):
        store.import_layout(tmp_path / "oci")
    with pytest.raises(ConfigError, match=r"no image named 'three' \(it has: \['one', 'two'\]\)"):
        store.import_layout(tmp_path / "oci", name="three")
    assert (
        store.resolve(store.import_layout(tmp_path / "oci", name="two")).rootfs / "two"
    ).is_file()
    assert [e.ref for e in store.list()] == ["two"]


def test_the_other_platform_is_chosen_when_asked(tmp_path: Path, store: ImageStore) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS, other_platform="linux/s390x")
    digest = store.import_layout(tmp_path / "oci", "s390x", platform=Platform.parse("linux/s390x"))
    assert (store.resolve(digest).rootfs / "platform").read_text() == "linux/s390x"


def test_a_layout_index_is_followed_by_the_platform_rule(tmp_path: Path, store: ImageStore) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS, other_platform="linux/arm64")
    with pytest.raises(
        ImageError,
        match=r"no manifest for linux/riscv64 \(it has: linux/(amd64, linux/arm64|arm64)",
    ):
        store.import_layout(tmp_path / "oci", platform=Platform.parse("linux/riscv64"))
    arm = store.import_layout(tmp_path / "oci", "arm", platform=Platform.parse("linux/arm64/v8"))
    assert (store.resolve(arm).rootfs / "platform").read_text() == "linux/arm64"


def test_a_broken_manifest_is_the_same_error_from_every_source(
    tmp_path: Path, store: ImageStore
) -> None:
    """A layout or a tarball whose manifest breaks the format is ``ImageError``, as a
    registry's is (``oci.parse_manifest``): before, the same manifest was ``ConfigError`` here."""
    write_oci_layout(tmp_path / "oci", LAYERS)
    index = json.loads((tmp_path / "oci/index.json").read_text())
    config = {"mediaType": "application/json", "digest": "x", "size": 1}
    broken = json.dumps({"schemaVersion": 2, "config": config, "layers": []}).encode()
    blob = tmp_path / "oci/blobs/sha256" / hashlib.sha256(broken).hexdigest()
    blob.write_bytes(broken)
    top = index["manifests"][0]
    top.update(digest=f"sha256:{blob.name}", size=len(broken))
    (tmp_path / "oci/index.json").write_text(json.dumps(index))
    with pytest.raises(ImageError) as from_layout:
        store.import_layout(tmp_path / "oci")
    with tarfile.open(tmp_path / "oci.tar", "w") as tar:
        tar.add(tmp_path / "oci", arcname=".")
    with pytest.raises(ImageError) as from_tarball:
        store.import_tarball(tmp_path / "oci.tar")
    with pytest.raises(ImageError) as from_registry:
        parse_manifest(broken)
    what = "config: digest 'x' is not sha256: and 64 lower-case hex digits"
    for info in (from_layout, from_tarball, from_registry):
        assert str(info.value).endswith(what) and not isinstance(info.value, ConfigError)


def test_a_blob_whose_digest_does_not_match_is_refused(tmp_path: Path, store: ImageStore) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS)
    manifest = json.loads(_only_manifest(tmp_path / "oci"))
    layer = tmp_path / "oci/blobs/sha256" / manifest["layers"][1]["digest"][7:]
    data = bytearray(layer.read_bytes())
    data[-1] ^= 1
    layer.write_bytes(bytes(data))
    with pytest.raises(
        ImageError, match=r"has digest sha256:[0-9a-f]{64} \(\d+ of \d+ bytes\): refused"
    ):
        store.import_layout(tmp_path / "oci", "x")
    assert not list((store.blobs_dir / "sha256").glob(manifest["layers"][1]["digest"][7:]))
    config = tmp_path / "oci/blobs/sha256" / manifest["config"]["digest"][7:]
    config.write_bytes(config.read_bytes() + b" ")
    with pytest.raises(ImageError, match="is longer than its size"):
        open_image(tmp_path / "oci")


def test_a_tampered_docker_save_layer_is_refused(tmp_path: Path, store: ImageStore) -> None:
    write_docker_save(tmp_path / "saved.tar", [{"a": "original"}])
    with open(tmp_path / "saved.tar", "r+b") as f:
        data = f.read()
        f.seek(data.index(b"original"))
        f.write(b"tampered")
    with pytest.raises(
        ImageError, match=r"layer 00/layer.tar has digest .* not sha256:.*: refused"
    ):
        store.import_tarball(tmp_path / "saved.tar")


def _only_manifest(layout: Path) -> bytes:
    top = json.loads((layout / "index.json").read_text())["manifests"][0]
    return (layout / "blobs/sha256" / top["digest"][7:]).read_bytes()


# -- the store ----------------------------------------------------------------------------------


def test_resolve_twice_unpacks_once(
    tmp_path: Path, store: ImageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    real = store_module.unpack_layers
    monkeypatch.setattr(
        store_module,
        "unpack_layers",
        lambda root, layers, base=None: (calls.append(root), real(root, layers, base)),
    )
    write_oci_layout(tmp_path / "oci", LAYERS)
    store.import_layout(tmp_path / "oci", "img")
    first = store.resolve("img")
    again = ImageStore(tmp_path / "home").resolve(first.digest)
    assert first == again and len(calls) == 1
    assert [(e.ref, e.unpacked) for e in store.list()] == [("img", True)]


def test_an_unknown_ref_suggests_the_closest(tmp_path: Path, store: ImageStore) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS)
    store.import_layout(tmp_path / "oci", "debian:bookworm")
    with pytest.raises(
        ConfigError, match=r"unknown image 'debian:bookwrom'.*did you mean 'debian:bookworm'\?"
    ):
        store.resolve("debian:bookwrom")
    with pytest.raises(ConfigError, match=r"no image sha256:0{64} in the store"):
        store.resolve("sha256:" + "0" * 64)


def test_an_unpack_that_fails_mid_layer_leaves_no_root(
    tmp_path: Path, store: ImageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS)
    digest = store.import_layout(tmp_path / "oci", "img")
    real, seen = Unpacker._entry, []

    def crash(self: Unpacker, tar: object, member: object) -> None:
        seen.append(member)
        if len(seen) == 4:
            raise KeyboardInterrupt  # as a kill would: mid-layer
        real(self, tar, member)  # type: ignore[arg-type]

    monkeypatch.setattr(Unpacker, "_entry", crash)
    with pytest.raises(KeyboardInterrupt):
        store.resolve("img")
    assert os.listdir(store.roots_dir) == [] and os.listdir(store.path / "tmp") == []
    monkeypatch.setattr(Unpacker, "_entry", real)
    killed = store.path / "tmp" / f"{digest[7:]}.leftover"  # what SIGKILL would leave
    (killed / "half").mkdir(parents=True)
    assert (store.resolve("img").rootfs / "etc/motd").is_file()
    assert os.listdir(store.path / "tmp") == []


def test_prune_frees_an_unreferenced_image(tmp_path: Path, store: ImageStore) -> None:
    write_oci_layout(tmp_path / "a", LAYERS)
    write_oci_layout(tmp_path / "b", [TWO_LAYERS[0], {"only-b": "x" * 100_000}])
    keep = store.resolve(store.import_layout(tmp_path / "a", "a"))
    drop = store.resolve(store.import_layout(tmp_path / "b", "b"))
    before = store.size()
    assert store.prune() == 0
    store.remove("b")
    freed = store.prune()
    assert freed > 100_000 and store.size() <= before - freed + 8192  # index.json may grow a block
    assert not drop.rootfs.exists() and keep.rootfs.exists()
    assert not (store.blobs_dir / "sha256" / drop.digest[7:]).exists()
    blobs = set(os.listdir(store.blobs_dir / "sha256"))
    shared = json.loads(_only_manifest(tmp_path / "a"))["layers"][0]["digest"][7:]
    assert shared in blobs  # the layer both images share stays for the one still named
    assert store.resolve("a") == keep
    with pytest.raises(ConfigError, match="unknown image 'b'"):
        store.remove("b")


def test_add_blobs_manifest_names_what_another_writer_put(
    tmp_path: Path, store: ImageStore
) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS, other_platform="linux/s390x")
    index_digest = json.loads((tmp_path / "oci/index.json").read_text())["manifests"][0]["digest"]
    with store.writing():
        target = store.blobs_dir / "sha256"
        for blob in (tmp_path / "oci/blobs/sha256").iterdir():
            shutil.copy(blob, target / blob.name)
    digest = store.add_blobs_manifest(index_digest, "pulled")
    assert digest != index_digest and (store.resolve("pulled").rootfs / "etc/motd").is_file()
    manifest = json.loads((target / digest[7:]).read_bytes())
    (target / manifest["layers"][0]["digest"][7:]).unlink()
    with pytest.raises(ImageError, match="is missing"):
        store.add_blobs_manifest(digest, "broken")


_RESOLVE = """
import sys
from pathlib import Path
from deepgym.images.store import ImageStore
print(ImageStore(Path(sys.argv[1])).resolve("img").rootfs)
"""


def test_two_processes_resolving_one_image_share_one_root(
    tmp_path: Path, store: ImageStore
) -> None:
    many = {f"f/{i:03d}": "x" * 2000 for i in range(300)}
    write_oci_layout(tmp_path / "oci", [*LAYERS, many])
    store.import_layout(tmp_path / "oci", "img")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RESOLVE, str(tmp_path / "home")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0] and len(os.listdir(store.roots_dir)) == 1
    assert len(os.listdir(Path(outs[0][0].strip()) / "f")) == 300
    assert os.listdir(store.path / "tmp") == []


def test_a_stored_layer_corrupted_after_import_is_refused_at_unpack(
    tmp_path: Path, store: ImageStore
) -> None:
    write_oci_layout(tmp_path / "oci", LAYERS)
    digest = store.import_layout(tmp_path / "oci", "img")
    manifest = json.loads((store.blobs_dir / "sha256" / digest[7:]).read_bytes())
    blob = store.blobs_dir / "sha256" / manifest["layers"][0]["digest"][7:]
    raw = gzip.decompress(blob.read_bytes()).replace(b"hello\n", b"HELLO\n")
    blob.write_bytes(gzip.compress(raw, mtime=0))  # a valid layer, not the one named
    with pytest.raises(ImageError, match="refused"):
        store.resolve("img")
    assert os.listdir(store.roots_dir) == [] and os.listdir(store.path / "tmp") == []


def test_images_that_share_their_first_layers_share_their_files_on_disk(
    tmp_path: Path, store: ImageStore
) -> None:
    """A corpus's tasks: one toolchain's layers, then each task's own. The second image's root
    starts as hard links to the first's (no second copy of the toolchain), its own layer
    removes and replaces files in its copy only, and each root is what unpacking it whole
    gives."""
    base = {
        "usr/": Entry("dir"),
        "usr/lib/": Entry("dir", mode=0o555),
        "usr/lib/tool": b"toolchain" * 1000,
        "usr/lib/gone": b"lower",
        "etc/conf": b"v1",
    }
    task = {"etc/conf": b"v2", "usr/lib/.wh.gone": b"", "app/main.c": b"int main;"}
    write_oci_layout(tmp_path / "one", [base], ref="one")
    write_oci_layout(tmp_path / "two", [base, task], ref="two")
    store.import_layout(tmp_path / "one", "one")
    store.import_layout(tmp_path / "two", "two")
    one = store.resolve("one").rootfs
    before = _tree(one)
    two = store.resolve("two").rootfs
    assert _tree(one) == before  # the first root is as it was
    tool = (one / "usr/lib/tool").stat()
    assert (two / "usr/lib/tool").stat().st_ino == tool.st_ino  # one copy on disk
    assert tool.st_nlink == 2
    assert (two / "etc/conf").read_bytes() == b"v2" and (one / "etc/conf").read_bytes() == b"v1"
    assert not (two / "usr/lib/gone").exists() and (one / "usr/lib/gone").exists()
    assert stat.S_IMODE((two / "usr/lib").stat().st_mode) == 0o555  # set back after the layer
    whole = ImageStore(tmp_path / "alone")
    whole.import_layout(tmp_path / "two", "two")
    assert _tree(whole.resolve("two").rootfs) == _tree(two)
