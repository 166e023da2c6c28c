"""Test data, not tests: the Harbor tasks' own test files run inside their sandboxes only."""

collect_ignore_glob = ["*"]
