"""What the kernel and browser tests of the evaluation view run: two adders (one slips on multiples of
three, and wraps its answer in markup that must stay text), nine questions, and a scorer."""

SETUP = r'''
import agio_notebook as agio
from agio_notebook import Agent, FunctionModel

def numbers(messages):
    return [int(w) for w in messages[-1]["content"].replace("?", "").split() if w.isdigit()]

def careful(messages, tools):
    a, b = numbers(messages)
    return str(a + b)

def hasty(messages, tools):
    a, b = numbers(messages)
    return str(a + b + (a % 3 == 0)) + " <b>sure</b>"

data = [{"id": f"q{i}", "question": f"What is {i} plus {i + 2}?", "answer": str(2 * i + 2)} for i in range(9)]

def correct(run, sample):
    return run.final_text.split()[0] == sample["answer"]
'''
