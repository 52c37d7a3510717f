"""function_model: call the tool, then answer with its result."""

import re

from ...models import Reply


def reference(messages, tools):
    if messages[-1]["role"] == "tool":
        return f"The sum is {messages[-1]['content']}."
    a, b = (int(n) for n in re.findall(r"-?\d+", messages[-1]["content"])[:2])
    return Reply.call("add", a=a, b=b)


def answers_at_once(messages, tools):
    return "5"


def never_answers(messages, tools):
    a, b = (int(n) for n in re.findall(r"-?\d+", next(m["content"] for m in messages if m["role"] == "user"))[:2])
    return Reply.call("add", a=a, b=b)


def raises(messages, tools):
    return int(messages[-1]["content"])  # the question is not a number


WRONG = [(answers_at_once, "answered without calling add"),
         (never_answers, "kept calling tools until max_steps"),
         (raises, "the run failed: model 'raises' failed: ValueError")]
