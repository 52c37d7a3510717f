"""What every view of the package shares: HTML that stays text, and graph layouts the extension draws.

Fallback HTML must survive JupyterLab's sanitiser and LaTeX typesetting, GitHub and nbviewer: no inline
SVG (it is stripped), no ``$`` that MathJax could pair into math. Pictures travel as laid-out data (the
extension draws them) and as PNG.
"""

from .graph import GraphLayout, graph_layout, graph_png
from .html import text_html
from .words import counted, seconds

__all__ = ["GraphLayout", "counted", "graph_layout", "graph_png", "seconds", "text_html"]
