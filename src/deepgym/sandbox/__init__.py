"""Sandbox backends: one small protocol, explicit selection, never a silent fallback."""
