"""HTML fragments that read as text wherever a notebook is shown."""

from __future__ import annotations

# MathJax 3+ (JupyterLab) skips elements of class mathjax_ignore; MathJax 2 (nbviewer) tex2jax_ignore
_NO_MATH = "mathjax_ignore tex2jax_ignore"


def text_html(fragment: str) -> str:
    """``fragment`` in a block MathJax leaves alone, with every ``$`` as an entity.

    JupyterLab typesets HTML outputs, so two dollar amounts in one table become a formula. The class
    stops MathJax at the block (MathJax also never pairs delimiters across elements); the entity keeps
    text-level processors (Markdown exports) from seeing a dollar sign at all. ``$`` never occurs in
    the package's own markup, so replacing it everywhere only touches text.
    """
    return f'<div class="{_NO_MATH}">{fragment.replace("$", "&#36;")}</div>'
