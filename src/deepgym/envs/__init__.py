"""Environments: folders on disk, the built-in registry, and benchmark suites."""
