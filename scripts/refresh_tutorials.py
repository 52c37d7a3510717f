#!/usr/bin/env python
"""Re-execute the tutorials and save their outputs, so what a learner first sees is what the code does now.

Each notebook runs top to bottom in a fresh kernel of this interpreter (this checkout's package first on
its path), offline (no OpenAI settings) and against a new, empty store, from notebooks/ as its working
directory. A cell that fails stops that notebook and nothing of it is written; the others go on.

    .venv/bin/python scripts/refresh_tutorials.py                 # every tutorial, saved in place
    .venv/bin/python scripts/refresh_tutorials.py quickstart      # only these (names or paths)
    .venv/bin/python scripts/refresh_tutorials.py --out DIR       # executed copies in DIR; sources untouched
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
KERNEL = "agio-refresh"
OFFLINE = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGIO_MODEL")


def tutorials(names: list[str]) -> list[Path]:
    """The notebooks named (a name, with or without .ipynb, or a path), or every tutorial."""
    if not names:
        return sorted(NOTEBOOKS.glob("*.ipynb"))
    paths = []
    for name in names:
        path = Path(name) if name.endswith(".ipynb") and Path(name).exists() else NOTEBOOKS / f"{Path(name).stem}.ipynb"
        if not path.exists():
            raise SystemExit(f"refresh_tutorials: no tutorial {name!r} in notebooks/")
        paths.append(path)
    return paths


def kernel_env(jupyter_dir: Path, store: Path) -> dict[str, str]:
    """A kernelspec for this interpreter, and the environment every kernel starts with."""
    spec = jupyter_dir / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "agio tutorials", "language": "python"}))
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE}
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(jupyter_dir), os.environ.get("JUPYTER_PATH")]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env["AGIO_STORE"] = str(store)
    return env


def refresh(path: Path, out: Path, timeout: int) -> str | None:
    """Execute ``path`` in a fresh store and write it to ``out``; the failing cell's error, or None."""
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="agio-tutorial-") as tmp:
        # named as a learner's default store is, so a tutorial's own store reads as theirs would (.agio.NAME)
        env = kernel_env(Path(tmp) / "jupyter", Path(tmp) / ".agio")
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)  # the kernel manager finds the kernelspec, and the kernel inherits the rest
        try:
            NotebookClient(nb, kernel_name=KERNEL, timeout=timeout,
                           resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
        except CellExecutionError as exc:
            return str(exc).strip().splitlines()[-1]
        finally:
            os.environ.clear()
            os.environ.update(saved)
        _without_prefix(nb, tmp + os.sep)  # the store reads as a learner's would (.agio.NAME), no machine path
    nb.metadata.get("widgets", {}).pop("application/vnd.jupyter.widget-state+json", None)  # no live state saved
    if "widgets" in nb.metadata and not nb.metadata["widgets"]:
        del nb.metadata["widgets"]
    nbformat.write(nb, out)
    return None


def _without_prefix(nb: Any, prefix: str) -> None:
    """Drop ``prefix`` (this run's temporary folder) from every text output: saved notebooks name no path of
    the machine that refreshed them."""
    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(prefix, "")
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    for cell in nb.cells:
        for output in cell.get("outputs", ()):
            for key in ("text", "data"):
                if key in output:
                    output[key] = clean(output[key])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="tutorials to refresh (default: all)")
    parser.add_argument("--out", type=Path, help="write executed copies here instead of in place")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may take")
    args = parser.parse_args(argv)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in tutorials(args.names):
        target = (args.out / path.name) if args.out else path
        error = refresh(path, target, args.timeout)
        print(f"{path.name}: {'FAILED — ' + error if error else 'refreshed -> ' + str(target)}", flush=True)
        failed += error is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
