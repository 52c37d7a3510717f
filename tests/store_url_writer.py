"""Subprocess for backend tests: commit steps to any store (path or URL), printing each id once its commit
returned.  ``python store_url_writer.py STORE SESSION COUNT TAG``."""

import sys

from agio_notebook.core import Step, StepRole
from agio_notebook.storage import new_repository


def main() -> None:
    target, session, count, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    repo = new_repository(target)
    last = repo.get_last_step(session)
    first = last.sequence + 1 if last is not None else 1  # a later writer continues the session
    for i in range(count):
        step = Step(session_id=session, run_id=tag, sequence=first + i, role=StepRole.USER, content=f"{tag}-{i}" * 20)
        repo.commit(steps=[step])
        print(step.id, flush=True)


if __name__ == "__main__":
    main()
