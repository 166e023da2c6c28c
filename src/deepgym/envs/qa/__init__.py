"""Quality checks of environments: would their tests catch a wrong answer?

- ``check``: an environment's reference scores 1.0, wrong answers (empty, stub, constant, echo)
  and exploit probes score nothing, reruns agree, time limits fit (``session_check`` for a
  session's agents); ``checks`` holds what they report.
- ``exploits``: the reward-hacking probes, pure functions of an environment.
- ``mutate`` and ``mutants``: mutation testing (the reference's mutants, judged by the
  environment's own verifier), with ``extra_inputs`` for the inputs that tell a survivor apart.
- ``report``: the QA report's one wire shape (``deepgym qa --json``, the run store, the console).
"""
