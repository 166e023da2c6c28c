"""The Dockerfile subset an image build runs (``deepgym.images.recipe``): pure."""

from __future__ import annotations

import pytest

from deepgym.exceptions import ConfigError
from deepgym.images.build import debian_suite
from deepgym.images.dockerfile import parse
from deepgym.images.recipe import CopyStep, MkdirStep, RunStep, recipe

TASK = """\
FROM debian:bookworm-slim
ARG PKG=jq
ENV LANG=C.UTF-8 TOOL=$PKG
RUN apt-get update && apt-get install -y --no-install-recommends ${PKG}
WORKDIR /app
COPY --chmod=755 run.sh ./
RUN ["python3", "-c", "print(1)"]
USER nobody
RUN id -u
EXPOSE 8080
CMD ["bash"]
"""


def test_a_task_dockerfile_becomes_steps_and_a_config() -> None:
    r = recipe(parse(TASK))
    assert r.base == "debian:bookworm-slim"
    kinds = [type(s) for s in r.steps]
    assert kinds == [RunStep, MkdirStep, CopyStep, RunStep, RunStep]
    first = r.steps[0]
    assert isinstance(first, RunStep)
    assert first.argv == (
        "/bin/sh",
        "-c",
        "apt-get update && apt-get install -y --no-install-recommends ${PKG}",
    )  # the shell expands it
    assert ("TOOL", "jq") in first.env and first.cwd == "/" and first.user == "root"
    exec_form, as_nobody = r.steps[3], r.steps[4]
    assert isinstance(exec_form, RunStep) and exec_form.argv == ("python3", "-c", "print(1)")
    assert exec_form.cwd == "/app"
    assert isinstance(as_nobody, RunStep) and as_nobody.user == "nobody"
    copy = r.steps[2]
    assert isinstance(copy, CopyStep) and copy.copy.dest == "/app" and copy.copy.chmod == 0o755
    config = r.config()
    assert config["WorkingDir"] == "/app" and config["User"] == "nobody"
    assert config["Cmd"] == ["bash"] and config["ExposedPorts"] == {"8080/tcp": {}}
    assert "LANG=C.UTF-8" in config["Env"]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("FROM a AS b\nFROM c\n", "second FROM"),
        ("FROM a\nCOPY --from=b /x /y\n", "another stage"),
        ("FROM a\nADD https://example.org/x /x\n", "fetches"),
        ("FROM a\nADD data.tar.gz /x\n", "unpacks"),
        ("FROM a\nRUN --mount=type=cache,target=/x true\n", "RUN options"),
        ('FROM a\nSHELL ["/bin/bash", "-c"]\n', "SHELL is outside"),
        ("FROM a\nONBUILD RUN true\n", "ONBUILD is outside"),
        ("RUN true\n", "before FROM"),
        ("# nothing\n", "no FROM"),
        ("FROM a\nRUN [1, 2]\n", "list of strings"),
    ],
)
def test_outside_the_subset_is_refused_naming_the_line(text: str, what: str) -> None:
    with pytest.raises(ConfigError, match=what):
        recipe(parse(text))


@pytest.mark.parametrize(
    ("image", "suite"),
    [
        ("debian:bookworm", "bookworm"),
        ("debian:12", "bookworm"),
        ("debian:12.7-slim", "bookworm"),
        ("debian", "stable"),
        ("docker.io/library/debian:trixie-slim", "trixie"),
        ("ubuntu:24.04", None),
        ("debian@sha256:" + "0" * 64, None),
        ("127.0.0.1:5000/debian:12", None),
    ],
)
def test_which_bases_mmdebstrap_builds(image: str, suite: str | None) -> None:
    assert debian_suite(image) == suite
