"""edit_tool_call: at the tool pause, fix the second number the model read one too small."""


def reference(pause):
    if pause.kind.value == "tool":
        pause.edit(arguments={"a": pause.arguments["a"], "b": pause.arguments["b"] + 1})


def only_continues(pause):
    pause.cont()


def skips_the_tool(pause):
    if pause.kind.value == "tool":
        pause.skip(str(pause.arguments["a"] + pause.arguments["b"] + 1))


def edits_the_question(pause):
    if pause.kind.value == "model" and pause.index == 1:
        question = pause.messages[-1]["content"]
        a, b = (int(n) for n in question.strip("What is ?").split(" + "))
        pause.edit(messages=[*pause.messages[:-1], {"role": "user", "content": f"What is {a} + {b + 1}?"}])


def fixes_the_wrong_number(pause):
    if pause.kind.value == "tool":
        pause.edit(arguments={"a": pause.arguments["a"] + 1, "b": pause.arguments["b"]})


def sends_text(pause):
    if pause.kind.value == "tool":
        pause.edit(arguments={"a": "two", "b": 3})


def aborts(pause):
    if pause.kind.value == "tool":
        pause.abort()


WRONG = [(only_continues, "the model answered 'The sum is 4.', not 5"),
         (skips_the_tool, "you answered the add call by hand with skip(): the tool never ran"),
         (edits_the_question, "you changed what the model saw (a request edit at a model pause)"),
         (fixes_the_wrong_number, "add ran with {'a': 3, 'b': 2}, not {'a': 2, 'b': 3}"),
         (sends_text, "your steer() raised DebugError: add rejects these arguments: a: Input should be a valid"),
         (aborts, "your steer() aborted the run: fix the tool call's arguments")]
