"""memory_second_run: store a lesson the next run retrieves and follows."""

ENTRY = "learn"
SOURCE = '''
from agio_notebook import memory

def learn(run_id, repository):
    memory.add_experience("a weather forecast question", action="answered in Fahrenheit",
                          outcome="the user wanted Celsius", lesson="Answer weather forecasts in Celsius.",
                          source_run=run_id, repository=repository)
'''
