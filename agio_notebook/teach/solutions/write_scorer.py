"""write_scorer: 1.0 only when the answer repeats what the tool said."""

import re

from ...core import StepRole

_TEMPERATURE = re.compile(r"-?\d+°C")


def reference(run):
    results = [s.content or "" for s in run.steps if s.role is StepRole.TOOL and s.name == "weather"]
    said = _TEMPERATURE.findall(results[-1]) if results else []
    return float(bool(said) and all(t in run.final_text for t in said))


def any_temperature(run):
    return 1.0 if _TEMPERATURE.search(run.final_text) else 0.0


def called_the_tool(run):
    return 1.0 if "weather" in run.tool_path else 0.0


def crashes(run):
    return run.steps[5].content  # not every run has six steps


WRONG = [(any_temperature, "gave 1 to a run that should score 0: the agent answered without calling weather"),
         (called_the_tool, "gave 1 to a run that should score 0: weather said 18°C but the agent answered 25°C"),
         (crashes, "your scorer raised IndexError")]
