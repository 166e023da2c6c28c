"""``deepgym serve``: the HTTP service, its Prometheus metrics and the web console.

- ``app.create_app``: the FastAPI app (``/v1/run``, ``/v1/run_batch``, ``/v1/eval``,
  ``/v1/time_limit``, ``/v1/environments``, ``/health``, ``/metrics``, ``/console``).
- ``service.Service``: what the routes drive (pure asyncio): input checks (``inputs``), streaming
  by group (``streams``), recording in the run store, agent sessions (``sessions``), draining at
  shutdown.
- ``metrics``, ``console``, ``svg``: the exposition text, the console's pages, their histograms.
- ``runner``: uvicorn with a graceful drain; ``launch``: the app and its server from plain
  settings (the ``deepgym serve`` and ``deepgym console`` commands live in ``deepgym.cli``).

Threat model: the service runs untrusted answers exactly as local mode does (in sandboxes). A
client is trusted with nothing more: it names environments the service has, or sends declarative
ones by value; verifier code (which runs with the verifier's access) is refused unless the service
was started with ``--allow-verifier-code``, and a client can never name a path on the service.
A bearer token guards the API unless the service is bound to loopback only; the console has a
per-launch token of its own. Request bodies and answer counts are bounded.

Importing this package does not import FastAPI or uvicorn; its modules do.
"""
