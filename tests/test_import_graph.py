"""The import graph of the project's packages has no circle, at any depth.

import-linter's contracts keep the layers; this test keeps the rest of the house straight: a
module never reaches itself through its imports (a circle is how two modules end up held
together by imports at the bottom of a file).
"""

from __future__ import annotations

import grimp

PACKAGES = ("airwave_dagster", "ops", "resources", "sensors")


def _cycle(graph: grimp.ImportGraph) -> list[str] | None:
    """One import circle of the graph (as a path that ends where it starts), or None."""
    modules = sorted(graph.modules)
    state: dict[str, int] = {}  # 1: on the current path, 2: fully explored
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if state.get(imported) == 1:
                return [*path[path.index(imported) :], imported]
            if imported not in state:
                found = visit(imported)
                if found:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in modules:
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)

    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    assert _cycle(graph) is None
    graph.add_import(importer="c", imported="a")

    assert _cycle(graph) == ["a", "b", "c", "a"]
