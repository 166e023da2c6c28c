#!/bin/bash
# Written for deepgym's tests in Harbor's layout (terminal-bench ran pytest on tests/ itself):
# the reward is 1 when every test passes, else 0.
mkdir -p /logs/verifier
cd /app
if python3 -m pytest -q -p no:cacheprovider /tests/test_outputs.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
