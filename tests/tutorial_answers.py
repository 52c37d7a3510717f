"""A learner's answers to each tutorial's exercise, for the browser test that does every tutorial as a learner
would: one wrong (a mistake the exercise teaches about, with words its feedback must contain) and one right,
written differently from the reference solution (agio_notebook.teach.solutions)."""

from __future__ import annotations

WRONG: dict[str, tuple[str, str]] = {
    "tool_docstring": ('''
from agio_notebook.exercises import RATES, check, exercise

def convert_currency(amount: float, currency: str) -> str:
    """Money."""
    return f"{amount * RATES[currency]:.2f} {currency}"

check(exercise("tool_docstring"), convert_currency)
''', "convert_currency"),
    "function_model": ('''
from agio_notebook.exercises import check, exercise

def my_model(messages, tools):
    return "5"  # answers without asking the tool

check(exercise("function_model"), my_model)
''', "add"),
    "edit_tool_call": ('''
from agio_notebook.exercises import check, exercise

def steer(pause):
    if pause.kind.value == "tool":
        pause.skip("5")  # answers the call by hand instead of fixing it

check(exercise("edit_tool_call"), steer)
''', "skip"),
    "stopping_rule": ('''
from agio_notebook import Reply
from agio_notebook.exercises import check, exercise

def searcher(messages, tools):
    pages = [m for m in messages if m["role"] == "tool"]
    return "not found" if pages else Reply.call("search", page=1)  # gives up after one page

check(exercise("stopping_rule"), searcher)
''', "page"),
    "fork_compare_choose": ('''
from agio_notebook import StepRunner
from agio_notebook.exercises import check, exercise

async def choose(session_id, candidates, repository):
    first = next(iter(candidates.values()))
    return (await StepRunner(first, repository=repository).fork(session_id, 1)).run_id  # keeps the first

check(exercise("fork_compare_choose"), choose)
''', "branch"),
    "write_scorer": ('''
from agio_notebook.exercises import check, exercise

def repeats_the_tool(run):
    return 1.0 if "°C" in (run.final_text or "") else 0.0  # any temperature scores

check(exercise("write_scorer"), repeats_the_tool)
''', "scor"),
    "pass_evaluation": ('''
from agio_notebook import Agent
from agio_notebook.exercises import calculator, check, exercise, literal_model

agent = Agent(model=literal_model(), tools=[], system_prompt="Be accurate.")
check(exercise("pass_evaluation"), agent)
''', "calculator"),
    "memory_second_run": ('''
from agio_notebook import memory
from agio_notebook.exercises import check, exercise

def learn(run_id, repository):  # a lesson too vague to act on
    memory.add_experience("a weather forecast question", lesson="Be more careful.", repository=repository)

check(exercise("memory_second_run"), learn)
''', "lesson"),
    "tool_errors": ('''
from agio_notebook.exercises import WEATHER, check, exercise

def city_weather(city: str) -> str:
    """Today's weather in a city."""
    if city not in WEATHER:
        raise ValueError("unknown city")
    return WEATHER[city]

check(exercise("tool_errors"), city_weather)
''', "cities"),
    "delegate_to_agent": ('''
from agio_notebook.exercises import check, exercise

def planner(messages, tools):
    return "Owls hunt at night."  # answers without asking the researcher

check(exercise("delegate_to_agent"), planner)
''', "researcher"),
    "endpoint_settings": ('''
from agio_notebook import Agent, OpenAIModel
from agio_notebook.exercises import check, exercise

def connect(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url))

check(exercise("endpoint_settings"), connect)
''', "temperature"),
}

RIGHT: dict[str, str] = {
    "tool_docstring": '''
from agio_notebook.exercises import RATES, check, exercise

def convert_currency(amount: float, currency: str) -> str:
    """Convert a sum in US dollars into another currency.

    Args:
        amount: the sum, in US dollars.
        currency: the ISO 4217 code of the currency to convert to, such as 'EUR' or 'JPY'.
    """
    code = currency.upper()
    return f"{amount * RATES[code]:.2f} {code}"

check(exercise("tool_docstring"), convert_currency)
''',
    "function_model": '''
import re
from agio_notebook import Reply
from agio_notebook.exercises import check, exercise

def my_model(messages, tools):
    last = messages[-1]
    if last["role"] == "tool":
        return f"It comes to {last['content']}."
    first, second = (int(n) for n in re.findall(r"-?\\d+", last["content"])[:2])
    return Reply.call("add", a=first, b=second)

check(exercise("function_model"), my_model)
''',
    "edit_tool_call": '''
from agio_notebook.exercises import check, exercise

def steer(pause):
    if pause.kind.value != "tool":
        return
    fixed = dict(pause.arguments)
    fixed["b"] += 1  # the model reads the second number one too small
    pause.edit(arguments=fixed)

check(exercise("edit_tool_call"), steer)
''',
    "stopping_rule": '''
from agio_notebook import Reply
from agio_notebook.exercises import check, exercise

def searcher(messages, tools):
    pages = [m["content"] for m in messages if m["role"] == "tool"]
    for page in pages:
        if "FOUND:" in page:
            return "The notes say: " + page.split("FOUND:", 1)[1].strip()
    if len(pages) >= 3:
        return "not found"
    return Reply.call("search", page=len(pages) + 1)

check(exercise("stopping_rule"), searcher)
''',
    "fork_compare_choose": '''
import re
from agio_notebook import StepRunner
from agio_notebook.exercises import check, exercise

async def choose(session_id, candidates, repository):
    question = repository.get_steps(session_id)[0].content
    percent, whole = (float(n) for n in re.findall(r"\\d+(?:\\.\\d+)?", question)[:2])
    right = percent * whole / 100
    branches = [await StepRunner(agent, repository=repository).fork(session_id, 1) for agent in candidates.values()]

    def correct(run):
        return any(abs(float(n) - right) < 1e-9 for n in re.findall(r"-?\\d+(?:\\.\\d+)?", run.final_text or ""))
    return next(run.run_id for run in branches if correct(run))

check(exercise("fork_compare_choose"), choose)
''',
    "write_scorer": '''
import re
from agio_notebook import StepRole
from agio_notebook.exercises import check, exercise

TEMPERATURE = re.compile(r"(-?\\d+(?:\\.\\d+)?)\\s*(?:°\\s*C\\b|degrees? Celsius)", re.I)

def temperatures(text):
    return {float(t) for t in TEMPERATURE.findall(text or "")}  # numbers as numbers: 6 is not 16

def repeats_the_tool(run):
    looked_up = [s for s in run.steps if s.role is StepRole.TOOL and s.name == "weather"]
    if not looked_up or looked_up[-1].status != "ok":
        return 0.0  # a guess, or a tool that failed
    told = temperatures(looked_up[-1].content)
    return 1.0 if told and told <= temperatures(run.final_text) else 0.0

check(exercise("write_scorer"), repeats_the_tool)
''',
    "pass_evaluation": '''
from agio_notebook import Agent
from agio_notebook.exercises import calculator, check, exercise, literal_model

agent = Agent(model=literal_model(), tools=[calculator],
              system_prompt="For each multiplication, call the calculator tool. Then reply with only the number, "
                            "nothing else.")
check(exercise("pass_evaluation"), agent)
''',
    "memory_second_run": '''
from agio_notebook import memory
from agio_notebook.exercises import check, exercise

def learn(run_id, repository):
    memory.add_skill("forecast-units", "Give every weather forecast in degrees Celsius.", repository=repository)

check(exercise("memory_second_run"), learn)
''',
    "tool_errors": '''
from agio_notebook.exercises import WEATHER, check, exercise

def city_weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city's name, e.g. 'Paris'.
    """
    try:
        return WEATHER[city]
    except KeyError:
        raise KeyError(f"no weather for {city!r}; the cities there is weather for: {', '.join(sorted(WEATHER))}") from None

check(exercise("tool_errors"), city_weather)
''',
    "delegate_to_agent": '''
from agio_notebook import Reply
from agio_notebook.exercises import check, exercise

def planner(messages, tools):
    answers = [m["content"] for m in messages if m["role"] == "tool"]
    if answers:
        return answers[-1]
    question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    return Reply.call("researcher", query=question)

check(exercise("delegate_to_agent"), planner)
''',
    "endpoint_settings": '''
from agio_notebook import Agent, ExecutionConfig, OpenAIModel
from agio_notebook.exercises import check, exercise

def connect(base_url):
    return Agent(model=OpenAIModel("tutor-1", base_url=base_url), model_settings={"max_tokens": 150, "temperature": 0},
                 config=ExecutionConfig(idle_timeout=1.5, first_token_timeout=1.5))

check(exercise("endpoint_settings"), connect)
''',
}
