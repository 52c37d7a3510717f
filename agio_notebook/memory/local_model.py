"""The local embedding model: WordLlama, whose PyPI wheel carries its weights and tokenizer.

``pip install 'agio-notebook[embeddings]'`` installs it (``scripts/setup.sh`` does, for the lab and the
tests). It never downloads anything: it is loaded from the package's own folder with downloads off
(its loader looks for the bundled tokenizer under ``tokenizer/`` while the wheel has ``tokenizers/``,
then would try a download). Chosen over the other models that install from PyPI after measuring them
on the tests' recall set (``docs/memory.md``): it embeds a record in ~0.03 ms and loads in ~0.1 s.

Every vector is stored with the model's ``name`` and ``version``; a store written by another model
or version is re-embedded, not compared across models.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import AgioError

if TYPE_CHECKING:
    import numpy as np

INSTALL_HINT = "pip install 'agio-notebook[embeddings]'"


class EmbeddingsError(AgioError):
    """An embedding model that is missing, or whose vectors do not fit the stored ones."""


@dataclass(frozen=True)
class LocalEmbeddings:
    """The bundled WordLlama model (256 dimensions): ``embed(texts)`` gives L2-normalised rows."""

    name: str = "wordllama/l2_supercat"
    dim: int = 256

    @property
    def version(self) -> str:
        return _version()

    @property
    def label(self) -> str:
        return f"{self.name} {self.version} ({self.dim} dimensions)"

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        vectors = np.asarray(_model(self.dim).embed(list(texts), norm=True), dtype=np.float32)
        return vectors.reshape(len(texts), self.dim)


@functools.cache
def _version() -> str:
    """The installed package's version (read once: a metadata lookup costs milliseconds)."""
    from importlib.metadata import version

    return version("wordllama")


_loaded: dict[int, Any] = {}
_load_lock = threading.Lock()


def _model(dim: int) -> Any:
    """The WordLlama model, loaded once per process from the package folder, downloads off."""
    model = _loaded.get(dim)
    if model is not None:
        return model
    with _load_lock:
        if dim not in _loaded:
            try:
                import wordllama
                from wordllama import WordLlama
            except ImportError:
                raise EmbeddingsError(f"the local embedding model is not installed: {INSTALL_HINT}") from None
            from pathlib import Path

            try:
                _loaded[dim] = WordLlama.load(dim=dim, cache_dir=Path(wordllama.__file__).parent,
                                              disable_download=True)
            except (FileNotFoundError, OSError, ValueError) as exc:
                raise EmbeddingsError(f"the local embedding model could not be loaded ({type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0][:120]}); reinstall it: {INSTALL_HINT}") from None
        return _loaded[dim]


def installed() -> bool:
    """Whether the local model's package is importable (without loading it)."""
    from importlib.util import find_spec

    return find_spec("wordllama") is not None


def local_embeddings() -> LocalEmbeddings | None:
    """The local model when installed, else None (retrieval is then lexical)."""
    return LocalEmbeddings() if installed() else None


def require_local() -> LocalEmbeddings:
    """The local model, or one line saying how to install it."""
    if not installed():
        raise EmbeddingsError(f"the local embedding model is not installed: {INSTALL_HINT}")
    return LocalEmbeddings()
