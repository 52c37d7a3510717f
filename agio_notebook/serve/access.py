"""What a token holder may reach through a server (MCP or A2A): the served agents' own sessions and runs.

The bearer token only says a client may talk to the server; it says nothing about whose conversations it
may read or continue. The rules, one home for both servers:

- **Ownership.** A session belongs to the agent that made it: the runner stamps the agent's fingerprint
  (name, instructions and tool names, ``Agent.fingerprint``) on every new session, and a server stamps the
  sessions it makes for its agents (``via``). A fork keeps its origin's owner. A served agent continues,
  retries and forks only sessions it owns; anything else is the same one line as an id that does not
  exist, so a client cannot probe for other sessions.
- **Visibility.** ``list_runs``, ``list_sessions``, transcripts and resources show only runs in the served
  agents' sessions and the runs nested under them, unless the server was started with
  ``expose_store=True``, which shows every run of the store (continuing still needs ownership).
- **Ids.** Typed ids and unique prefixes of 6+ characters are resolved as everywhere else
  (``storage.ids.resolve_prefix``), among what the client may see only.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..agent import Agent, OWNER, stamp_owner
from ..core import AgentRun, AgentSession, InvalidOperationError, NotFoundError
from ..storage.base import Repository
from ..storage.ids import resolve_prefix
from ..storage.run_query import MAX_PAGE, RunFilter, RunPage

class NotServedError(NotFoundError):
    """An id the client may not reach: unknown, or not the served agents' (the same line either way)."""


class Access:
    """The served ``agents`` (tool name -> Agent) over ``repository``, as a client of ``via`` reaches them."""

    def __init__(self, agents: Mapping[str, Agent], repository: Repository, *, via: str, expose_store: bool = False):
        self.agents = dict(agents)
        self.repository = repository
        self.via = via
        self.expose_store = expose_store

    # -- ownership -------------------------------------------------------------------------------
    def owner(self, session: AgentSession | None) -> Agent | None:
        """The served agent that owns ``session`` (fingerprints are computed now: an agent changed since
        it made a session is another agent)."""
        stamp = session.metadata.get(OWNER) if session is not None else None
        if not isinstance(stamp, dict):
            return None
        return next((a for a in self.agents.values() if a.fingerprint == stamp.get("fingerprint")), None)

    def new_session(self, agent: Agent, session_id: str | None = None) -> AgentSession:
        """A new session for ``agent``, stamped as made through this server."""
        session = AgentSession() if session_id is None else AgentSession(session_id=session_id)
        return stamp_owner(session, agent, via=self.via)

    def check_owned(self, agent: Agent, session: AgentSession) -> None:
        """The one line a stored session ``agent`` does not own gets (made meanwhile by another agent under
        the id a client chose, say): the same as for an id that does not exist."""
        if self.owner(session) is not agent:
            raise NotServedError(f"no session {session.session_id!r} among the sessions of agent {agent.name!r}")

    def continued_session(self, agent: Agent, session_id: Any) -> str:
        """The full id of a session ``agent`` owns that ``session_id`` names; one line otherwise."""
        return self._resolve("session", session_id, lambda i: self.owner(self._session(i)) is agent,
                             f"among the sessions of agent {agent.name!r}")

    def run_to_redo(self, run_id: Any) -> tuple[Agent, AgentRun]:
        """For retry: the run and the served agent owning its session."""
        def owned(i: str) -> bool:
            run = self.repository.get_run(i)
            return run is not None and self.owner(self._session(run.session_id)) is not None

        run = self._get_run(self._resolve("run", run_id, owned, "among the served agents' runs"))
        agent = self.owner(self._session(run.session_id))
        if agent is None:  # resolved among owned runs: only a session changed meanwhile gets here
            raise NotServedError(f"no run {run_id!r} among the served agents' runs")
        return agent, run

    def session_to_fork(self, session_id: Any) -> tuple[Agent, str]:
        """For fork: the session's full id and the served agent owning it."""
        full = self._resolve("session", session_id, lambda i: self.owner(self._session(i)) is not None,
                             "among the served agents' sessions")
        agent = self.owner(self._session(full))
        if agent is None:
            raise NotServedError(f"no session {session_id!r} among the served agents' sessions")
        return agent, full

    # -- visibility ------------------------------------------------------------------------------
    def visible_run(self, run_id: Any) -> AgentRun:
        """A run the client may read (a transcript), by id or unique prefix."""
        return self._get_run(self._resolve("run", run_id, lambda i: self.run_visible(self.repository.get_run(i)),
                                           self._where("run")))

    def run_visible(self, run: AgentRun | None) -> bool:
        """In a served agent's session, or nested (at any depth) under a run that is."""
        if run is None:
            return False
        if self.expose_store:
            return True
        seen: set[str] = set()
        while run is not None and run.id not in seen:
            if self.owner(self.repository.get_session(run.session_id)) is not None:
                return True
            seen.add(run.id)
            run = self.repository.get_run(run.parent_run_id) if run.parent_run_id else None
        return False

    def session_visible(self, session: AgentSession | None) -> bool:
        return session is not None and (self.expose_store or self.owner(session) is not None)

    def runs_page(self, session_id: Any = None, limit: int = 20, cursor: str | None = None) -> RunPage:
        """The served agents' runs (or one session's), newest first, a page at a time."""
        limit = _limit(limit)
        sid = (self._resolve("session", session_id, lambda i: self.session_visible(self._session(i)),
                             self._where("session")) if session_id is not None else None)
        names = {name for a in self.agents.values() for name in _answering_names(a)}
        agent_filter = next(iter(names)) if len(names) == 1 and not self.expose_store else None
        found: list[AgentRun] = []
        sessions: dict[str, bool] = {}
        pages = 0
        while len(found) < limit and pages < 50:  # most runs of a shared store may be others': look further
            page = self.repository.query_runs(RunFilter(agent=agent_filter, session_id=sid), limit - len(found),
                                              cursor)  # a page filtered in the store, never a read of every run
            pages += 1
            for run in page.runs:
                if run.session_id not in sessions:
                    sessions[run.session_id] = self.session_visible(self.repository.get_session(run.session_id))
                if sessions[run.session_id]:
                    found.append(run)
            cursor = page.next_cursor
            if cursor is None:
                break
        return RunPage(found, cursor)

    def sessions(self, limit: int = 20) -> list[AgentSession]:
        visible = [s for s in self.repository.list_sessions() if self.session_visible(s)]
        return sorted(visible, key=lambda s: s.created_at, reverse=True)[:_limit(limit)]

    # -- ids ---------------------------------------------------------------------------------------
    def _resolve(self, kind: str, text: Any, ok: Callable[[str], bool], where: str) -> str:
        """``text`` (an id or a unique prefix) among the ids of ``kind`` that pass ``ok``: the others are
        as unknown to the client as ids that do not exist."""
        if not isinstance(text, str):
            raise InvalidOperationError(f"a {kind} id is a string, got {type(text).__name__}")
        ids = self.repository.ids_with_prefix
        try:
            return resolve_prefix(kind, text, ok, lambda p: [i for i in ids(kind, p) if ok(i)], where=where)
        except NotFoundError as exc:
            raise NotServedError(str(exc)) from None

    def _where(self, kind: str) -> str:
        return "in the store" if self.expose_store else f"among the served agents' {kind}s"

    def _session(self, session_id: str) -> AgentSession | None:
        return self.repository.get_session(session_id)

    def _get_run(self, run_id: str) -> AgentRun:
        run = self.repository.get_run(run_id)
        if run is None:
            raise NotServedError(f"no run {run_id!r} among the served agents' runs")
        return run


def _answering_names(agent: Agent) -> set[str]:
    """The names a run of ``agent`` may carry: its own and those it hands the conversation to."""
    names, todo = set(), [agent]
    while todo:
        a = todo.pop()
        if a.name not in names:
            names.add(a.name)
            todo += list(a.handoffs)
    return names


def _limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit:
        raise InvalidOperationError(f"limit must be a whole number >= 1, got {limit!r}")
    return min(limit, MAX_PAGE)
