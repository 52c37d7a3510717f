"""Tools: ``@tool`` functions, their schemas, and a registry."""

from .base import Tool, ToolResult
from .context import ToolCallContext, get_call
from .decorator import tool
from .registry import ToolRegistry

__all__ = ["Tool", "ToolCallContext", "ToolRegistry", "ToolResult", "get_call", "tool"]
