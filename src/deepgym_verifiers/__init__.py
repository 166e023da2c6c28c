"""deepgym's verifiers taskset package: ``vf-eval deepgym-verifiers`` (verifiers 0.4) and
``vf.load_environment("deepgym-verifiers")`` (verifiers 0.3) find it by this name.

verifiers resolves a taskset id to the installed module of that name and takes the ``Taskset``
and ``Harness`` subclasses its ``__all__`` exports; everything lives in
``deepgym.integrations.verifiers``.
"""

from deepgym.integrations.verifiers import DeepGymHarness, DeepGymTaskset, load_environment

__all__ = ["DeepGymHarness", "DeepGymTaskset", "load_environment"]
