"""edit_tool_call: at the tool pause, fix the second number the model read one too small."""

ENTRY = "steer"
SOURCE = '''
def steer(pause):
    if pause.kind.value == "tool":
        pause.edit(arguments={"a": pause.arguments["a"], "b": pause.arguments["b"] + 1})
'''
