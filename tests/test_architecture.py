"""The architecture (docs/architecture.md), checked on the source: every module listed on the page, imports
along its layers, no import cycle among the product's modules, a simulator without Gymnasium, and an
environment package that does not depend on its policies.

The graph is built with ``ast`` from every ``.py`` file of ``frenzy_env``, ``baselines`` and ``agents``: every
``import`` and ``from ... import`` anywhere in a file counts (inside functions and ``if TYPE_CHECKING:``
blocks too, since a lazy import is still a dependency). ``from pkg.mod import x`` is an edge to ``pkg.mod.x``
when that is a module, else to ``pkg.mod``; relative imports are resolved; an import of a package is an edge
to its ``__init__``. Importing a submodule does not add an edge to its parent packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("frenzy_env", "baselines", "agents")
# frenzy_env's packages that run policies by name, so may import baselines and agents (never the other way): the
# CLI, the benchmark and the papers' reproduction
POLICY_LOADERS = ("frenzy_env.cli", "frenzy_env.benchmark", "frenzy_env.reproduce")
ARCHITECTURE_PAGE = ROOT / "docs" / "architecture.md"


def _modules() -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package's __init__)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            out[".".join(parts)] = (path, is_pkg)
    return out


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(edges between the product's modules, the external top-level packages each module imports)."""
    modules = _modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    external: dict[str, set[str]] = {m: set() for m in modules}
    for name, (path, is_pkg) in modules.items():
        package = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    full = ".".join(base + ([node.module] if node.module else []))
                else:
                    full = node.module or ""
                subs = [f"{full}.{alias.name}" for alias in node.names]
                targets = [sub if sub in modules else full for sub in subs]
            for target in targets:
                if target.split(".")[0] not in PACKAGES:
                    external[name].add(target.split(".")[0])
                    continue
                while target and target not in modules:  # `import pkg.mod.attr` style: the module holding it
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges, external


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _shortest_cycle(edges: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest import cycle through the first module of ``component`` (BFS inside it), as a path."""
    members, start = set(component), component[0]
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(edges[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, node, start]
                if nxt not in parent:
                    parent[nxt] = node
                    following.append(nxt)
        frontier = following
    return component


def _reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _page_modules() -> set[str]:
    """The module files the page's tables name (their first column), as repository paths."""
    found = set()
    for line in ARCHITECTURE_PAGE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells and cells[0].startswith("`") and cells[0].endswith(".py`"):
            found.add(cells[0].strip("`"))
    return found


def _page_layers() -> list[list[str]]:
    """The diagram under "## Import direction": one list of module or package names per layer, lowest first."""
    text = ARCHITECTURE_PAGE.read_text(encoding="utf-8")
    block = text.split("## Import direction", 1)[1].split("```", 2)[1]
    layers = []
    for line in block.strip().splitlines():
        names = [n.strip() for n in line.replace("->", "").split(",") if n.strip()]
        layers.append([n if n.split(".")[0] in PACKAGES else f"frenzy_env.{n}" for n in names])
    return layers


def _layer_of(module: str, layers: list[list[str]]) -> int | None:
    """The line of the most specific name that places ``module`` (the package ``frenzy_env`` itself, which
    imports the env to register its ids, sits on the env's line); None when no name does."""
    if module == "frenzy_env":
        module = "frenzy_env.env"
    best: tuple[int, int] | None = None
    for i, names in enumerate(layers):
        for name in names:
            if _under(module, (name,)) and (best is None or len(name) > best[1]):
                best = (i, len(name))
    return None if best is None else best[0]


def test_the_page_lists_every_module():
    on_disk = {str(path.relative_to(ROOT)) for pkg in PACKAGES for path in (ROOT / pkg).rglob("*.py")}
    listed = _page_modules()
    assert not on_disk - listed, f"modules missing from docs/architecture.md's tables: {sorted(on_disk - listed)}"
    assert not listed - on_disk, f"docs/architecture.md lists modules that do not exist: {sorted(listed - on_disk)}"


def test_imports_follow_the_pages_layers():
    """Every module is placed by the diagram, and no import goes from a line to a later one."""
    edges, _ = _graph()
    layers = _page_layers()
    assert len(layers) >= 5 and all(layers)
    # a package whose __init__ imports nothing (a docstring) needs no place
    unplaced = sorted(m for m in edges if _layer_of(m, layers) is None and edges[m])
    assert not unplaced, f"modules the diagram of docs/architecture.md does not place: {unplaced}"
    upwards = sorted(
        (m, dep)
        for m in edges
        for dep in edges[m]
        if (lm := _layer_of(m, layers)) is not None and (ld := _layer_of(dep, layers)) is not None and ld > lm
    )
    assert not upwards, f"imports from a layer to a later one (docs/architecture.md): {upwards}"


def test_a_misplaced_import_is_caught():
    """The layer check can fail: the simulator importing the env would be upwards."""
    layers = _page_layers()
    assert _layer_of("frenzy_env.env", layers) > _layer_of("frenzy_env.simulator.core", layers)
    assert _layer_of("frenzy_env.world.memory.planning", layers) > _layer_of("frenzy_env.world.memory.estimator",
                                                                            layers)
    assert _layer_of("agents.ppo.training", layers) > _layer_of("baselines.sia", layers)
    assert _layer_of("frenzy_env", layers) == _layer_of("frenzy_env.env", layers)


def test_the_graph_sees_every_kind_of_import():
    edges, external = _graph()
    assert "frenzy_env.simulator" in edges["frenzy_env.env"]  # a package: its __init__
    assert "frenzy_env.observation.encoder" in edges["frenzy_env.env"]  # from pkg.mod import x
    assert "frenzy_env.rendering" in edges["frenzy_env.env"]  # an import inside a function
    assert "frenzy_env.world.cluster" in edges["frenzy_env.rendering"]  # under TYPE_CHECKING
    assert "gymnasium" in external["frenzy_env.env"]


def test_no_import_cycles():
    edges, _ = _graph()
    cycles = _cycles(edges)
    report = "\n".join(
        f"  {len(c)} modules ({', '.join(c)}), e.g. " + " -> ".join(_shortest_cycle(edges, c)) for c in cycles
    )
    assert not cycles, f"import cycles (lazy and TYPE_CHECKING imports included):\n{report}"


def test_the_simulator_never_imports_gymnasium():
    edges, external = _graph()
    sim_modules = [m for m in edges if _under(m, ("frenzy_env.simulator",))]
    assert sim_modules
    offenders = {
        (m, dep) for m in sim_modules for dep in _reachable(edges, m) if "gymnasium" in external[dep]
    }
    assert not offenders, f"the simulator reaches gymnasium through (module, the module importing it): {offenders}"


def test_the_environment_never_imports_its_policies():
    """frenzy_env outside the policy loaders (the CLI, the benchmark and the papers' reproduction, which run
    policies by name) reaches neither baselines nor agents nor a loader, directly or through another module."""
    edges, _ = _graph()
    offenders = []
    for m in edges:
        if not _under(m, ("frenzy_env",)) or _under(m, POLICY_LOADERS):
            continue
        for dep in _reachable(edges, m):
            if _under(dep, ("baselines", "agents")) or _under(dep, POLICY_LOADERS):
                offenders.append((m, dep))
    assert not offenders, f"frenzy_env modules that reach a policy (or a policy loader): {sorted(offenders)}"


def test_policies_import_downwards():
    """baselines and agents build on the environment, and agents on baselines: baselines never import agents,
    and neither imports a policy loader (the CLI, the benchmark, the reproduction), which load them by name."""
    edges, _ = _graph()
    offenders = sorted(
        (m, dep)
        for m in edges
        if _under(m, ("baselines", "agents"))
        for dep in edges[m]
        if _under(dep, POLICY_LOADERS) or (_under(m, ("baselines",)) and _under(dep, ("agents",)))
    )
    assert not offenders, f"policies that import upwards: {offenders}"
