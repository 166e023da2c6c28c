"""MkDocs hooks: the site's results page is ``benchmarks/RESULTS.md`` itself, and the service
page's request bodies come from the protocol's models (``deepgym.server.openapi``).

Measured figures live in one file. The pages link to it as ``../benchmarks/RESULTS.md`` (a link
that works where the Markdown is read as files, on a forge), and the site serves the same file as
``results.md``: ``on_files`` adds it, ``on_page_markdown`` points the links there.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "RESULTS.md"
PAGE = "results.md"
_LINK = re.compile(r"\]\((?:\.\./)+benchmarks/RESULTS\.md(#[^)\s]*)?\)")


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, PAGE, abs_src_path=str(RESULTS)))
    return files


BODIES = "<!-- request-bodies -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if BODIES in markdown:
        from deepgym.server.openapi import request_body_tables

        markdown = markdown.replace(BODIES, request_body_tables())
    here = posixpath.dirname(page.file.src_uri)
    target = posixpath.relpath(PAGE, here or ".")
    return _LINK.sub(lambda m: f"]({target}{m.group(1) or ''})", markdown)
