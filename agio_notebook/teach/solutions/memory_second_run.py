"""memory_second_run: store a lesson the next run retrieves and follows."""

from ... import memory


def reference(run_id, repository):
    memory.add_experience("a weather forecast question", action="answered in Fahrenheit",
                          outcome="the user wanted Celsius", lesson="Answer weather forecasts in Celsius.",
                          source_run=run_id, repository=repository)


def forgets(run_id, repository):
    pass


def vague_lesson(run_id, repository):
    memory.add_experience("a weather forecast question", outcome="the answer was wrong",
                          lesson="Be more careful.", source_run=run_id, repository=repository)


def raises(run_id, repository):
    raise RuntimeError("not written yet")


WRONG = [(forgets, "the second run retrieved no memory"), (vague_lesson, "but still answered"),
         (raises, "your learn() raised RuntimeError: not written yet")]
