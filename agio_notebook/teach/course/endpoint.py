"""Exercise on a real endpoint: an agent on an OpenAI-compatible server, its key from the environment,
its request settings, and time limits that end a silent call fast without cutting a slow one off.

The check runs a small OpenAI-compatible server on this machine (loopback, a port of its own), so the
exercise runs offline and judges what was really sent over HTTP. The tutorial can use the same server
(:func:`local_endpoint`) to show settings and time limits on a real request.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from contextlib import contextmanager
from typing import Any, Iterator

from ...agent import Agent
from ...core import RunStatus
from ...execution import StepRunner
from ...local_endpoint import Answer, LocalEndpoint
from ...storage.base import Repository
from ..exercise import Exercise, Scenario, Trial, judged
from ..running import SolutionError, trial_of

MODEL = "tutor-1"
LIMIT = 2.0  # seconds of silence the exercise allows, before the first token and between two
MAX_TOKENS = 200
_SLACK = 1.5  # beyond its limit, the time a call ended by the HTTP client's own timeout may take (a busy machine)
_GIVE_UP = 8.0  # the check stops waiting for a run after this many seconds


@contextmanager
def local_endpoint(reply: str = "Hello from the local endpoint.", *, first_delay: float = 0.0, gap: float = 0.0,
                   stall_after: int | None = None, stall: float = 0.0, key: str | None = None
                   ) -> Iterator[LocalEndpoint]:
    """A local OpenAI-compatible server for the length of a ``with``: ``OpenAIModel(..., base_url=
    endpoint.base_url)`` talks to it; ``endpoint.received`` is what it was sent. ``first_delay``, ``gap``
    and ``stall`` (after ``stall_after`` words) make it slow or silent, to try time limits on."""
    answer = Answer.words(reply, first_delay=first_delay, gap=gap, stall_after=stall_after, stall=stall)
    with LocalEndpoint(answer=lambda body: answer, key=key) as endpoint:
        yield endpoint


async def drive(connect: Any, scenario: Scenario, repository: Repository) -> Trial:
    """A local server that answers by the scenario's plan; ``connect(base_url)`` builds the agent, which
    runs with its own settings and limits; the server's record and the run's time are judged."""
    plan: Answer = scenario.data["plan"]
    endpoint = LocalEndpoint(answer=lambda body: plan, key=scenario.data["key"])
    agent = None
    try:
        agent = await connect(endpoint.base_url)
        if not isinstance(agent, Agent):
            error = SolutionError(f"connect() returned {_kind(agent)}, not an Agent: return Agent(model=OpenAIModel("
                                  f"{MODEL!r}, base_url=base_url), ...)")
            raise error
        runner = StepRunner(agent, repository=repository)  # the agent's own config: its limits are judged
        started = time.monotonic()
        try:
            async with asyncio.timeout(_GIVE_UP):
                result = await runner.run(None, scenario.query)
        except TimeoutError:
            trial = Trial(None, [], [], agent, repository, watch=connect.watch)  # type: ignore[arg-type]
            trial.context.update(waited=time.monotonic() - started, requests=endpoint.received, agent=agent,
                                 key=scenario.data["key"], gave_up=True, source=connect.raw)
            return trial
        trial = trial_of(result, repository, connect.watch, agent)
        trial.context.update(waited=time.monotonic() - started, requests=endpoint.received, agent=agent,
                             key=scenario.data["key"], gave_up=False, source=connect.raw)
        return trial
    finally:
        endpoint.close()
        await _close_client(agent)


async def _close_client(agent: Any) -> None:
    """Close the HTTP client the learner's model opened on this check's loop (its connections die with it)."""
    client = getattr(getattr(agent, "model", None), "_client", None)
    closing = getattr(client, "close", None)
    if closing is not None:
        try:
            done = closing()
            if inspect.isawaitable(done):
                await done
        except Exception:  # noqa: BLE001 - a client that cannot close is the learner's, and harmless here
            pass


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def _body(trial: Trial) -> dict[str, Any]:
    requests = trial.context["requests"]
    return requests[0].body if requests else {}


def _key_in_code(trial: Trial) -> str | None:
    try:
        source = inspect.getsource(trial.context["source"])
    except (OSError, TypeError):
        return None
    for request in trial.context["requests"]:
        sent = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if sent and sent != "not-needed" and sent in source:
            return sent
    return None


def _common(trial: Trial) -> str | None:
    """What every scenario needs: the agent called this server, with the environment's key."""
    requests = trial.context["requests"]
    if not requests:
        error = trial.run.error if trial.run is not None else "no run"
        return (f"your agent never called the endpoint at base_url (the run: {error}): build it on "
                f"OpenAIModel({MODEL!r}, base_url=base_url)")
    if _key_in_code(trial):
        return "your code contains the key: leave api_key out, and OpenAIModel reads it from OPENAI_API_KEY"
    if requests[0].headers.get("authorization") != f"Bearer {trial.context['key']}":
        return ("the server refused your agent's key (HTTP 401): it is not the one in the environment; leave "
                "api_key out, and OpenAIModel reads OPENAI_API_KEY")
    model = _body(trial).get("model")
    if model != MODEL:
        return f"your agent asked for model {model!r}; this endpoint serves {MODEL!r}"
    return None


def _answers(expected: str) -> Any:
    def why(trial: Trial) -> str | None:
        common = _common(trial)
        if common:
            return common
        body = _body(trial)
        temperature = body.get("temperature")
        cap = body.get("max_tokens", body.get("max_completion_tokens"))
        if not isinstance(temperature, (int, float)) or temperature != 0:
            return (f"the request your agent sent has temperature={temperature!r}: set it to 0 "
                    "(Agent(model_settings={'temperature': 0, ...}))")
        if not isinstance(cap, int) or not 1 <= cap <= MAX_TOKENS:
            return (f"the request your agent sent has max_tokens={cap!r}: cap the reply at {MAX_TOKENS} tokens or "
                    "fewer (model_settings={'max_tokens': ...})")
        if trial.run is None or trial.run.status is not RunStatus.COMPLETED:
            return f"the run did not complete: {trial.run.error if trial.run else 'no run'}"
        if trial.final_text.strip() != expected.strip():
            return f"the agent answered {trial.final_text!r}; the server said {expected!r}"
        return None
    return why


def _fails_fast(kind: str) -> Any:
    setting = "first_token_timeout" if kind == "first" else "idle_timeout"
    when = "before its first token" if kind == "first" else "in the middle of its answer"

    def why(trial: Trial) -> str | None:
        common = _common(trial)
        if common:
            return common
        waited = trial.context["waited"]
        if trial.context["gave_up"]:
            return (f"the server went silent {when}, and your agent was still waiting after {_GIVE_UP:g} s: give up "
                    f"within {LIMIT:g} s (ExecutionConfig({setting}={LIMIT:g}) as the agent's config)")
        if trial.run is None or trial.run.status is not RunStatus.FAILED:
            return f"the server went silent {when}, yet the run ended {trial.run.status.value if trial.run else '?'}"
        # the limit that fired, as the engine names it; a limit of the HTTP client's own is judged by the clock
        fired = re.search(r"\b(?:first_token_timeout|idle_timeout|timeout_per_step)=(\d+(?:\.\d+)?)s",
                          trial.run.error or "")
        if (float(fired.group(1)) > LIMIT) if fired else waited > LIMIT + _SLACK:
            took = f"{fired.group(1)} s" if fired else f"{waited:.1f} s"
            return (f"the server went silent {when}, and your agent gave up only after {took}: give up within "
                    f"{LIMIT:g} s ({setting}={LIMIT:g})")
        return None
    return why


def _keeps_streaming(expected: str, seconds: float) -> Any:
    def why(trial: Trial) -> str | None:
        common = _common(trial)
        if common:
            return common
        if trial.run is not None and trial.run.status is RunStatus.FAILED:
            return (f"your agent cut off an answer that was still streaming (a word every few tenths of a second, "
                    f"{seconds:.0f} s in all): {trial.run.error}. Limit silence (idle_timeout), not the whole call")
        if trial.context["gave_up"] or trial.run is None:
            return "the run did not end"
        if trial.final_text.strip() != expected.strip():
            return f"the agent answered {trial.final_text!r}; the server said {expected!r}"
        return None
    return why


_REPLIES = ["Paris is the capital of France.", "Water boils at 100 degrees Celsius at sea level.",
            "A haiku has three lines.", "The Pacific is the largest ocean.", "Light from the Sun takes about eight "
            "minutes to reach Earth.", "Bees communicate with a waggle dance."]


def _scenarios(rng: Any) -> list[Scenario]:
    key = "sk-local-" + "".join(rng.choice("abcdef0123456789") for _ in range(24))
    reply = rng.choice(_REPLIES)
    pieces = [w + " " for w in reply.split(" ")]
    pieces[-1] = pieces[-1].rstrip()
    slow = rng.choice(_REPLIES[:3] + _REPLIES[4:])
    slow_pieces = [w + " " for w in (slow + " " + slow).split(" ")]
    gap = round((LIMIT + 1.0) / len(slow_pieces), 3)  # steady, and longer in all than LIMIT
    seconds = gap * len(slow_pieces)

    def scenario(name: str, plan: Answer, expectation: Any, describe: str, variant: bool = False) -> Scenario:
        return Scenario(name, "Tell me one fact.", data={"plan": plan, "key": key}, describe=describe,
                        variant=variant, expect=[judged(expectation, name)], judges_failure=True)

    return [
        scenario("answers", Answer(pieces), _answers(reply),
                 f"the server answers {reply!r}: the request must carry temperature 0 and max_tokens ≤ {MAX_TOKENS}"),
        scenario("silent before answering", Answer(pieces, first_delay=60.0), _fails_fast("first"),
                 f"the server sends nothing: the run must fail within {LIMIT:g} s"),
        scenario("silent mid-answer", Answer(pieces, stall_after=2, stall=60.0), _fails_fast("idle"),
                 f"the server stops after two words: the run must fail within {LIMIT:g} s"),
        scenario("a slow, steady answer", Answer(slow_pieces, gap=gap), _keeps_streaming(slow + " " + slow, seconds),
                 f"the server streams a word every {gap:g} s for {seconds:.0f} s: the run must not be cut off",
                 variant=True),
    ]


def environment(rng: Any) -> dict[str, str | None]:
    """What the check puts in the environment while it runs: the key the server expects (the same draw
    as the scenarios'), and no base URL of the learner's own."""
    return {"OPENAI_API_KEY": "sk-local-" + "".join(rng.choice("abcdef0123456789") for _ in range(24)),
            "OPENAI_BASE_URL": None, "AGIO_MODEL": None}


ENDPOINT_SETTINGS = Exercise(
    name="endpoint_settings", title="Connect an agent to an endpoint, with settings and time limits",
    kind="function", arity=1, asks_for="a function connect(base_url) returning an Agent", minutes=15, drive=drive,
    instructions=f"""
Write `connect(base_url)` that returns an `Agent` on the OpenAI-compatible endpoint at `base_url`
(`OpenAIModel({MODEL!r}, base_url=base_url)`), with:

- the key from the environment (`OPENAI_API_KEY`, which `OpenAIModel` reads when you pass no key), never
  written in your code;
- request settings for every call: `temperature` 0 and replies capped at `max_tokens` {MAX_TOKENS} or fewer
  (`Agent(model_settings={{...}})`; `max_completion_tokens`, the newer name of the same cap, counts too);
- time limits that end a call when the server goes silent, {LIMIT:g} s at most before the first token and
  {LIMIT:g} s at most between two pieces of the answer, without cutting off an answer that keeps
  streaming (`Agent(config=ExecutionConfig(...))`). What is judged is how long your agent really waits,
  retries included, so a read timeout of the HTTP client's own (`OpenAIModel(..., timeout=...)`) that
  keeps to these limits passes too.

The check runs your agent against a small server on this machine and judges what it was really sent
(the same request `agio_notebook.context(run_id, step)` shows for any stored model call), and how long
your agent waited. The answers change at every check, and one server behaves in a way these
instructions do not show.
""",
    hints=["`OpenAIModel(\"tutor-1\", base_url=base_url)` with no `api_key=`: the key comes from the environment.",
           "`Agent(model=..., model_settings={'temperature': 0, 'max_tokens': 200})` sends them with every call.",
           "`ExecutionConfig(first_token_timeout=2, idle_timeout=2)` as `Agent(config=...)`; `timeout_per_step` "
           "would also cut off a long answer that is still streaming."],
    starter='''from agio_notebook import Agent, ExecutionConfig, OpenAIModel
from agio_notebook.exercises import check, exercise

def connect(base_url):
    model = OpenAIModel("tutor-1", base_url=base_url)
    return Agent(model=model)  # add the settings and the time limits

check(exercise("endpoint_settings"), connect)''',
    scenarios=_scenarios, environment=environment, concurrent=True)
