"""What a replay zygote (tracefix.replay.zygote) imports before it forks: tracefix's own
modules every child needs, and the libraries tracefix traces that the agent's code imports,
found by reading the entrypoint's module and the app's own modules it imports (never running
them), where the children will look for them; and the agent's own modules its operator named
(`app_preloads`, checked by tracefix.replay.app_preload before they are imported).
"""
from __future__ import annotations

import ast
import importlib.machinery
import sys
from pathlib import Path

# Besides the SDKs and frameworks tracefix patches (tracefix.instrumentor.hooked_modules):
# integration packages an agent imports instead, with the traced packages they bring along.
INTEGRATIONS = {"agents": ("openai",), "autogen": ("openai",), "langgraph": ("langchain_core",),
                "langchain_openai": ("langchain_core", "openai"), "langchain_anthropic": ("langchain_core", "anthropic")}
# what every replay child imports before the agent's code (tracefix.init() imports the
# redaction, which builds its secret scanner on import, and the OTLP exporter its HTTP library,
# requests, only when they are first used; its instrumentor the framework and SDK patches
# when it instruments)
ALWAYS = ("tracefix", "tracefix.configure", "tracefix.instrumentor", "tracefix.replay_mode", "tracefix.fingerprints",
          "tracefix.redaction", "tracefix.replay_signing", "tracefix.session_processor", "tracefix.genai_metrics",
          "tracefix.frameworks", "tracefix.other_instrumentors", "tracefix.replay.child", "opentelemetry.sdk.trace",
          "opentelemetry.exporter.otlp.proto.http.trace_exporter", "requests")


def _find_spec(name: str, locations: list[str] | None, search_path: list[str]):
    """The spec of `name` (its parent packages found already: `locations`), found without
    importing anything: the path search first (where the children will look), then the other
    finders on sys.meta_path, which is where an editable install maps its packages."""
    spec = importlib.machinery.PathFinder.find_spec(name, locations if locations is not None else search_path)
    for finder in sys.meta_path if spec is None else ():
        if finder is importlib.machinery.PathFinder or not hasattr(finder, "find_spec") \
                or finder in (importlib.machinery.BuiltinImporter, importlib.machinery.FrozenImporter):
            continue
        try:
            spec = finder.find_spec(name, locations)
        except (ImportError, AttributeError, ValueError):
            spec = None
        if spec is not None:
            break
    return spec


def _module_source(module: str, search_path: list[str]) -> Path | None:
    """The source file of `module`, found without importing it or its parent packages."""
    locations: list[str] | None = None
    spec = None
    parts = module.split(".")
    for i in range(len(parts)):
        spec = _find_spec(".".join(parts[:i + 1]), locations, search_path)
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations or [])
    origin = spec.origin if spec else None
    return Path(origin) if origin and origin.endswith(".py") else None


# how many of the app's own modules are read for the libraries they import
APP_MODULES_READ = 64


def _imports_of(module: str, search_path: list[str]) -> set[str]:
    """Every module named by an import statement of `module` and of the app's own modules it
    imports (its top-level package's; inside tracefix, as for the demo, its own package's), and
    for a package every module in it (a worker warms its zygote for an allowed package before
    it knows the entrypoint), read from their sources (never run), as absolute names."""
    top = module.split(".")[0]
    source = _module_source(module, search_path)
    package_given = source is not None and source.name == "__init__.py"
    # tracefix's other parts are preloaded or hooked: inside it, only the module's own package
    own = top if top != "tracefix" else module if package_given else module.rpartition(".")[0]
    seen, queue, imported = set(), [module], set()
    if package_given:
        queue += sorted(f"{module}.{path.stem}" for path in source.parent.glob("*.py") if path.stem != "__init__")
    while queue and len(seen) < APP_MODULES_READ:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        source = _module_source(name, search_path)
        if source is None:
            continue
        try:
            tree = ast.parse(source.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        package = name if source.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's own package
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names] if base else []
            for found in names:
                imported.add(found)
                if (found == own or found.startswith(own + ".")) and found not in seen:
                    queue.append(found)  # the app's own module: read what it imports too
    return imported


def preloads(entrypoint: str, search_path: list[str]) -> list[str]:
    """`ALWAYS`, then the traced libraries that the entrypoint's module and the app's modules it
    imports import (read from their sources) with the modules tracefix patches in them and its
    patching modules."""
    imported = {name.split(".")[0] for name in _imports_of(entrypoint.split(":")[0], search_path)}
    from tracefix.instrumentor import hooked_modules

    hooks = hooked_modules()
    traced = {module.split(".")[0] for module, _ in hooks}
    libraries = {name for name in imported if name in traced or name in INTEGRATIONS}
    libraries |= {dep for name in libraries for dep in INTEGRATIONS.get(name, ())}
    out = list(ALWAYS) + sorted(libraries)
    for module, patcher in hooks:
        if module.split(".")[0] in libraries:
            out += [module, patcher]
    return list(dict.fromkeys(out))


def app_preloads(named: list[str] | tuple[str, ...], allowed_modules: list[str] | tuple[str, ...]) -> list[str]:
    """The agent's modules an operator named for the zygotes to import (``--preload-module``):
    each must lie within the modules allowed to run (``--allow-module``), or EntrypointRefused."""
    from tracefix.entrypoints import EntrypointRefused, check

    out = []
    for module in named:
        try:
            check(f"{module}:preload", allowed_modules)
        except EntrypointRefused:
            raise EntrypointRefused(f"{module} lies outside the modules allowed to run here "
                                    f"({', '.join(allowed_modules) or 'none'}): a zygote preloads only those") from None
        out.append(module)
    return out
