"""Evaluating a model end to end (``deepgym eval --model-url``, ``DeepGym.eval_model``).

- ``model``: the model client (``ChatModel``, any OpenAI-compatible server): one deadline per
  request, a capped reply read as a stream, one retry policy; a sample it cannot give is a
  ``GenerationError``, never a 0.
- ``evaluate``: samples answers, scores each as it arrives (per problem, identical answers
  sharing one run), and keeps every sample in the run store.
- ``passk``: the unbiased pass@k and pass^k, no-verdict samples left out of n.
"""
