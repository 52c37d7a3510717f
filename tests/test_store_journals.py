"""Named journals (the records memory and scheduling keep beside the sessions) on every backend: durable
appends, deletes, changes made by another process seen on refresh, names listed by prefix."""

from __future__ import annotations

import subprocess
import sys

from agio_notebook.storage import new_repository

KEYS = {"notes": lambda d: d["id"], "tags": lambda d: f"{d['note']}:{d['tag']}"}


def test_a_journal_round_trips_and_follows_other_writers(store_url):
    repo = new_repository(store_url)
    seen = []
    journal = repo.journal("memory", KEYS)
    journal.on_change = lambda table, key, doc: seen.append((table, key, doc is None))
    journal.append([("notes", {"id": "n1", "text": "one"}), ("notes", {"id": "n2", "text": "two"}),
                    ("tags", {"note": "n1", "tag": "x"})])
    journal.append([("notes", {"id": "n1", "text": "one, edited"})], [("notes", "n2")])
    assert journal.tables["notes"] == {"n1": {"id": "n1", "text": "one, edited"}}
    assert ("notes", "n2", True) in seen and ("tags", "n1:x", False) in seen

    other = subprocess.run([sys.executable, "-c", (
        "import sys; from agio_notebook.storage import new_repository\n"
        "j = new_repository(sys.argv[1]).journal('memory', {'notes': lambda d: d['id']})\n"
        "assert j.tables['notes']['n1']['text'] == 'one, edited'\n"
        "j.append([('notes', {'id': 'n3', 'text': 'from another process'})])\n"), store_url],
        capture_output=True, text=True, timeout=120)
    assert other.returncode == 0, other.stderr
    journal.refresh()
    assert journal.tables["notes"]["n3"]["text"] == "from another process"
    assert seen[-1] == ("notes", "n3", False)

    for batch in ("b1", "b2"):
        repo.journal(f"executions/{batch}", KEYS).append([("notes", {"id": batch})])
    assert repo.journal_names("executions/") == ["executions/b1", "executions/b2"]
    assert repo.journal_names("executions/b2") == ["executions/b2"]
    repo.close()

    reopened = new_repository(store_url).journal("memory", KEYS)
    assert sorted(reopened.tables["notes"]) == ["n1", "n3"] and "n1:x" in reopened.tables["tags"]
