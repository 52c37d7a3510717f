"""Errors of the built-in actions: each is one line, shown to the model as the tool's error result."""

from __future__ import annotations

from ..core import AgioError


class ActionError(AgioError):
    """An action was refused or failed (blocked path, blocked address, limit reached, timeout)."""


class IsolationUnavailable(ActionError):
    """No OS isolation can be had here; the sandbox refuses unless a weaker level was chosen."""
