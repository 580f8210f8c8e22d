"""The package's import graph: no circles anywhere, data flows ingest -> index -> engine ->
localkg (the Python API's top-level name, a re-export of engine.api) -> cli, and cli imports
the API only.

Every import statement counts, module-level or inside a function (a lazy import still makes
one module depend on another), read from the source with `ast`, so the test sees the code as
written rather than what one run happened to import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

from engine.methods import registry

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ingest", "index", "engine")
LAYER = {"ingest": 0, "index": 1, "engine": 2, "localkg": 3, "cli": 4}
# cli.py's own declarations (its commands' click options and long help texts): cli imports them
# beside the API, and they import nothing of the project
CLI_DECLARATIONS = ("engine.cli_options", "engine.cli_help")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    found["cli"] = REPO / "cli.py"
    found["localkg"] = REPO / "localkg.py"
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports (`from a.b import c` counts a.b.c when it is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    return {t for t in targets if t in known and t != name}


def import_graph() -> nx.DiGraph:
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for target in _imports(name, path, set(modules)):
            # a package's __init__ is imported by its submodules implicitly: not an edge back
            if not name.startswith(target + "."):
                graph.add_edge(name, target)
    return graph


def test_no_import_circles() -> None:
    graph = import_graph()
    assert graph.number_of_edges() > 50  # the walk really read the imports
    cycles = list(nx.simple_cycles(graph))
    assert cycles == [], "import circles: " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles[:5])


def test_no_arrow_back_against_ingest_index_engine_cli() -> None:
    backwards = [(a, b) for a, b in import_graph().edges
                 if LAYER[b.split(".")[0]] > LAYER[a.split(".")[0]]]
    assert backwards == []


def api_violations(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Edges that break the API rule: cli imports only `localkg` (and CLI_DECLARATIONS, which
    import nothing of the project), `localkg` only `engine.api`, and nothing else in the project
    imports `localkg`."""
    bad = [(a, b) for a, b in graph.edges if a == "cli" and b != "localkg" and b not in CLI_DECLARATIONS]
    bad += [(a, b) for a, b in graph.edges if a in CLI_DECLARATIONS]
    bad += [(a, b) for a, b in graph.edges if a == "localkg" and not (b == "engine.api" or b.startswith("engine.api."))]
    bad += [(a, b) for a, b in graph.edges if b == "localkg" and a != "cli"]
    return bad


def test_cli_calls_the_api_and_nothing_deeper() -> None:
    graph = import_graph()
    assert graph.has_edge("cli", "localkg") and graph.has_edge("localkg", "engine.api")
    assert api_violations(graph) == []


def test_the_api_check_can_fail() -> None:
    graph = nx.DiGraph([("cli", "localkg"), ("cli", "engine.runs.batch"), ("localkg", "engine.api"),
                        ("engine.runs.answer", "localkg"), ("cli", "engine.cli_options"),
                        ("engine.cli_options", "engine.api")])
    assert api_violations(graph) == [("cli", "engine.runs.batch"), ("engine.cli_options", "engine.api"),
                                     ("engine.runs.answer", "localkg")]


def test_methods_never_import_each_other_nor_concrete_backends() -> None:
    """Methods see protocols: no method module imports another method, the store backends,
    the LLM backends' constructors or the runs layer."""
    graph = import_graph()
    methods = {module for module in (registry.get(name).run.__module__ for name in registry.names())
               if module.startswith("engine.methods.")}  # not the plugins other tests register
    assert {"engine.methods.tog.method", "engine.methods.tog2.method"} <= methods
    forbidden_prefixes = ("engine.runs", "engine.access.documents", "engine.llm.open", "engine.llm.models")
    for method in methods:
        targets = set(graph.successors(method))
        assert not targets & methods, method
        assert not [t for t in targets if t.startswith(forbidden_prefixes)], method


FAMILIES = ("baselines", "tog", "tog2", "hydra", "chains")  # engine/methods/<family>/


def family_violations(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Edges from one method family's sub-package into another's: what two families share
    lives in engine/methods/shared."""
    def family(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 3 and parts[:2] == ["engine", "methods"] and parts[2] in FAMILIES else None
    return sorted((a, b) for a, b in graph.edges if family(a) and family(b) and family(a) != family(b))


def test_method_families_share_only_through_shared() -> None:
    graph = import_graph()
    assert {f"engine.methods.{f}.method" for f in ("tog", "tog2", "hydra", "chains")} <= set(graph)
    assert family_violations(graph) == []


def test_the_family_check_can_fail() -> None:
    graph = nx.DiGraph([("engine.methods.hydra.method", "engine.methods.chains.prompts"),
                        ("engine.methods.hydra.method", "engine.methods.shared.chain_scoring"),
                        ("engine.methods.tog2.search", "engine.methods.tog2.prompts")])
    assert family_violations(graph) == [("engine.methods.hydra.method", "engine.methods.chains.prompts")]


PROTOCOL_MODULES = ("engine.llm.protocol", "engine.access.kg_protocol", "engine.access.protocols")
BACKEND_MODULES = ("engine.llm.llama_cpp_backend", "engine.llm.openai_backend", "engine.llm.scripted",
                   "engine.access.oxigraph_kg", "engine.access.sparql_endpoint_kg")
BACKEND_BASES = {"BaseLLM", "GraphBase"}  # engine/llm/base.py, engine/access/kg_base.py


def backend_violations(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """(module, backend) for each protocol module or method module (engine/methods/**) that
    imports a concrete backend, directly or through other modules (`open_kg`, say): methods see
    protocols only, and a protocol names no implementation."""
    seeing = [m for m in graph if m in PROTOCOL_MODULES or m.startswith("engine.methods.")]
    backends = [b for b in BACKEND_MODULES if b in graph]
    return sorted((m, b) for m in seeing for b in backends if nx.has_path(graph, m, b))


def _backend_modules_found() -> set[str]:
    """Modules that define a class subclassing a backend base: each must be in BACKEND_MODULES."""
    found = set()
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and {getattr(b, "id", None) for b in node.bases} & BACKEND_BASES:
                found.add(name)
    return found


def test_protocols_and_methods_never_import_a_backend() -> None:
    graph = import_graph()
    assert set(PROTOCOL_MODULES) | set(BACKEND_MODULES) <= set(graph)  # a rename cannot void it
    assert _backend_modules_found() == set(BACKEND_MODULES)  # a new backend is listed here
    bad = backend_violations(graph)
    assert bad == [], "; ".join(" -> ".join(nx.shortest_path(graph, a, b)) for a, b in bad)


def test_the_backend_check_can_fail() -> None:
    graph = nx.DiGraph([("engine.access.kg_protocol", "engine.access.sparql_endpoint_kg"),
                        ("engine.methods.tog.method", "engine.access.open_kg"),
                        ("engine.access.open_kg", "engine.access.oxigraph_kg"),
                        ("engine.methods.shared.prompts", "engine.llm.openai_backend"),
                        ("engine.methods.baselines.rag", "engine.llm.protocol"),
                        ("engine.llm.llama_cpp_backend", "engine.llm.protocol"),
                        ("engine.runs.context", "engine.llm.llama_cpp_backend")])
    assert backend_violations(graph) == [
        ("engine.access.kg_protocol", "engine.access.sparql_endpoint_kg"),
        ("engine.methods.shared.prompts", "engine.llm.openai_backend"),
        ("engine.methods.tog.method", "engine.access.oxigraph_kg"),
    ]


KERNEL = "ingest.base"  # errors, progress, the user home, file hashing: below every layer


def kernel_violations(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """Edges out of the shared kernel (ingest/base) to any other project module: the kernel sits
    below ingest's readers too, so every layer can import it."""
    inside = lambda m: m == KERNEL or m.startswith(KERNEL + ".")  # noqa: E731
    return sorted((a, b) for a, b in graph.edges if inside(a) and not inside(b))


def test_the_shared_kernel_imports_nothing_of_the_project() -> None:
    graph = import_graph()
    assert {"ingest.base.errors", "ingest.base.progress", "ingest.base.home", "ingest.base.hashing"} <= set(graph)
    assert graph.in_degree("ingest.base.errors") > 40  # the whole project's errors come from here
    assert kernel_violations(graph) == []


def test_the_kernel_check_can_fail() -> None:
    graph = nx.DiGraph([("ingest.base.progress", "ingest.base.errors"), ("ingest.base.home", "engine.llm.models"),
                        ("ingest.base.errors", "ingest.sources"), ("index.build", "ingest.base.errors")])
    assert kernel_violations(graph) == [("ingest.base.errors", "ingest.sources"),
                                        ("ingest.base.home", "engine.llm.models")]


def test_the_cycle_check_can_fail(tmp_path: Path) -> None:
    graph = nx.DiGraph([("a", "b"), ("b", "a")])
    assert list(nx.simple_cycles(graph))
