"""The service logs no token (``deepgym.server.logs``): at ``--log-level info`` uvicorn's access
log wrote each request's ``?token=...`` in plain text."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys

import httpx
import pytest

from deepgym.server.logs import REDACTED, RedactTokens, redact

TOKEN = "api-token-7c1e9b2d4f"
WRONG = "wrong-token-3a8d5e"
BEARER = "bearer-secret-6b2f0c1a"


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (f"GET /v1/ping?token={TOKEN} HTTP/1.1", f"GET /v1/ping?token={REDACTED} HTTP/1.1"),
        (f"/run_code?a=1&token={TOKEN}&b=2", f"/run_code?a=1&token={REDACTED}&b=2"),
        (f"/x?TOKEN={TOKEN}#top", f"/x?TOKEN={REDACTED}#top"),
        (f"/x?access_token={TOKEN}", f"/x?access_token={REDACTED}"),
        (f"(b'authorization', b'Bearer {BEARER}')", f"(b'authorization', b'Bearer {REDACTED}')"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", f"Authorization: Basic {REDACTED}"),
        ("a valid bearer token is required", "a valid bearer token is required"),
        ("Bearer token required; /v1/run?tokens=2", "Bearer token required; /v1/run?tokens=2"),
    ],
)
def test_a_token_is_redacted_wherever_it_is_in_a_line(line: str, want: str) -> None:
    assert redact(line) == want


def test_the_filter_redacts_the_arguments_uvicorns_access_formatter_reads() -> None:
    from uvicorn.logging import AccessFormatter

    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/v1/ping?token={TOKEN}", "1.1", 200),
        None,
    )
    assert RedactTokens().filter(record)
    line = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s').format(record)
    assert line == f'127.0.0.1:5000 - "GET /v1/ping?token={REDACTED} HTTP/1.1" 200 OK'


def test_deepgym_serve_at_info_logs_no_token() -> None:
    """The report's case, for real: ``deepgym serve --log-level info`` and requests that bring
    a token in the query (right and wrong), in the ``Authorization`` header, and the console's
    own link; the log has every request and none of the tokens."""
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "deepgym", "serve", "--port", "0", "--no-store"),
            *("--sandbox", "strict", "--token", TOKEN, "--log-level", "info", "--openrlhf"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DEEPGYM_TOKEN": ""},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.match(r"deepgym serve: (http://127\.0\.0\.1:\d+) ", first)
        assert m, first
        url = m.group(1)
        console = proc.stdout.readline().split(" ", 1)[1].strip()
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.get(f"/v1/ping?token={TOKEN}").status_code == 200
            assert client.get(f"/v1/ping?x=1&token={WRONG}").status_code == 401
            body = {"query": ["q"], "prompts": ["p"], "labels": ["two_sum"]}
            client.post(f"/openrlhf/get_reward?token={TOKEN}", json=body)
            headers = {"Authorization": f"Bearer {BEARER}"}
            assert client.get("/v1/environments", headers=headers).status_code == 401
            client.get(console)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    log = first + out + err
    assert out.count(' - "GET /v1/ping?token=REDACTED HTTP/1.1" 200') == 1, log
    assert '/v1/ping?x=1&token=REDACTED HTTP/1.1" 401' in out, log
    assert "/openrlhf/get_reward?token=REDACTED" in out, log
    assert "/console?token=REDACTED" in out, log
    assert TOKEN not in log and WRONG not in log and BEARER not in log
    console_token = console.rsplit("token=", 1)[1]
    assert console_token not in out + err  # only in the link printed at start
