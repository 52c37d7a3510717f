"""stopping_rule: stop at FOUND, give up after 3 pages."""

ENTRY = "searcher"
SOURCE = '''
from agio_notebook import Reply

def searcher(messages, tools):
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if results and results[-1].startswith("FOUND:"):
        return "Found it: " + results[-1].removeprefix("FOUND:").strip()
    if len(results) >= 3:
        return "Not found in the first 3 pages."
    return Reply.call("search", page=len(results) + 1)
'''
