"""The `localkg` command that `make setup` installs (pyproject.toml's [project.scripts], an
editable install of this checkout) runs, from any folder, and runs this checkout's code."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The interpreter's own bin/ (not resolved: a venv's python is a link to the base interpreter).
SCRIPT = Path(sys.executable).parent / "localkg"


@pytest.fixture(scope="module")
def localkg() -> Path:
    if not SCRIPT.is_file():
        pytest.skip(f"the localkg command is not installed in this environment ({SCRIPT} is missing): "
                    "`make setup` installs it (pip install --no-deps -e .)")
    return SCRIPT


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what the install gives
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_entry_point_is_cli_main(localkg: Path) -> None:
    points = [ep for ep in metadata.entry_points(group="console_scripts") if ep.name == "localkg"]
    assert points, "the localkg distribution declares no localkg console script"
    assert points[0].value == "cli:main"


def test_localkg_help_runs_from_any_folder(localkg: Path, tmp_path: Path) -> None:
    done = _run([str(localkg), "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Usage: localkg" in done.stdout
    from cli import main

    shown = [name for name, command in main.commands.items() if not command.hidden]
    assert shown
    missing = [name for name in shown if f"  {name} " not in done.stdout and f"  {name}\n" not in done.stdout]
    assert missing == [], f"commands of cli.py missing from `localkg --help`: {missing}"
    sub = _run([str(localkg), "models", "--help"], tmp_path)
    assert sub.returncode == 0, sub.stderr
    assert "Usage: localkg models" in sub.stdout


def test_localkg_runs_this_checkout(localkg: Path, tmp_path: Path) -> None:
    """Editable: the command imports the repository's cli.py (so it follows every edit), not a
    copy made at install time."""
    done = _run([sys.executable, "-c", "import cli; print(cli.__file__)"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == REPO / "cli.py", (
        f"the installed localkg imports {done.stdout.strip()}, not this checkout: run `make setup` "
        "(pip install --no-deps -e .)"
    )
