"""delegate_to_agent: ask the researcher agent (a tool), then answer with what it found."""

ENTRY = "planner"
SOURCE = '''
from agio_notebook import Reply

def planner(messages, tools):
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    return Reply.call("researcher", query=messages[-1]["content"])
'''
