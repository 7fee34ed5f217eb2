"""Dependencies run one way (docs/architecture.md): a part imports only the parts below it.

    tracefix (instrumentation) < collector < analysis < replay < report < ui < demo

Every module of every part is read with `ast`, function-local imports and literal
`importlib.import_module("...")` targets included, so a cycle cannot hide in a function
body. Composition roots (the modules that wire the parts into one process) may import any
part; they are listed here and in docs/architecture.md. Inside a part, the same walk finds
import circles at run time (`import_circles`; an import under `if TYPE_CHECKING:` never runs,
so it closes none): no part may have one."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# folder -> import name, lowest part first (pyproject.toml's package-dir)
LAYERS = [("instrumentation", "tracefix"), ("collector", "tracefix.collector"), ("analysis", "tracefix.analysis"),
          ("replay", "tracefix.replay"), ("report", "tracefix.report"), ("ui", "tracefix.ui"), ("demo", "tracefix.demo")]

# the process wirings: they import upward on purpose (lazily, so `import tracefix` stays light)
COMPOSITION_ROOTS = {"tracefix.cli"}


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the part a `tracefix...` module belongs to (None: not ours)."""
    best = None
    for index, (_, package) in enumerate(LAYERS):
        if module == package or module.startswith(package + "."):
            best = index  # the longest matching package wins: tracefix.collector, not tracefix
    return best


def modules() -> list[tuple[str, Path]]:
    found = []
    for folder, package in LAYERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append((".".join([package, *parts]), path))
    return found


def type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:` (imports for annotations only)."""
    return {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for statement in node.body for inner in ast.walk(statement)}


def imported_modules(module: str, path: Path, known: set[str] | frozenset[str] = frozenset(),
                     run_time_only: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, wherever it sits. With
    `known` (module names), `from pkg import sub` where every name is a known module names
    only those modules, not `pkg` itself: the package's __init__ has run by then, so
    importing a sibling through it closes no circle. `run_time_only` leaves out the imports
    under `if TYPE_CHECKING:`."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped = type_checking_only(tree) if run_time_only else set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from tracefix import report` names a module too
            named = [f"{base}.{alias.name}" for alias in node.names]
            package_too = not known or any(name not in known for name in named)
            out += [(node.lineno, base)] * package_too + [(node.lineno, name) for name in named]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
    return out


def upward_imports() -> list[str]:
    found: dict[tuple[str, int], str] = {}
    for module, path in modules():
        own = layer_of(module)
        if module in COMPOSITION_ROOTS:
            continue
        for line, target in imported_modules(module, path):
            other = layer_of(target)
            if other is not None and other > own:
                where = (str(path.relative_to(ROOT)), line)
                found.setdefault(where, f"{where[0]}:{line}: {module} ({LAYERS[own][0]}) imports {target} "
                                        f"({LAYERS[other][0]}, a part above it)")
    return sorted(found.values())


def test_no_part_imports_a_part_above_it():
    assert upward_imports() == []


def import_circles(folder: str) -> list[list[str]]:
    """The import circles among one part's modules (function-local imports included): its
    strongly connected components of more than one module, each sorted."""
    ours = {module: path for module, path in modules() if LAYERS[layer_of(module)][0] == folder}
    graph = {m: sorted({t for _, t in imported_modules(m, p, set(ours), run_time_only=True) if t in ours and t != m})
             for m, p in ours.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in graph[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(circles)


@pytest.mark.parametrize("folder", [folder for folder, _ in LAYERS])
def test_no_import_circle_inside_a_part(folder):
    assert import_circles(folder) == []


def test_the_circle_check_sees_a_circle_closed_by_a_function_local_import(tmp_path, monkeypatch):
    """The same walk finds a circle that only closes inside a function body."""
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "a.py").write_text("from .b import thing\n")
    (folder / "b.py").write_text("thing = 1\n\ndef later():\n    from . import a\n")
    (folder / "c.py").write_text("from .a import thing\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert import_circles("demo") == [["tracefix.demo.a", "tracefix.demo.b"]]


def test_the_circle_check_reads_package_imports_and_type_only_imports_as_python_runs_them(tmp_path, monkeypatch):
    """`from . import sibling` goes to the sibling, not back through the package's __init__; a
    name the __init__ itself defines does go through it; an import under `if TYPE_CHECKING:`
    never runs."""
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "__init__.py").write_text("from .a import thing\nfrom .c import other\nVERSION = 1\n")
    (folder / "a.py").write_text("from . import b\nthing = b.x\n")
    (folder / "b.py").write_text("x = 1\n")
    (folder / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\nother = 2\n")
    (folder / "d.py").write_text("from .c import other\nclass D: ...\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert import_circles("demo") == []
    (folder / "b.py").write_text("from . import VERSION\nx = VERSION\n")
    assert import_circles("demo") == [["tracefix.demo", "tracefix.demo.a", "tracefix.demo.b"]]


def test_the_check_sees_function_local_and_relative_imports(tmp_path, monkeypatch):
    """The walk itself: an upward import hidden in a function body is found, and a relative
    import resolves to its absolute name."""
    folder = tmp_path / "collector"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "hidden.py").write_text("def f():\n    from tracefix.analysis.pipeline import analyze_session\n"
                                      "    from .store import Store\n")
    found = imported_modules("tracefix.collector.hidden", folder / "hidden.py")
    assert (2, "tracefix.analysis.pipeline") in found and (3, "tracefix.collector.store") in found
    assert layer_of("tracefix.analysis.pipeline") > layer_of("tracefix.collector.hidden")
    assert layer_of("tracefix.semconv") == 0 and layer_of("tracefix.report.render") == 4


@pytest.mark.parametrize("module", sorted(COMPOSITION_ROOTS))
def test_composition_roots_exist(module):
    folder, package = next((f, p) for f, p in reversed(LAYERS) if module.startswith(p))
    assert (ROOT / folder / (module[len(package) + 1:].replace(".", "/") + ".py")).is_file()


def test_the_serve_wiring_names_real_callables():
    """tracefix.cli hands `tracefix serve` its upper parts by name: the names must resolve."""
    from tracefix.analysis.diagnosis import run_diagnosis
    from tracefix.cli import serve_pipeline
    from tracefix.report.stored import render_stored_report

    pipeline = serve_pipeline()
    assert pipeline.diagnosis() is run_diagnosis and pipeline.report() is render_stored_report
