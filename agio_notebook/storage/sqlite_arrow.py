"""Read a SQLite store's steps frame columns into Arrow, in a process of its own.

Run as a script (``python sqlite_arrow.py DB COLUMNS OUT``): it writes one Arrow IPC stream to the
file OUT (the parent passes an in-memory file it maps back without a copy), or one line to stderr and
exit status 1. The ADBC driver links a SQLite library of its own; two SQLite
libraries in one process must never open the same WAL database (closing one drops the other's
POSIX locks, and it may checkpoint and delete the WAL under it), so the kernel that holds the store
open runs this reader as a child process instead of loading the driver itself.

Imports only the driver and pyarrow (not agio_notebook): the child starts in a fraction of a second.
"""

from __future__ import annotations

import sys

# the steps frame's columns, as storage.sql.FRAME_COLUMNS (the parent passes them, this is the default)
QUERY = "SELECT {columns} FROM agio_steps ORDER BY session_id, sequence, attempt"


def main(argv: list[str]) -> int:
    path, columns, out_path = argv[1], argv[2], argv[3]
    try:
        import adbc_driver_sqlite.dbapi as adbc
        import pyarrow as pa
        from adbc_driver_sqlite import StatementOptions

        with adbc.connect(path) as conn, conn.cursor() as cur:
            # one batch: the driver infers each column's type from the batch it reads, so a column
            # whose first thousand values are NULL (a cost, an error) would not type the rest
            cur.adbc_statement.set_options(**{StatementOptions.BATCH_ROWS.value: str(2 ** 30)})
            cur.execute(QUERY.format(columns=columns))
            table = cur.fetch_arrow_table()
        with pa.OSFile(out_path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as out:
            out.write_table(table)
    except Exception as exc:  # noqa: BLE001 - the driver's own error classes: one line for the parent
        print(f"{type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
