"""pass_evaluation: the tool, and a prompt that asks for the number alone."""

ENTRY = "agent"
SOURCE = '''
from agio_notebook import Agent
from agio_notebook.exercises import calculator, literal_model

agent = Agent(model=literal_model(), tools=[calculator],
              system_prompt="Use the calculator for every multiplication. Reply with only the number.")
'''
