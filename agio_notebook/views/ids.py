"""Ids as people read them: cut to 8 characters, the way every table and transcript shows them."""

from __future__ import annotations

import pandas as pd

ID_CHARS = 8  # any unique prefix of 6 or more characters names a run or session everywhere (storage/ids.py)


class ShortIdFrame(pd.DataFrame):
    """A frame indexed by full ids that *shows* them cut to 8 characters: ``.index`` and ``.loc[run_id]``
    keep the whole ids; anything computed from it is a plain DataFrame again."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _shown(self) -> pd.DataFrame:
        shown = pd.DataFrame(self)
        shown.index = pd.Index([i[:ID_CHARS] if isinstance(i, str) else i for i in self.index], name=self.index.name)
        return shown

    def _repr_html_(self) -> str | None:
        return self._shown()._repr_html_()

    def __repr__(self) -> str:
        return repr(self._shown())
