"""tool_errors: an error the model can act on."""

ENTRY = "city_weather"
SOURCE = '''
from agio_notebook.exercises import WEATHER

def city_weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city's name, e.g. 'Paris'.
    """
    if city not in WEATHER:
        raise ValueError(f"unknown city {city!r}; I know {', '.join(WEATHER)}")
    return WEATHER[city]
'''
