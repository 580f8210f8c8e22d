"""The air-gapped install path (docs/air-gapped.md): `make setup WHEELHOUSE=DIR` installs from a
folder of wheels with no index at all.

A small wheelhouse is made here without any network: wheels of a few pure-Python packages the
project uses, repacked from their installed files (rich and what it needs: a chain that pip
must resolve from the folder), setuptools (the build backend of the project's own install),
and the project's own wheel, built by pip from a copy of the checkout with its build environment
taken from the folder too. A fresh venv then installs from it with `--no-index`, the pip
configuration switched off and the index pointed at a closed port on the loopback address, as
on a machine without a network. The Makefile's recipes are checked with `make -n`.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# rich -> markdown-it-py -> mdurl, and pygments: pure Python, installed with the project (rich is a
# runtime requirement); setuptools: the build backend pip installs into the project's build env.
CHAIN = ("rich", "markdown-it-py", "mdurl", "pygments")
# Nothing listens there: were pip to try an index despite --no-index, it would fail at once.
DEAD_INDEX = "http://127.0.0.1:9/simple"
SKIP_IN_DIST_INFO = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}


def _b64_sha256(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack_wheel(name: str, out: Path) -> Path:
    """A wheel of the installed pure-Python distribution `name`, from the files its RECORD lists
    (no bytecode, no scripts: pip makes those again from the metadata)."""
    dist = metadata.distribution(name)
    wheel_meta = dist.read_text("WHEEL") or ""
    if "Root-Is-Purelib: true" not in wheel_meta:
        pytest.skip(f"{name} is not installed as a pure-Python wheel here; cannot repack it")
    tags = [line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")]
    files = [f for f in dist.files or [] if not str(f).startswith("..")]
    dist_info = next(str(f).split("/", 1)[0] for f in files if str(f).split("/", 1)[0].endswith(".dist-info"))
    stem = dist_info.removesuffix(".dist-info")  # {name}-{version}, already normalised by its wheel
    path = out / f"{stem}-{tags[0] if tags else 'py3-none-any'}.whl"
    records: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            arc = str(f).replace(os.sep, "/")
            parts = arc.split("/")
            if "__pycache__" in parts or arc.endswith(".pyc"):
                continue
            if parts[0] == dist_info and parts[-1] in SKIP_IN_DIST_INFO:
                continue
            data = Path(f.locate()).read_bytes()
            zf.writestr(arc, data)
            records.append((arc, _b64_sha256(data), str(len(data))))
        record = io.StringIO()
        writer = csv.writer(record, lineterminator="\n")
        writer.writerows(records)
        writer.writerow((f"{dist_info}/RECORD", "", ""))
        zf.writestr(f"{dist_info}/RECORD", record.getvalue())
    return path


def offline_env(tmp: Path) -> dict[str, str]:
    """No pip configuration (this machine's points at local indexes), no cache, a dead index."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": DEAD_INDEX, "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_DEFAULT_TIMEOUT": "5", "PIP_RETRIES": "0",
            "HOME": str(tmp / "home")}
    return env


def project_copy(dest: Path) -> Path:
    """The files the project's wheel is built from (pyproject's packages and modules), so that
    the build writes nothing into the checkout."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    tool = config["tool"]["setuptools"]
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", *config["tool"]["setuptools"]["dynamic"]["dependencies"]["file"]):
        shutil.copy2(REPO / name, dest / name)
    for module in tool.get("py-modules", []):
        shutil.copy2(REPO / f"{module}.py", dest / f"{module}.py")
    for top in sorted({p.split(".")[0] for p in tool["packages"]["find"]["include"]}):
        shutil.copytree(REPO / top, dest / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    house = tmp_path_factory.mktemp("wheelhouse")
    for name in (*CHAIN, "setuptools"):
        repack_wheel(name, house)
    if tuple(int(x) for x in metadata.version("setuptools").split(".")[:2]) < (70, 1):
        repack_wheel("wheel", house)  # older setuptools build wheels with the `wheel` package
    return house


@pytest.mark.slow
def test_fresh_venv_installs_from_the_wheelhouse_alone(wheelhouse: Path, tmp_path: Path) -> None:
    env = offline_env(tmp_path)
    # the project's own wheel, its build environment (setuptools) from the wheelhouse as well
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--find-links", str(wheelhouse),
                 "-w", str(wheelhouse), str(project_copy(tmp_path / "src"))], env, tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert list(wheelhouse.glob("localkg-*.whl")), sorted(p.name for p in wheelhouse.iterdir())

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    source = ["--no-index", "--find-links", str(wheelhouse)]
    chain = run([str(py), "-m", "pip", "install", *source, "rich"], env, tmp_path)
    assert chain.returncode == 0, chain.stdout + chain.stderr
    project = run([str(py), "-m", "pip", "install", *source, "--no-deps", "localkg"], env, tmp_path)
    assert project.returncode == 0, project.stdout + project.stderr

    # what came in is the wheelhouse's: every package of the chain, and the localkg command
    check = run([str(py), "-c", "from importlib import metadata as m; "
                 f"print(' '.join(m.version(n) for n in {[*CHAIN, 'localkg']!r}))"], env, tmp_path)
    assert check.returncode == 0, check.stderr
    version = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert check.stdout.split() == [*(metadata.version(n) for n in CHAIN), version]
    assert (venv / "bin" / "localkg").is_file()
    rich_file = run([str(py), "-c", "import rich; print(rich.__file__)"], env, tmp_path).stdout.strip()
    assert Path(rich_file).is_relative_to(venv)

    # and nothing else can: a package that is not in the folder is not fetched from anywhere
    missing = run([str(py), "-m", "pip", "install", *source, "tantivy"], env, tmp_path)
    assert missing.returncode != 0
    assert "No matching distribution found for tantivy" in missing.stdout + missing.stderr


def make_dry_run(*args: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # not the settings of a `make test` this runs under, nor a WHEELHOUSE of the caller's
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "WHEELHOUSE", "VENV"}}
    done = subprocess.run(["make", "-n", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def pip_lines(recipe: str) -> list[str]:
    return [line for line in recipe.splitlines() if "/bin/pip install" in line]


def test_setup_with_a_wheelhouse_never_asks_an_index(tmp_path: Path) -> None:
    house = tmp_path / "wh"
    recipe = make_dry_run("setup", f"VENV={tmp_path / 'venv'}", f"WHEELHOUSE={house}")
    lines = pip_lines(recipe)
    # pip itself, torch, the requirements, llama-cpp-python (and its rebuild), the models, localkg
    assert len(lines) >= 7, recipe
    assert all(f"--no-index --find-links {house} " in line for line in lines), recipe
    assert "sha256sum --quiet -c SHA256SUMS" in recipe
    assert "--no-deps -e ." in recipe  # the localkg command


def test_setup_without_a_wheelhouse_is_unchanged(tmp_path: Path) -> None:
    recipe = make_dry_run("setup", f"VENV={tmp_path / 'venv'}")
    lines = pip_lines(recipe)
    assert len(lines) >= 7, recipe
    assert not any("--no-index" in line or "--find-links" in line for line in lines), recipe
    assert "SHA256SUMS" not in recipe


def test_wheelhouse_recipe_covers_every_requirement_file(tmp_path: Path) -> None:
    house = tmp_path / "wh"
    recipe = make_dry_run("wheelhouse", f"VENV={tmp_path / 'venv'}", f"WHEELHOUSE={house}")
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-llm.txt", "requirements-models.txt"):
        assert f"-r {name}" in recipe, name
    setup = make_dry_run("setup", f"VENV={tmp_path / 'venv'}")
    torch = next(word for word in setup.split() if word.startswith("torch=="))
    assert f" {torch} " in recipe  # the same torch as setup's
    assert "-mno-amx-tile" in recipe  # llama-cpp-python with setup's flags
    assert f"-w {house} " in recipe and "SHA256SUMS" in recipe
