"""pass_evaluation: the tool, and a prompt that asks for only the number."""

from ...agent import Agent
from ..course.judging import calculator, literal_model

reference = Agent(model=literal_model(), tools=[calculator],
                  system_prompt="Use the calculator for every multiplication. Reply with only the number.")

no_calculator = Agent(model=literal_model(), system_prompt="Reply with only the number.")

chatty = Agent(model=literal_model(), tools=[calculator], system_prompt="Use the calculator.")

WRONG = [(no_calculator, "estimated without the calculator"),
         (chatty, "expected exactly '391', got 'The answer is 391.': tell the agent to reply with only the number")]
