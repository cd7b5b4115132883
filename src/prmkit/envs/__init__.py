"""Built-in problem sources whose steps can be checked, and symbolic step checkers."""

from prmkit.envs._arith import OPS, ArithConfig, ArithEnv

__all__ = ["ArithConfig", "ArithEnv", "OPS"]
