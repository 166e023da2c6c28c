"""Durations written the short way: ``"1h30m"``, ``"45s"``."""

from durations.parse import parse_duration

__all__ = ["parse_duration"]
