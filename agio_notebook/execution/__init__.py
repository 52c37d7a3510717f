"""The execution engine: runner, model <-> tool loop, context, retry, fork, hooks."""

from .agent_tool import NestedRunError
from .approval import ApprovalDecision, ApprovalRequest, Approver, policy_approver
from .attempts import Attempt, attempts_of, use_attempt
from .context import build_context_from_sequence_range, build_context_from_steps
from .fork import fork_session
from .handoff import HandoffError
from .nested import MAX_DEPTH
from .hooks import AgentHook
from .runner import RunResult, StepRunner
from .step_executor import StepExecutor
from .tool_executor import ToolExecutor

__all__ = [
    "AgentHook", "ApprovalDecision", "HandoffError", "MAX_DEPTH", "NestedRunError", "ApprovalRequest", "Approver", "Attempt", "RunResult", "StepExecutor",
    "StepRunner", "ToolExecutor", "build_context_from_sequence_range", "build_context_from_steps", "fork_session",
    "attempts_of", "policy_approver", "use_attempt",
]
