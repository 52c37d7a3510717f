"""ToolRegistry: the tools of one agent, by name."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from .base import Tool


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        self._schemas: list[dict[str, Any]] | None = None
        for t in tools:
            self.add(t)

    def add(self, tool: Tool) -> None:
        if not isinstance(tool, Tool):
            raise TypeError(f"expected a Tool (use @tool), got {type(tool).__name__}")
        if tool.name in self._tools:
            raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
        self._tools[tool.name] = tool
        self._schemas = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        if self._schemas is None:
            self._schemas = [t.schema() for t in self._tools.values()]
        return self._schemas

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools
