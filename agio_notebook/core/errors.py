"""Errors users see: each carries a one-line message meant to be shown as is."""


class AgioError(Exception):
    """Base of every error raised on purpose by agio_notebook."""


class NotFoundError(AgioError, LookupError):
    """A session, run or sequence that does not exist."""


class AmbiguousIdError(NotFoundError):
    """An id prefix that starts several ids; the message lists them."""


class InvalidOperationError(AgioError):
    """An operation that cannot be done in the current state (e.g. retrying a run still running)."""


class StoreError(AgioError):
    """The store cannot be read or written (corrupt file, lock timeout, bad schema version)."""


class SessionBusyError(InvalidOperationError):
    """Another run (in this process or another one) holds the session; the message names the holder."""


class ModelError(AgioError):
    """The model provider failed. ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = False, status_code: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code
