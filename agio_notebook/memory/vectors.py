"""Vectors stored inside memory records, and the in-process index that searches them.

A skill or experience written while the local model is installed carries its vector in its own
document (``doc["vector"]``: model name, version, dimensions and the float16 values in base64), so the
vector travels with the record wherever the memory journal goes (export, migration, another store).
It is computed once when the record is written or its text edited, and recomputed only when the
model (name or version) changes.

:class:`VectorIndex` is derived data, like the lexical index: per kind and scope, a matrix of the
vectors in process memory, built from the journal on the first hybrid retrieval and kept current by
the journal's change feed, so a query is one matrix-vector product per scope.
"""

from __future__ import annotations

import base64
import threading
from typing import TYPE_CHECKING, Any

from .local_model import EmbeddingsError

if TYPE_CHECKING:
    import numpy as np

_DTYPE = "float16"  # half the journal's size; cosine rankings do not move at this precision


def encode(model: Any, vector: np.ndarray) -> dict[str, Any]:
    """The stored form of one vector of ``model`` (a LocalEmbeddings)."""
    import numpy as np

    data = np.asarray(vector, dtype="<f2").tobytes()
    return {"model": model.name, "version": model.version, "dim": int(len(vector)), "dtype": _DTYPE,
            "data": base64.b64encode(data).decode("ascii")}


def decode(stored: dict[str, Any]) -> np.ndarray:
    import numpy as np

    return np.frombuffer(base64.b64decode(stored["data"]), dtype="<f2").astype(np.float32)


def is_current(stored: Any, model: Any) -> bool:
    """Whether a stored vector was made by this model and version (else it is recomputed).

    The same model and version with other dimensions is damage, not a model change: one clear line.
    """
    if not isinstance(stored, dict) or stored.get("model") != model.name or stored.get("version") != model.version:
        return False
    if stored.get("dim") != model.dim:
        raise EmbeddingsError(f"memory holds vectors of {model.name} {model.version} with {stored.get('dim')} "
                              f"dimensions, but the model gives {model.dim}; the records are kept: re-embed them "
                              "with memory.reembed()")
    return True


class _Block:
    """The vectors of one (kind, scope): ids, their rows, a matrix grown by doubling."""

    def __init__(self, dim: int):
        import numpy as np

        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.matrix = np.zeros((16, dim), dtype=np.float32)

    def put(self, key: str, vector: np.ndarray) -> None:
        import numpy as np

        row = self.rows.get(key)
        if row is None:
            row = len(self.ids)
            if row == len(self.matrix):
                grown = np.zeros((2 * len(self.matrix), self.matrix.shape[1]), dtype=np.float32)
                grown[:row] = self.matrix
                self.matrix = grown
            self.ids.append(key)
            self.rows[key] = row
        self.matrix[row] = vector

    def drop(self, key: str) -> None:
        row = self.rows.pop(key, None)
        if row is None:
            return
        last = len(self.ids) - 1
        if row != last:  # the last row moves into the hole
            moved = self.ids[last]
            self.ids[row] = moved
            self.rows[moved] = row
            self.matrix[row] = self.matrix[last]
        self.ids.pop()


class VectorIndex:
    """Vectors by kind and scope; ``search`` gives the ``k`` nearest by cosine (rows are normalised)."""

    def __init__(self, dim: int):
        self.dim = dim
        self._blocks: dict[tuple[str, str], _Block] = {}
        self._where: dict[str, tuple[str, str]] = {}
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._where)

    def put(self, key: str, kind: str, scope: str, vector: np.ndarray) -> None:
        if len(vector) != self.dim:
            raise EmbeddingsError(f"a stored memory vector has {len(vector)} dimensions where the model gives "
                                  f"{self.dim}; the records are kept: re-embed them with memory.reembed()")
        with self._lock:
            where = (kind, scope)
            old = self._where.get(key)
            if old is not None and old != where:
                self._blocks[old].drop(key)
            block = self._blocks.get(where)
            if block is None:
                block = self._blocks[where] = _Block(self.dim)
            block.put(key, vector)
            self._where[key] = where

    def drop(self, key: str) -> None:
        with self._lock:
            where = self._where.pop(key, None)
            if where is not None:
                self._blocks[where].drop(key)

    def vector(self, key: str) -> np.ndarray | None:
        with self._lock:
            where = self._where.get(key)
            if where is None:
                return None
            block = self._blocks[where]
            return block.matrix[block.rows[key]].copy()

    def search(self, query: np.ndarray, kind: str, scopes: tuple[str, ...], k: int) -> list[tuple[str, float]]:
        import numpy as np

        hits: list[tuple[str, float]] = []
        with self._lock:
            for scope in scopes:
                block = self._blocks.get((kind, scope))
                if block is None or not block.ids:
                    continue
                n = len(block.ids)
                scores = block.matrix[:n] @ query
                top = np.argpartition(-scores, k - 1)[:k] if n > k else np.arange(n)
                hits += [(block.ids[i], float(scores[i])) for i in top]
        hits.sort(key=lambda h: -h[1])
        return hits[:k]
