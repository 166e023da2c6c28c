"""Container images: a session's open on a cached image, and the first pull and unpack of an
image, each against a baseline measured in the same run.

1. Open + close of a session (``envs/agent/fix_add``) on a cached image (a Debian bookworm root
   with busybox and bash, built with mmdebstrap), against the same session on the host's system
   and one ``strict`` run of ``two_sum``'s reference, interleaved round by round; the session
   keeps a warm standby for the next open of an environment, and the strict run between opens
   gives it time to boot, so the figures are warm opens (as ``benchmarks/sessions.py``).
   Target: p50 <= 50 ms on the image. ``docker run --rm IMAGE true`` is the other baseline
   where a Docker daemon answers (skipped, and said so, where none does).
2. First pull and unpack of a ~100 MB image (the Debian root plus a layer of 96 MiB of random
   bytes in 16 files) from Debian's ``docker-registry`` on 127.0.0.1 into an empty store,
   against the floor of the same work: raw reads of the same blobs over HTTP and a plain
   ``tar -x`` of them.

    python benchmarks/images.py [--opens 30] [--mib 96] [--out PATH]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import interleaved, print_table, summarise, write_json  # noqa: E402
from tests.sandbox.image_fixtures import build_root, cache_dir  # noqa: E402

from deepgym import DeepGym, load_environment  # noqa: E402
from deepgym.envs.registry import load_folder  # noqa: E402
from deepgym.images.distribution import pull, push  # noqa: E402
from deepgym.images.store import ImageStore  # noqa: E402

TARGET_OPEN_MS = 50.0
EXAMPLE = ROOT / "src" / "deepgym" / "envs" / "agent" / "fix_add"


def root_layer(root: Path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*")):
            if path.is_symlink() or path.is_file() or path.is_dir():
                tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
    return out.getvalue()


def random_layer(mib: int) -> bytes:
    out = io.BytesIO()
    per = mib // 16
    with tarfile.open(fileobj=out, mode="w") as tar:
        for i in range(16):
            data = os.urandom(per << 20)
            info = tarfile.TarInfo(f"opt/blob/{i:02d}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def write_layout(layout: Path, layers: list[bytes]) -> str:
    """An OCI layout of ``layers`` (uncompressed tars, gzip'd here); the manifest digest."""
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)

    def put(data: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"digest": f"sha256:{digest}", "size": len(data)}

    descs = [
        put(gzip.compress(raw, compresslevel=1, mtime=0))
        | {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip"}
        for raw in layers
    ]
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"]},
        "rootfs": {
            "type": "layers",
            "diff_ids": ["sha256:" + hashlib.sha256(r).hexdigest() for r in layers],
        },
    }
    config_desc = put(json.dumps(config).encode()) | {
        "mediaType": "application/vnd.oci.image.config.v1+json"
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": descs,
    }
    top = put(json.dumps(manifest).encode()) | {
        "mediaType": "application/vnd.oci.image.manifest.v1+json"
    }
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    return str(top["digest"])


def open_close(image: str, opens: int) -> dict[str, Any]:
    host_env = load_folder(EXAMPLE)
    image_env = host_env.model_copy(update={"image": image, "name": "fix_add_on_image"})
    with DeepGym(sandbox="strict") as dg:
        for env in (host_env, image_env):  # the first open of each starts its standby
            dg.session(env).close()

        def arm(env: Any) -> Any:
            return lambda: dg.session(env).close()

        two_sum = load_environment("two_sum")

        def strict() -> None:  # a run between the opens: each standby has time to boot
            if not dg.run(two_sum, two_sum.reference_solution or "").passed:
                raise SystemExit("two_sum's reference failed under strict")

        times = interleaved(
            {
                "session on the image": arm(image_env),
                "session on the host": arm(host_env),
                "strict run (two_sum reference)": strict,
            },
            rounds=opens,
        )
    stats = {name: summarise(xs) for name, xs in times.items()}
    rows = [[name, f"{s['median_ms']:.1f}", f"{s['p90_ms']:.1f}"] for name, s in stats.items()]
    docker = shutil.which("docker")
    daemon = (
        docker is not None
        and subprocess.run([docker, "info"], capture_output=True, timeout=10).returncode == 0
    )
    print(f"\n1. Open + close ({opens} of each, interleaved, warm standby)\n")
    print_table(rows, ["arm", "median ms", "p90 ms"])
    if not daemon:
        print("docker run --rm IMAGE true: skipped, no Docker daemon answers here")
    p50 = stats["session on the image"]["median_ms"]
    print(
        f"on the image: p50 {p50:.1f} ms (target <= {TARGET_OPEN_MS:g} ms: "
        f"{'met' if p50 <= TARGET_OPEN_MS else 'missed'})"
    )
    return {
        "opens": opens,
        "arms": stats,
        "docker": "run" if daemon else "skipped: no daemon",
        "target_ms": TARGET_OPEN_MS,
        "target_met": p50 <= TARGET_OPEN_MS,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pull_unpack(layers: list[bytes], work: Path) -> dict[str, Any]:
    binary = shutil.which("docker-registry")
    if binary is None:
        print("\n2. Pull + unpack: skipped, Debian's docker-registry is not installed")
        return {"skipped": "no docker-registry"}
    port = free_port()
    config = work / "registry.yml"
    config.write_text(
        "version: 0.1\nlog: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {work / 'registry'}}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    proc = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        layout = work / "layout"
        digest = write_layout(layout, layers)
        ref = f"127.0.0.1:{port}/bench/big:1"
        push(layout, ref, digest)
        manifest = json.loads((layout / "blobs/sha256" / digest[7:]).read_bytes())
        total = sum(d["size"] for d in manifest["layers"])
        # the floor: the same blobs read over HTTP, then a plain tar -x of them
        t0 = time.perf_counter()
        floor_dir = work / "floor"
        floor_dir.mkdir()
        for d in manifest["layers"]:
            url = f"http://127.0.0.1:{port}/v2/bench/big/blobs/{d['digest']}"
            with urllib.request.urlopen(url) as r, (floor_dir / "layer.tgz").open("wb") as f:
                shutil.copyfileobj(r, f, 1 << 20)
            subprocess.run(
                ["tar", "-xzf", str(floor_dir / "layer.tgz"), "-C", str(floor_dir)],
                check=True,
                capture_output=True,
            )
        floor_s = time.perf_counter() - t0
        store = ImageStore(work / "home")
        t0 = time.perf_counter()
        with store.writing():
            pulled = pull(ref, store.blobs_dir)
        store.add_blobs_manifest(pulled.digest, ref)
        pulled_s = time.perf_counter() - t0
        store.resolve(ref)
        total_s = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(10)
    rows = [
        ["deepgym pull (verified)", f"{pulled_s:.2f}"],
        ["deepgym pull + unpack", f"{total_s:.2f}"],
        ["floor: HTTP read + tar -xz", f"{floor_s:.2f}"],
    ]
    print(f"\n2. First pull + unpack of a {total / 2**20:.0f} MiB image (compressed)\n")
    print_table(rows, ["arm", "seconds"])
    print(f"pull + unpack / floor = {total_s / floor_s:.2f}x")
    return {
        "compressed_bytes": total,
        "pull_s": pulled_s,
        "pull_unpack_s": total_s,
        "floor_s": floor_s,
        "ratio": total_s / floor_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=30)
    parser.add_argument("--mib", type=int, default=96)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="deepgym-bench-images-") as tmp:
        work = Path(tmp)
        os.environ["DEEPGYM_HOME"] = str(work / "home")
        root = build_root(cache_dir() / "bookworm-busybox-root")
        base = root_layer(root)
        store = ImageStore()
        layout = work / "base-layout"
        digest = write_layout(layout, [base])
        store.import_layout(layout, "bench/debian:1")
        store.resolve("bench/debian:1")
        print(f"image bench/debian:1 ({len(base) / 2**20:.0f} MiB uncompressed): {digest}")
        opened = open_close("bench/debian:1", args.opens)
        fetched = pull_unpack([base, random_layer(args.mib)], work)
    write_json(
        args.out or "images", {"args": vars(args), "open_close": opened, "pull_unpack": fetched}
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
