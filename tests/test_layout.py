"""The package's layout: imports run one way down the floors, with no circle, and each game's
folder stands alone.

Every module under ``yamblab/`` is parsed (imports inside functions count, and so does a module
named in a string to ``importlib.import_module`` or to the CLI's optional mounts; a Cython
module's Python imports are read from its source) and mapped to its floor by its folder. A module
may import its own floor and those below it, never one above; a new top-level folder must be
given a floor here first.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "yamblab"

#: The floors, bottom first: each builds only on itself and the floors below it.
FLOORS = [
    ("base", ("yamblab", "yamblab.errors", "yamblab.atomic", "yamblab.vocabulary")),   # the package itself,
    # errors, atomic writes, the words of every output
    ("games", ("yamblab.games",)),
    ("oracle", ("yamblab.oracle",)),
    ("rules_of_thumb", ("yamblab.rules_of_thumb",)),
    ("model", ("yamblab.model",)),
    ("search", ("yamblab.search",)),
    ("agents", ("yamblab.agents",)),
    ("learners", ("yamblab.learners",)),
    ("actors", ("yamblab.actors",)),
    ("training", ("yamblab.training",)),
    ("sweeps", ("yamblab.sweeps",)),
    ("service", ("yamblab.service",)),
    ("cli", ("yamblab.cli",)),
]

#: Folders with one sub-folder per game, none of which may import another game's.
PER_GAME = ("yamblab.games", "yamblab.oracle")
GAMES = ("yahtzee", "yamb")

_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(yamblab[\w.]*)\s+import\s+([\w, ]+)|import\s+(yamblab[\w.]*))", re.M)
_MODULE_NAME = re.compile(r"yamblab(?:\.\w+)+")


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    """Module name -> source file (Python and Cython)."""
    return {_name(p): p for ext in ("*.py", "*.pyx") for p in sorted(PACKAGE.rglob(ext))}


def _imports(name: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """(line, module) of every yamblab module that ``name`` imports, anywhere in its source."""
    src = path.read_text()
    out: list[tuple[int, str]] = []

    def add(line: int, base: str, names=()):
        hits = [f"{base}.{n}" for n in names if f"{base}.{n}" in known]
        out.extend((line, h) for h in hits or [base])

    if path.suffix == ".pyx":
        for m in _PYX_IMPORT.finditer(src):
            line = src.count("\n", 0, m.start()) + 1
            if m.group(1):
                add(line, m.group(1), [n.strip() for n in m.group(2).split(",")])
            else:
                add(line, m.group(3))
        return out
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "yamblab":
                    add(node.lineno, a.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            if base.split(".")[0] == "yamblab":
                add(node.lineno, base, [a.name for a in node.names])
        elif isinstance(node, ast.Call):           # importlib.import_module("yamblab.x"), _mount_optional(..., "yamblab.x")
            for arg in node.args:
                if (isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _MODULE_NAME.fullmatch(arg.value)
                        and ".".join(arg.value.split(".")[:2]) in known):     # not an MLflow tag like "yamblab.kind"
                    add(node.lineno, arg.value)
    return out


def _floor(module: str) -> int:
    best, level = -1, None
    for i, (_, prefixes) in enumerate(FLOORS):
        for p in prefixes:
            exact = p == "yamblab"
            if (module == p if exact else module == p or module.startswith(p + ".")) and len(p) > best:
                best, level = len(p), i
    if level is None:
        raise KeyError(module)
    return level


MODULES = _modules()
KNOWN = set(MODULES)
GRAPH = {name: _imports(name, path, KNOWN) for name, path in MODULES.items()}


def test_every_module_has_a_floor():
    lost = []
    for name in MODULES:
        try:
            _floor(name)
        except KeyError:
            lost.append(name)
    assert not lost, f"modules on no floor (give their folder one in FLOORS): {lost}"


def test_imports_run_one_way_down_the_floors():
    bad = []
    for name, imports in GRAPH.items():
        mine = _floor(name)
        for line, target in imports:
            theirs = _floor(target)
            if theirs > mine:
                bad.append(f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} imports {target} "
                           f"({FLOORS[theirs][0]} is above {FLOORS[mine][0]})")
    assert not bad, "imports up the floors:\n" + "\n".join(bad)


def test_no_import_circles():
    graph = {n: {t for _, t in imps if t in KNOWN and t != n} for n, imps in GRAPH.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:      # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not circles, f"modules that import each other (directly or round a circle): {circles}"


@pytest.mark.parametrize("folder", PER_GAME)
def test_a_game_folder_imports_no_other_game(folder):
    bad = []
    for name, imports in GRAPH.items():
        for game in GAMES:
            if not name.startswith(f"{folder}.{game}."):
                continue
            for line, target in imports:
                for other in GAMES:
                    if other != game and any(target == f"{f}.{other}" or target.startswith(f"{f}.{other}.")
                                             for f in PER_GAME):
                        bad.append(f"{name}:{line} imports {target}")
    assert not bad, "a game's folder importing another game's:\n" + "\n".join(bad)


def test_every_package_and_module_says_what_it_holds():
    bare = [str(p.relative_to(PACKAGE.parent)) for p in sorted(PACKAGE.rglob("*.py"))
            if ast.get_docstring(ast.parse(p.read_text())) is None]
    missing = [str(d.relative_to(PACKAGE.parent)) for d in sorted(PACKAGE.rglob("*"))
               if d.is_dir() and d.name not in ("__pycache__", "static") and any(d.glob("*.py*"))
               and not (d / "__init__.py").exists()]
    assert not bare, f"modules without a docstring: {bare}"
    assert not missing, f"folders of modules without an __init__.py: {missing}"


#: Above the search floor a game is reached through the Game protocol (``solved``,
#: ``rolls_left``…) and the per-floor registries (search/registry.py, oracle/registry.py), never
#: by its name; only the run config's schema and the command line spell a game's own options.
NAMED_GAMES_ALLOWED = ("yamblab.training.config", "yamblab.cli.", "yamblab.service.")
_GAME_BRANCH = re.compile(r"""(?:==|!=)\s*["'](?:yahtzee|yamb)["']|isinstance\([^)]*(?:Yamb|Yahtzee)\w*\)"""
                          r"""|\.oracle_column\b""")


def test_floors_above_search_do_not_branch_on_a_game_name():
    above = [name for name in MODULES if _floor(name) > _floor("yamblab.search")
             and not name.startswith(NAMED_GAMES_ALLOWED)]
    bad = [f"{name}:{i}: {line.strip()}" for name in above
           for i, line in enumerate(MODULES[name].read_text().splitlines(), 1) if _GAME_BRANCH.search(line)]
    assert above and not bad, ("a module above the search floor branching on a game's name (use the Game "
                               "protocol or a registry):\n" + "\n".join(bad))


#: The floors between the search floor and the service that reach a game only through the
#: registries (search/registry.py, oracle/registry.py, agents/base.py): no import of a game's own
#: modules. The service and the CLI may name a game's modules on purpose.
THROUGH_REGISTRIES = ("learners", "actors", "training", "sweeps")


def _game_modules() -> set[str]:
    """A game's own modules: its folders under games/ and oracle/, its searches and its agents
    (as the registries name them)."""
    from yamblab.games.protocol import GAMES as ENTRIES, PIECE_FLOORS

    own = {m for m in MODULES if any(m.startswith(f"{f}.{g}") for f in PER_GAME for g in GAMES)}
    return own | {getattr(e, k).partition(":")[0] for e in ENTRIES.values() for k in PIECE_FLOORS if getattr(e, k)}


def test_a_game_s_pieces_lie_on_the_floor_of_the_registry_that_imports_them():
    """A game's registration (games/protocol.py) names its pieces as strings; each floor's
    registry imports only its own floor's, so naming them there runs no import up."""
    from yamblab.games.protocol import GAMES as ENTRIES, PIECE_FLOORS, load_piece

    bad = []
    for game, entry in ENTRIES.items():
        for field, floor in PIECE_FLOORS.items():
            ref = getattr(entry, field)
            if ref is None:
                continue
            module = ref.partition(":")[0]
            if module not in MODULES or FLOORS[_floor(module)][0] != floor:
                bad.append(f"{game}.{field} = {ref} (read on the {floor} floor)")
            elif not load_piece(ref):
                bad.append(f"{game}.{field} = {ref} names nothing")
    assert ENTRIES and not bad, "pieces off their reader's floor:\n" + "\n".join(bad)


def test_floors_between_search_and_the_service_import_no_game_module():
    floors = {FLOORS.index(next(f for f in FLOORS if f[0] == name)) for name in THROUGH_REGISTRIES}
    games = _game_modules()
    bad = [f"{MODULES[name].relative_to(PACKAGE.parent)}:{line} imports {target}"
           for name, imports in GRAPH.items() if _floor(name) in floors
           for line, target in imports if target in games]
    assert games and not bad, ("a module between search/ and the service importing a game's own module (ask a "
                               "registry):\n" + "\n".join(bad))


def test_the_readme_is_a_guide_and_its_links_lead_somewhere():
    """At most 300 lines (results live in docs/results.md), and every relative link names a file
    that exists, and a heading of it where it gives an anchor (GitHub's slugs)."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text()
    assert len(text.splitlines()) <= 300, f"README.md has {len(text.splitlines())} lines"

    def slug(heading: str) -> str:
        return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")

    bad = []
    for target in re.findall(r"\]\(((?!https?:)[^)#\s]+)(?:#([^)\s]+))?\)", text):
        path, anchor = root / target[0], target[1]
        if not path.exists():
            bad.append(target[0])
        elif anchor and anchor not in {slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(), re.M)}:
            bad.append(f"{target[0]}#{anchor}")
    assert not bad, f"README links that lead nowhere: {bad}"


def test_modules_and_functions_stay_readable():
    """No module of the package over 500 lines (Cython kernels aside) and no function over 80:
    a reader sees a piece whole."""
    long_modules = [f"{p.relative_to(PACKAGE.parent)} ({n} lines)" for p in sorted(PACKAGE.rglob("*.py"))
                    if (n := len(p.read_text().splitlines())) > 500]
    long_functions = [f"{p.relative_to(PACKAGE.parent)}:{f.lineno} {f.name} ({f.end_lineno - f.lineno + 1} lines)"
                      for p in sorted(PACKAGE.rglob("*.py")) for f in ast.walk(ast.parse(p.read_text()))
                      if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.end_lineno - f.lineno + 1 > 80]
    assert not long_modules and not long_functions, ("split these:\n" + "\n".join(long_modules + long_functions))
