"""deepgym: verifiable rewards for RL training that a model's answer cannot forge.

``import deepgym`` stays light: names load on first use (no heavy optional dependency).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AsyncDeepGym": "deepgym.client",
    "AsyncRewardFunction": "deepgym.reward_function",
    "BatchResult": "deepgym.models",
    "CaseResult": "deepgym.models",
    "ConfigError": "deepgym.exceptions",
    "DeepGym": "deepgym.client",
    "DeepGymError": "deepgym.exceptions",
    "DeepGymTimeoutError": "deepgym.exceptions",
    "ChatModel": "deepgym.eval.model",
    "Environment": "deepgym.models",
    "EvalResult": "deepgym.models",
    "GenerationError": "deepgym.exceptions",
    "ImageError": "deepgym.exceptions",
    "InvalidScoreError": "deepgym.exceptions",
    "MODEL_FAULT_ERRORS": "deepgym.verdict",
    "NoVerdictError": "deepgym.exceptions",
    "RegistryError": "deepgym.exceptions",
    "PoolBackend": "deepgym.sandbox.pool",
    "RewardFunction": "deepgym.reward_function",
    "RunResult": "deepgym.models",
    "SandboxDiedError": "deepgym.exceptions",
    "SandboxError": "deepgym.exceptions",
    "SandboxExpiredError": "deepgym.exceptions",
    "SandboxUnavailableError": "deepgym.exceptions",
    "TimeLimitPolicy": "deepgym.scheduling",
    "Totals": "deepgym.models",
    "TransportError": "deepgym.exceptions",
    "UnknownEnvironmentError": "deepgym.exceptions",
    "UnknownSessionError": "deepgym.exceptions",
    "VerifierCodeRefusedError": "deepgym.exceptions",
    "VerifierError": "deepgym.exceptions",
    "checked_score": "deepgym.verdict",
    "is_infrastructure_failure": "deepgym.exceptions",
    "is_misconfiguration": "deepgym.exceptions",
    "list_environments": "deepgym.envs.registry",
    "list_suites": "deepgym.envs.registry",
    "load_environment": "deepgym.envs.registry",
    "load_suite": "deepgym.envs.registry",
    "make_backend": "deepgym.sandbox",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from deepgym.client import AsyncDeepGym as AsyncDeepGym
    from deepgym.client import DeepGym as DeepGym
    from deepgym.envs.registry import list_environments as list_environments
    from deepgym.envs.registry import list_suites as list_suites
    from deepgym.envs.registry import load_environment as load_environment
    from deepgym.envs.registry import load_suite as load_suite
    from deepgym.eval.model import ChatModel as ChatModel
    from deepgym.exceptions import ConfigError as ConfigError
    from deepgym.exceptions import DeepGymError as DeepGymError
    from deepgym.exceptions import DeepGymTimeoutError as DeepGymTimeoutError
    from deepgym.exceptions import GenerationError as GenerationError
    from deepgym.exceptions import ImageError as ImageError
    from deepgym.exceptions import InvalidScoreError as InvalidScoreError
    from deepgym.exceptions import NoVerdictError as NoVerdictError
    from deepgym.exceptions import RegistryError as RegistryError
    from deepgym.exceptions import SandboxDiedError as SandboxDiedError
    from deepgym.exceptions import SandboxError as SandboxError
    from deepgym.exceptions import SandboxExpiredError as SandboxExpiredError
    from deepgym.exceptions import SandboxUnavailableError as SandboxUnavailableError
    from deepgym.exceptions import TransportError as TransportError
    from deepgym.exceptions import UnknownEnvironmentError as UnknownEnvironmentError
    from deepgym.exceptions import UnknownSessionError as UnknownSessionError
    from deepgym.exceptions import VerifierCodeRefusedError as VerifierCodeRefusedError
    from deepgym.exceptions import VerifierError as VerifierError
    from deepgym.exceptions import is_infrastructure_failure as is_infrastructure_failure
    from deepgym.exceptions import is_misconfiguration as is_misconfiguration
    from deepgym.models import BatchResult as BatchResult
    from deepgym.models import CaseResult as CaseResult
    from deepgym.models import Environment as Environment
    from deepgym.models import EvalResult as EvalResult
    from deepgym.models import RunResult as RunResult
    from deepgym.models import Totals as Totals
    from deepgym.reward_function import AsyncRewardFunction as AsyncRewardFunction
    from deepgym.reward_function import RewardFunction as RewardFunction
    from deepgym.sandbox import make_backend as make_backend
    from deepgym.sandbox.pool import PoolBackend as PoolBackend
    from deepgym.scheduling import TimeLimitPolicy as TimeLimitPolicy
    from deepgym.verdict import MODEL_FAULT_ERRORS as MODEL_FAULT_ERRORS
    from deepgym.verdict import checked_score as checked_score


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'deepgym' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
