"""The offline demo agent: two tools and a scripted model, enough to show the whole loop."""

from __future__ import annotations

from .agent import Agent
from .models import Reply, ScriptedModel, call
from .tools import tool

CITIES = {"paris": ("light rain", 14), "tokyo": ("clear", 21), "lima": ("overcast", 19)}


@tool
def weather(city: str) -> dict:
    """Current weather of a city.

    Args:
        city: the city's name, e.g. "Paris".
    """
    found = CITIES.get(city.lower())
    if found is None:
        raise ValueError(f"no weather station in {city!r}")
    return {"city": city, "sky": found[0], "celsius": found[1]}


@tool
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: first number.
        b: second number.
    """
    return a + b


def demo_agent() -> Agent:
    model = ScriptedModel([
        Reply.calls(call("weather", city="Paris"), call("weather", city="Tokyo"),
                    text="Let me check both cities."),
        Reply.call("add", a=14, b=21),
        "Paris has light rain at 14 °C and Tokyo is clear at 21 °C; together that is 35 degrees of "
        "weather, which is not a meaningful number, but you asked for it.",
    ], chunk_size=2, name="scripted-demo")
    return Agent(model=model, tools=[weather, add], name="demo",
                 system_prompt="You answer questions about the weather using tools.")
