"""Agent: a model, its tools and its instructions — what a runner runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .core import ExecutionConfig
from .models import default_model
from .models.base import Model
from .models.settings import check_settings
from .tools import Tool, ToolRegistry, tool


@dataclass
class Agent:
    """Plain functions in ``tools`` are wrapped with :func:`agio_notebook.tool`.

    ``model=None`` picks :func:`agio_notebook.models.default_model` (offline unless an endpoint is
    configured).  ``config`` is the agent's default :class:`ExecutionConfig`; a runner's own wins.
    ``memory`` is an :class:`agio_notebook.memory.MemoryConfig` (None: the defaults, retrieval on).
    ``model_settings`` (``temperature``, ``max_tokens``, ``tool_choice``, ``extra_body``...) go with every
    model call; a run's ``ExecutionConfig.model_settings`` (e.g. from ``%%agio --settings``) override them.
    """

    model: Model | None = None
    tools: Sequence[Tool | Callable[..., Any]] = ()
    system_prompt: str | None = None
    name: str = "agent"
    config: ExecutionConfig | None = None
    memory: Any = None
    model_settings: dict[str, Any] | None = None
    registry: ToolRegistry = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.model is None:
            self.model = default_model()
        self.model_settings = check_settings(self.model_settings) or None
        self.registry = ToolRegistry([t if isinstance(t, Tool) else tool(t) for t in self.tools])

    @property
    def model_name(self) -> str:
        return getattr(self.model, "name", type(self.model).__name__)

    def close(self) -> None:
        """Release what the agent's tools hold (e.g. a browser's contexts); safe to call twice."""
        for t in self.registry:
            if t.close is not None:
                t.close()

    def with_tools(self, tools: Sequence[Tool | Callable[..., Any]]) -> Agent:
        """The same agent with more tools (e.g. a cell's ``--mcp`` servers); names must stay unique."""
        return Agent(model=self.model, tools=[*self.registry, *tools], system_prompt=self.system_prompt,
                     name=self.name, config=self.config, model_settings=self.model_settings, memory=self.memory)

    def with_model(self, model: Model) -> Agent:
        """The same agent on another model (e.g. to retry a step with a stronger one)."""
        return Agent(model=model, tools=list(self.registry), system_prompt=self.system_prompt,
                     name=self.name, config=self.config, model_settings=self.model_settings, memory=self.memory)
