"""Faults, each a test: a part of the system killed or starved mid-batch, then the contract checked.

After every fault: each run completes with a verdict or comes back without one (a failure of
ours is never a 0), no result is lost or duplicated, nothing is left behind (processes, cgroups,
workspace folders, open descriptors: ``conftest.Leftovers``), and the pool serves the next batch.

Where each fault is tested:

- a pool worker (where the pool's verifier runs), its zygote, a solution process:
  ``test_kills.py`` (one worker and one run: ``tests/sandbox/test_pool.py``);
- the strict sandbox's verifier process: ``test_kills.py``;
- the service (``deepgym serve``, the writer of its run store) mid-eval, and the eval resumed
  against a fresh service: ``test_service.py`` (a graceful stop: ``tests/server/test_shutdown.py``);
- the run store's writer in a local eval (``deepgym eval`` killed, resumed to the same totals):
  ``tests/test_store.py``; Ctrl-C and SIGTERM: ``tests/cli/test_interrupt.py``;
- a full disk (the answer's work dir, and the host's workspace): ``test_disk.py``;
- the service's own cgroup out of memory headroom: ``test_memory.py``;
- all of it for minutes on end: ``test_soak.py`` (``benchmarks/soak.py``).
"""
