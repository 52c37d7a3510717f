"""fork_compare_choose: one fork per candidate, each answer compared as a number with the right one."""

ENTRY = "choose"
SOURCE = '''
import re
from agio_notebook import StepRunner

def numbers(text):
    return [float(n) for n in re.findall(r"-?\\d+(?:\\.\\d+)?", text or "")]

async def choose(session_id, candidates, repository):
    question = repository.get_steps(session_id)[0].content       # "What is 15% of 80?"
    percent, of = numbers(question)[:2]
    right = percent * of / 100
    branches = [await StepRunner(agent, repository=repository).fork(session_id, 1) for agent in candidates.values()]
    good = [b for b in branches if right in numbers(b.final_text)]
    return (good or branches)[0].run_id
'''
