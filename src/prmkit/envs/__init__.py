"""Built-in problem sources whose steps can be checked, prompts, and the symbolic step checker."""

from prmkit.envs._arith import OPS, ArithConfig, ArithEnv
from prmkit.envs._checker import VERDICTS, Computation, StepCheck, SymbolicChecker, numbers_in_text
from prmkit.envs._prompts import HAND_WRITTEN_SHOTS, SYSTEM_PROMPT, PromptBuilder

__all__ = ["ArithConfig", "ArithEnv", "OPS", "SymbolicChecker", "StepCheck", "Computation", "VERDICTS",
           "numbers_in_text", "PromptBuilder", "SYSTEM_PROMPT", "HAND_WRITTEN_SHOTS"]
