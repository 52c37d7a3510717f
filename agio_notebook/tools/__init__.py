"""Tools: ``@tool`` functions, their schemas, and a registry."""

from .base import Tool, ToolResult
from .decorator import tool
from .registry import ToolRegistry

__all__ = ["Tool", "ToolRegistry", "ToolResult", "tool"]
