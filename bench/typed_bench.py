"""The prototyper's path, timed side by side in one run (in-memory store, offline models):

- ``agent.run_sync(q)`` against ``StepRunner(agent).run_sync(None, q)``: the same per-turn cost (target ≤ 1.05×);
- a turn of a typed agent (``output_type``) against a plain turn (target ≤ 1.1×), the model saying the same
  words in both (the answer's JSON): asked with the provider's structured output (``output_mode="native"``:
  the reply's JSON validated) and with a ``final_result`` tool (the default: the call's arguments validated,
  and one more step, the call's result, stored and announced); the engine alone (an in-memory store, a new
  one for every block of runs) and with the default store (TinyDB files, what a user's turn costs); and a
  typed answer's validation alone.

Prints ms per run (median of interleaved rounds, the arms' order turned every round) and, for each pair,
the median of the rounds' ratios. Where pydantic-ai is installed (the ``bench`` extra), its
own plain and typed runs (``FunctionModel``, no store) go in the same rounds, for what a typed answer costs
there.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import pydantic

from agio_notebook import Agent, Reply, ScriptedModel, StepRunner
from agio_notebook.storage import InMemoryRepository
from agio_notebook.tools.output import OutputSpec

ROUNDS, RUNS = 24, 150
WORDS = '{"item": "tea", "price": 3.5}'  # what the model says, as text or as the tool call's arguments


class Quote(pydantic.BaseModel):
    item: str
    price: float
    currency: str = "EUR"


def timed(fn, n: int = RUNS) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) * 1000.0 / n


def pydantic_ai_arms() -> dict:
    """pydantic-ai's plain and typed run of the same answer, if it is installed."""
    try:
        from pydantic_ai import Agent as PAgent, NativeOutput
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel as PFunctionModel
        from pydantic_ai.profiles import ModelProfile
    except ImportError:
        return {}

    def plain_reply(messages, info):
        return ModelResponse(parts=[TextPart(WORDS)])

    def typed_reply(messages, info):
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"item": "tea", "price": 3.5})])

    structured = ModelProfile(supports_json_schema_output=True)
    plain, typed = PAgent(PFunctionModel(plain_reply)), PAgent(PFunctionModel(typed_reply), output_type=Quote)
    native = PAgent(PFunctionModel(plain_reply, profile=structured), output_type=NativeOutput(Quote))
    for agent in (typed, native):
        assert agent.run_sync("price of tea?").output == Quote(item="tea", price=3.5)
    return {"pai_plain": lambda: plain.run_sync("price of tea?"), "pai_typed": lambda: typed.run_sync("price of tea?"),
            "pai_native": lambda: native.run_sync("price of tea?")}


def main() -> None:
    store = tempfile.mkdtemp(prefix="agio-typed-bench-")
    os.environ["AGIO_STORE"] = store  # the short path's default store: TinyDB files, as StepRunner's below
    plain = Agent(model=ScriptedModel([WORDS], loop=True), name="plain")
    native = Agent(model=ScriptedModel([WORDS], loop=True), output_type=Quote, output_mode="native", name="native")
    typed = Agent(model=ScriptedModel([Reply.call("final_result", item="tea", price=3.5)], loop=True),
                  output_type=Quote, name="typed")
    memory = {"repository": InMemoryRepository()}  # a new one for every block of runs (below)
    runner = StepRunner(plain)
    arms = {"short": lambda: plain.run_sync("price of tea?"),
            "runner": lambda: runner.run_sync(None, "price of tea?"),
            "plain": lambda: StepRunner(plain, repository=memory["repository"]).run_sync(None, "price of tea?"),
            "native": lambda: StepRunner(native, repository=memory["repository"]).run_sync(None, "price of tea?"),
            "typed": lambda: StepRunner(typed, repository=memory["repository"]).run_sync(None, "price of tea?"),
            "plain_store": lambda: StepRunner(plain, repository=runner.repository).run_sync(None, "price of tea?"),
            "native_store": lambda: StepRunner(native, repository=runner.repository).run_sync(None, "price of tea?"),
            "typed_store": lambda: StepRunner(typed, repository=runner.repository).run_sync(None, "price of tea?")}
    arms.update(pydantic_ai_arms())
    rows: dict[str, list[float]] = {k: [] for k in arms}
    for round_ in range(ROUNDS):  # interleaved, so a busy moment hits every row alike; the order turns each
        order = list(arms) if round_ % 2 == 0 else list(reversed(arms))  # round (the store grows as it goes)
        for name in order:
            memory["repository"] = InMemoryRepository()  # the engine alone: not a heap that grows as the bench goes
            rows[name].append(timed(arms[name]))
    spec = OutputSpec(Quote)
    args = {"item": "tea", "price": 3.5}
    validation_us = timed(lambda: spec.dump(spec.from_arguments(args)), 20000) * 1000.0
    med = {k: statistics.median(v) for k, v in rows.items()}
    paired = {k: statistics.median(a / b for a, b in zip(rows[x], rows[y]))  # each round's ratio, then the median
              for k, (x, y) in {"short": ("short", "runner"), "typed": ("typed", "plain"),
                                "native": ("native", "plain"), "typed_store": ("typed_store", "plain_store"),
                                "native_store": ("native_store", "plain_store")}.items()}
    print(f"{'what':<44} {'ms/run':>8}")
    print(f"{'agent.run_sync(q) (TinyDB store)':<44} {med['short']:>8.2f}")
    print(f"{'StepRunner(agent).run_sync(None, q) (same)':<44} {med['runner']:>8.2f}")
    for where, key in (("in memory", ""), ("TinyDB store", "_store")):
        print(f"{'plain turn (' + where + ')':<44} {med['plain' + key]:>8.2f}")
        print(f"{'typed turn, native (' + where + ')':<44} {med['native' + key]:>8.2f}")
        print(f"{'typed turn, final_result tool (' + where + ')':<44} {med['typed' + key]:>8.2f}")
    print(f"short path / StepRunner: {paired['short']:.3f}x (median of the rounds' ratios; target <= 1.05x)")
    print("typed / plain turn (medians of the rounds' ratios; target <= 1.1x):")
    for mode, arm in (("output_mode='native':", "native"), ("final_result tool:", "typed")):
        print(f"  {mode:<22} {paired[arm]:.3f}x in memory, {paired[arm + '_store']:.3f}x on the TinyDB store")
    print(f"a typed answer's validation and JSON form: {validation_us:.1f} us per call")
    if "pai_plain" in rows:
        for mode, arm in (("final_result tool", "typed"), ("native", "native")):
            ratio = statistics.median(a / b for a, b in zip(rows["pai_" + arm], rows["pai_plain"]))
            print(f"pydantic-ai, no store, {mode}: plain {med['pai_plain']:.2f} ms, typed {med['pai_' + arm]:.2f} ms, "
                  f"{ratio:.3f}x (a typed answer adds {(med['pai_' + arm] - med['pai_plain']) * 1000:.0f} us there, "
                  f"{(med[arm] - med['plain']) * 1000:.0f} us here in memory)")


if __name__ == "__main__":
    main()
