"""Trainer adapters: one module per framework, each in that framework's own calling convention.

Every adapter uses only deepgym's public API, imports its framework lazily (``import deepgym``
never imports one) and never imports another adapter; shared pieces live in
``deepgym.integrations.reward``, ``deepgym.reward_function`` and ``deepgym.completions``.
What each trainer receives for a run without a verdict is the contract's table ("What each
trainer receives").
"""
