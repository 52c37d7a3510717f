"""write_scorer: 1.0 only when the answer states the temperature the tool returned, compared as numbers."""

ENTRY = "repeats_the_tool"
SOURCE = '''
import re
from agio_notebook import StepRole

TEMPERATURE = re.compile(r"(-?\\d+(?:\\.\\d+)?)\\s*(?:°\\s*C|degrees? Celsius)", re.IGNORECASE)

def repeats_the_tool(run):
    reports = [s.content or "" for s in run.steps
               if s.role is StepRole.TOOL and s.name == "weather" and s.status == "ok"]
    known = [float(t) for t in TEMPERATURE.findall(reports[-1])] if reports else []
    said = [float(t) for t in TEMPERATURE.findall(run.final_text)]
    return 1.0 if known and said and all(t in known for t in said) else 0.0
'''
