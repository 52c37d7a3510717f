"""A class on JupyterHub sharing one PostgreSQL store: owners on every row, a role per student, row-level
security, and the teacher's view of the class's progress. See ``docs/classroom.md``.

    agio classroom init postgresql://ADMIN@HOST/DB --teacher NAME --students alice,bob
    agio_notebook.classroom.progress()        # student × exercise: passed, attempts, last reason
"""

from __future__ import annotations

from .admin import add_student, init, remove_student
from .progress import dashboard, failing_reasons, progress
from .roles import ClassroomError, Roster, class_role

__all__ = ["ClassroomError", "Roster", "add_student", "class_role", "dashboard", "failing_reasons", "init", "progress",
           "remove_student"]
