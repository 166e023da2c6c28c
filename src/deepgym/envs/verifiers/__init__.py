"""Verifier files shipped with deepgym. Each runs inside the sandbox: standard library only."""
