"""agio-notebook: a Jupyter-native execution engine for LLM agents."""

__version__ = "0.1.0"
