"""Built-in problem sources whose steps can be checked, prompts, and the symbolic step checker; the
``agent`` tool-use environment and its model organisms."""

from prmkit.envs._agent import (
    LOOPHOLES,
    STEP_LABELS,
    TOOLS,
    AgentConfig,
    AgentEnv,
    AgentTask,
    Episode,
    EpisodeStopped,
    agent_labels,
    episode_trace,
    grade,
)
from prmkit.envs._arith import OPS, ArithConfig, ArithEnv
from prmkit.envs._checker import VERDICTS, Computation, StepCheck, SymbolicChecker, numbers_in_text
from prmkit.envs._organisms import (
    ORGANISMS,
    AgentRunReport,
    ChatAgent,
    Organism,
    agent_file,
    export_messages_file,
    get_agent,
    load_agents,
    run_episode,
)
from prmkit.envs._prompts import HAND_WRITTEN_SHOTS, SYSTEM_PROMPT, PromptBuilder
from prmkit.envs._spec import (
    DEFAULT_SPEC,
    SPEC_ORGANISMS,
    Spec,
    SpecEnv,
    SpecRequest,
    SpecRule,
    SpecRunReport,
    load_spec,
    refusal_rate_lines,
    refusal_rates,
    spec_file,
    spec_trajectory,
)

__all__ = ["ArithConfig", "ArithEnv", "OPS", "SymbolicChecker", "StepCheck", "Computation", "VERDICTS",
           "numbers_in_text", "PromptBuilder", "SYSTEM_PROMPT", "HAND_WRITTEN_SHOTS",
           "AgentConfig", "AgentEnv", "AgentTask", "Episode", "EpisodeStopped", "TOOLS", "STEP_LABELS",
           "LOOPHOLES", "grade", "agent_labels", "episode_trace", "ORGANISMS", "Organism", "ChatAgent",
           "get_agent", "run_episode", "agent_file", "AgentRunReport", "load_agents",
           "export_messages_file", "Spec", "SpecRule", "SpecEnv", "SpecRequest", "DEFAULT_SPEC",
           "SPEC_ORGANISMS", "load_spec", "spec_trajectory", "refusal_rates", "refusal_rate_lines",
           "SpecRunReport", "spec_file"]
