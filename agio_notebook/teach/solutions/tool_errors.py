"""tool_errors: an error the model can act on."""

from ...tools import tool
from ..course.tools import WEATHER


def reference(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city's name, e.g. 'Paris'.
    """
    if city not in WEATHER:
        raise ValueError(f"unknown city {city!r}; I know {', '.join(WEATHER)}")
    return WEATHER[city]


def bare_key_error(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER[city]


def says_unknown(city: str) -> str:
    """Today's weather in a city."""
    return WEATHER.get(city, "unknown")


reference = tool(reference, name='city_weather')
bare_key_error = tool(bare_key_error, name='city_weather')
says_unknown = tool(says_unknown, name='city_weather')

WRONG = [(bare_key_error, "gives it nothing to correct the spelling with"),
         (says_unknown, "instead of raising an error")]
