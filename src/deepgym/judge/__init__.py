"""The judge: code that runs *inside* the sandbox (standard library only).

Two processes per run, never one. The verifier process (``harness``) loads the verifier and the
test data and drives the checks; the solution process (``solution_host``) holds the answer and
serves plain-data calls (``wire``) on a pair of pipes. The verdict travels on a private file
descriptor only the verifier process holds, so nothing the answer prints can become a score.

Threat model: the answer is hostile. It runs in its own namespaces (user, pid, mount, net, ipc,
uts), cannot see the verifier's files or processes, has no network and no host environment, and
runs under limits on memory, processes, file size, open files and CPU time. The verifier is
trusted but sandboxed too (no network, no host files beyond the ones it needs).

Inside the sandbox this package is mounted as ``deepgym_judge`` and imports only its siblings,
so nothing here may import ``deepgym``.

Modules: ``_boot`` (the entry point of every sandboxed process), ``harness`` (the verifier
process and its drivers), ``rpc`` (the verifier's RPC with the solution process and the objects
a verifier sees), ``launch`` (starting and supervising solution processes), ``errors`` (the
exceptions a verifier sees), ``solution_host`` (the solution process), ``worker`` (a pool worker
and its zygote), ``isolate`` (the system calls a pool worker isolates with), ``wire`` (the
plain-data codec), ``compare`` and ``patch`` (checking values and diffs), ``blame`` (who used the
time), ``files`` (a run's files into a program's work dir, and back out of it), ``agent_shell``
and ``session_verify`` (an agent session's shell and its verifier), and ``codes`` (the numbers
the host and the judge agree on; imports nothing).

One rule turns a verifier's return value into a report, ``report.report_from_value``: the
function task's verifier (``harness``) and a session's final verifier (``session_verify``) both
follow it.
"""
