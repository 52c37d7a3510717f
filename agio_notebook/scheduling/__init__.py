"""Scheduled execution: batches, priorities, rate limits, plans, records, and a Ray backend.

Seed names: :class:`Executor` (``execute_tool``, ``execute_tool_async``, ``get_execution_status``,
``cancel_execution``, ``get_execution_result``, ``list_executions``), :class:`Scheduler`
(``schedule_task``, ``get_task_status``, ``cancel_task``, ``get_queue_status``) and
:class:`WorkerPool` (``submit_work``, ``get_work_status``, ``get_pool_status``).
"""

from .batch import BatchHandle, batch, resume_batch, run_jobs
from .errors import SchedulingError
from .executor import ExecutionRequest, Executor, Scheduler, WorkerPool, default_executor
from .frames import executions
from .limits import RateLimit
from .plans import Plan, PlanExecutor, PlanHandle, Task, execute_plan
from .records import EXEC_STATUSES, ExecStatus, ExecutionRecord, ExecutionStore

__all__ = [
    "BatchHandle", "EXEC_STATUSES", "ExecStatus", "ExecutionRecord", "ExecutionRequest", "ExecutionStore", "Executor",
    "Plan", "PlanExecutor", "PlanHandle", "RateLimit", "Scheduler", "Task", "execute_plan", "SchedulingError", "WorkerPool", "batch", "default_executor", "executions",
    "resume_batch", "run_jobs",
]
