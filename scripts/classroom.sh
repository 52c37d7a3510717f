#!/usr/bin/env bash
# A class on this machine, for a demo: PostgreSQL (Debian's), `agio classroom init` with a teacher and two
# students, and JupyterHub (with configurable-http-proxy) serving each of them the course in notebooks/.
# Everything lives in one folder (default .classroom); Ctrl-C stops the hub and the database.
#
#   scripts/classroom.sh [--dir DIR] [--port 8000] [--password PASSWORD] [--teacher tina] [--students alice,bob]
#
# Then open http://127.0.0.1:8000 and log in as tina, alice or bob with the password (each in a browser
# profile of their own). docs/classroom.md explains each step, and how a real class differs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

dir=.classroom
port=8000
password=agio-classroom-demo
teacher=tina
students=alice,bob
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --password) password=$2; shift 2 ;;
    --teacher) teacher=$2; shift 2 ;;
    --students) students=$2; shift 2 ;;
    *) echo "classroom.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

scripts/setup.sh --browser >/dev/null  # the venv, jupyterhub, configurable-http-proxy and Debian's postgresql
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
as_postgres() {  # PostgreSQL refuses to run as root: run its programs as the postgres user then
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_bin=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
pg_dir=$dir/postgres
if [ ! -f "$pg_dir/data/PG_VERSION" ]; then
  echo "== a PostgreSQL database for the class in $pg_dir"
  mkdir -p "$pg_dir"
  # a port of its own, kept: the class's secrets name it
  .venv/bin/python -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])" \
    > "$pg_dir/port"
  head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$pg_dir/admin-password"
  chmod 600 "$pg_dir/admin-password"
  [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$pg_dir"
  as_postgres "$pg_bin/initdb" -D "$pg_dir/data" -U agio -A scram-sha-256 --pwfile="$pg_dir/admin-password" >/dev/null
fi
db_port=$(cat "$pg_dir/port")
as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w \
  -o "-p $db_port -k $pg_dir -c listen_addresses=127.0.0.1" start >/dev/null
stop_database() { as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast stop >/dev/null 2>&1 || true; }
trap stop_database EXIT
admin_url="postgresql://agio:$(cat "$pg_dir/admin-password")@127.0.0.1:$db_port/classroom"
.venv/bin/python - "${admin_url%/classroom}/postgres" <<'EOF'
import sys
import psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'classroom'").fetchone():
        conn.execute("CREATE DATABASE classroom")
EOF

echo "== agio classroom init (teacher $teacher, students $students)"
(cd "$dir" && "$root/.venv/bin/agio" classroom init "$admin_url" --teacher "$teacher" --students "$students" \
  --secrets "$dir/secrets.json" --hub-config "$dir/class_config.py" --course "$root/notebooks" \
  --trial-password "$password")
cat "$dir/class_config.py" > "$dir/jupyterhub_config.py"
cat >> "$dir/jupyterhub_config.py" <<EOF
# this machine's demo: where the hub listens and keeps its state (scripts/classroom.sh)
c.JupyterHub.bind_url = "http://127.0.0.1:$port"
c.ConfigurableHTTPProxy.command = ["$root/.venv/chp/node_modules/.bin/configurable-http-proxy"]
c.JupyterHub.db_url = "sqlite:///$dir/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "$dir/jupyterhub_cookie_secret"
c.Spawner.cmd = ["$root/.venv/bin/jupyterhub-singleuser"]
c.Spawner.start_timeout = 120
EOF
echo "== JupyterHub on http://127.0.0.1:$port — log in as $teacher or ${students//,/ or } with the password '$password'"
cd "$dir"
PATH="$root/.venv/bin:$PATH" "$root/.venv/bin/jupyterhub" -f "$dir/jupyterhub_config.py"
