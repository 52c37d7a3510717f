"""Subprocess for store tests: commit steps in a loop, printing each id once its commit returned."""

import sys

from agio_notebook.core import Step, StepRole
from agio_notebook.storage import TinyDBRepository


def main() -> None:
    root, session, count, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    base = int(sys.argv[5]) if len(sys.argv) > 5 else 0  # writers sharing a session use their own sequences
    repo = TinyDBRepository(root)
    for i in range(count):
        step = Step(session_id=session, run_id=tag, sequence=base + i + 1, role=StepRole.USER, content=f"{tag}-{i}" * 20)
        repo.commit(steps=[step])
        print(step.id, flush=True)
        if i % 25 == 24:
            repo.compact()  # crash windows inside compaction too


if __name__ == "__main__":
    main()
