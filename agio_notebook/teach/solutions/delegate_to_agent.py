"""delegate_to_agent: ask the researcher agent (a tool), then answer with what it found."""

from ...models import Reply


def reference(messages, tools):
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    return Reply.call("researcher", query=messages[-1]["content"])


def answers_itself(messages, tools):
    return "Owls are birds."


def empty_query(messages, tools):
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    return Reply.call("researcher", query="")


def never_answers(messages, tools):
    question = next(m["content"] for m in messages if m["role"] == "user")
    return Reply.call("researcher", query=question)


def drops_the_answer(messages, tools):
    if messages[-1]["role"] == "tool":
        return "The researcher has answered."
    return Reply.call("researcher", query=messages[-1]["content"])


WRONG = [(answers_itself, "answered without asking the researcher"),
         (empty_query, "you asked the researcher '', which does not name owls"),
         (never_answers, "kept calling tools until max_steps"),
         (drops_the_answer, "which does not contain what the researcher found")]
