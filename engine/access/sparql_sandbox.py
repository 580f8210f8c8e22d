"""Run a user's SPARQL query on an index's embedded store in a child process that cannot reach
the network, with a wall-time limit.

Why a child: Oxigraph (0.5, through pyoxigraph) has no option to refuse SERVICE, and its SPARQL
parser is more lenient than any text check (it has no word boundaries: `trueSERVICE <u> {}` is
a SERVICE call). So the guarantee is built, not parsed: the child installs a seccomp filter
(no_network.py) before it reads the query, and from then on no thread of it can create a socket;
one that tries is killed by the kernel (SIGSYS). The text guard (sparql_guard.py) still runs
first, in the parent, for a clear message and the size and depth limits.

The child also bounds what a runaway query can do to the caller: it is killed at the time limit,
and its crash (a stack overflow on thousands of OPTIONALs, a segfault) is a one-line error here.
The guard's own parse is not timed; the size and depth limits bound it (seconds at worst).
Internal, engine-built queries never come here (they use `quads_for_pattern` in-process).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.access.sparql_guard import RefusedQuery, check_local_query
from ingest.base.errors import IndexError_, InputError, LocalkgError

DEFAULT_TIMEOUT_S = 30.0
_ROOT = Path(__file__).resolve().parents[2]
_CHILD = ("import sys; sys.path.insert(0, {root!r}); "
          "from engine.access.sparql_sandbox import child_main; child_main()")


class NetworkBlocked(RefusedQuery):
    """The query tried to open a socket; the kernel stopped the child."""


class QueryStopped(LocalkgError):
    """The query ran past its time limit and was killed."""


class QueryCrashed(LocalkgError):
    """The child died (a signal or an exit status) without an answer."""


class QueryFailed(InputError):
    """The store refused or failed the query (a syntax error, an update, a read error)."""


@dataclass(frozen=True)
class QueryAnswer:
    """What a query returned: ASK a boolean, SELECT rows ({variable: value or None}),
    CONSTRUCT/DESCRIBE N-Triples lines. Exactly one is set."""

    boolean: bool | None = None
    rows: list[dict[str, str | None]] | None = None
    triples: list[str] | None = None


def run_user_query(index: Path, query: str, timeout_s: float = DEFAULT_TIMEOUT_S, *,
                   guard: bool = True) -> QueryAnswer:
    """Run `query` on the store of the index at `index`, in a child that cannot open a socket,
    killed after `timeout_s` seconds (its start, about a tenth of a second, included).

    Raises RefusedQuery (the guard, or the sandbox: NetworkBlocked), QueryStopped, QueryCrashed,
    QueryFailed or IndexError_: all LocalkgErrors with a one-line message. `guard=False` skips
    the text guard; tests use it to show that the sandbox alone holds."""
    if guard:
        check_local_query(query)
    command = [sys.executable, "-I", "-c", _CHILD.format(root=str(_ROOT))]
    request = json.dumps({"index": str(index), "query": query}).encode()
    try:
        done = subprocess.run(command, input=request, capture_output=True, timeout=timeout_s,
                              close_fds=True, check=False)
    except subprocess.TimeoutExpired:  # run() has killed the child
        raise QueryStopped(f"SPARQL query stopped after {timeout_s:g} s (--timeout): it ran too "
                           "long; add a LIMIT, narrow its patterns, or raise --timeout") from None
    return _outcome(done.returncode, done.stdout, done.stderr)


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return f": {lines[-1][:200]}" if lines else ""


def _how(returncode: int) -> str:
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        return f"signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"signal {-returncode}"


def _outcome(returncode: int, stdout: bytes, stderr: bytes) -> QueryAnswer:
    """The answer the child wrote, or the error its exit means."""
    if returncode == -signal.SIGSYS:
        raise NetworkBlocked("SPARQL query refused: it tried to open a network connection "
                             "(SERVICE?) and the sandbox stopped it. localkg never touches the "
                             "network at run time")
    if returncode != 0 or not stdout.strip():
        raise QueryCrashed(f"SPARQL query crashed the store process ({_how(returncode)}"
                           f"{_last_line(stderr)}); "
                           "nothing else was affected. Simplify the query (fewer OPTIONAL, UNION "
                           "or nested groups) or add a LIMIT")
    reply = json.loads(stdout)
    if "answer" in reply:
        return QueryAnswer(**reply["answer"])
    message = reply["message"]
    if reply["error"] == "query":
        raise QueryFailed(f"SPARQL query failed (queries only; the store is opened read-only): {message}")
    if reply["error"] == "unavailable":
        raise LocalkgError(f"cannot run a SPARQL query with no network access here ({message}); "
                           "localkg will not run it unprotected")
    raise IndexError_(message)


def _serialize(result: Any) -> dict[str, Any]:
    import pyoxigraph as ox

    if isinstance(result, ox.QueryBoolean):
        return {"boolean": bool(result)}
    if isinstance(result, ox.QuerySolutions):
        names = [v.value for v in result.variables]
        return {"rows": [{n: (None if s[n] is None else s[n].value) for n in names} for s in result]}
    return {"triples": [f"{t.subject} {t.predicate} {t.object} ." for t in result]}


def _answer(request: dict[str, str]) -> dict[str, Any]:
    from engine.access.oxigraph_kg import OxigraphKG
    from index.paths import IndexPaths

    try:
        store = OxigraphKG.open(IndexPaths(Path(request["index"]))).store
    except LocalkgError as exc:
        return {"error": "index", "message": str(exc)}
    try:
        return {"answer": _serialize(store.query(request["query"]))}
    except (SyntaxError, ValueError, OSError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {"error": "query", "message": first}


def child_main() -> None:
    """The child: forbid sockets, then read the request from stdin and write one JSON reply."""
    import resource

    from engine.access.no_network import NetworkSandboxUnavailable, forbid_network

    try:
        forbid_network()
    except NetworkSandboxUnavailable as exc:
        reply: dict[str, Any] = {"error": "unavailable", "message": str(exc)}
    else:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
        reply = _answer(json.loads(sys.stdin.buffer.read()))
    sys.stdout.write(json.dumps(reply))
    sys.stdout.flush()
