"""stopping_rule: stop at FOUND, give up after 3 pages."""

from ...models import Reply


def reference(messages, tools):
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if results and "FOUND" in results[-1]:
        return "Found it: " + results[-1].split("FOUND:", 1)[1].strip()
    if len(results) >= 3:
        return "Not found in the first 3 pages."
    return Reply.call("search", page=len(results) + 1)


def never_stops(messages, tools):
    results = [m["content"] for m in messages if m["role"] == "tool"]
    return Reply.call("search", page=len(results) + 1)


def gives_up_at_once(messages, tools):
    if any(m["role"] == "tool" for m in messages):
        return "Not found."
    return Reply.call("search", page=1)


WRONG = [(never_stops, "never stopped"), (gives_up_at_once, "stopped after 1 page(s), before page 2")]
