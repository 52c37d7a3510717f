"""function_model: call the tool, then answer with its result."""

ENTRY = "my_model"
SOURCE = '''
import re
from agio_notebook import Reply

def my_model(messages, tools):
    if messages[-1]["role"] == "tool":
        return f"The sum is {messages[-1]['content']}."
    a, b = (int(n) for n in re.findall(r"-?\\d+", messages[-1]["content"])[:2])
    return Reply.call("add", a=a, b=b)
'''
