"""The package's layers are used in one direction, and no two modules import each other.

Layers, lowest first (README "The library's layers"; each subpackage's __init__ says the same):

    errors, utils          the bottom: error types with their fix, small helpers
    model/                 BERT itself: what notebooks 02-06 and 08-12 build
    family/                RoBERTa, ALBERT, GPT, DistilBERT, distillation losses
    data/                  text and files -> examples, the tokenizer
    pretrained             the shipped models by name
    interop                weights to and from Hugging Face transformers
    training/              the one loop, what serves it, the jobs pretrain / finetune / distill
    course/                pictures, exercises, slides, count baselines
    cli                    `bertedu ...`, on top of everything

A module may import its own layer or a lower one, never a higher one. The graph is read with
`ast` from every `import` statement in the source: module level, inside functions (a lazy
import hides a cycle from Python, but the two modules still depend on each other) and under
`if TYPE_CHECKING:` (an annotation-only import still means a reader needs the other module).
An import of a subpackage's module also depends on that subpackage's __init__.py, which
Python runs first.
"""

import ast
from pathlib import Path

import bertedu

PACKAGE_DIR = Path(bertedu.__file__).resolve().parent
ROOT = PACKAGE_DIR.name  # "bertedu"

LAYERS = ["errors utils", "model", "family", "data", "pretrained", "interop", "training", "course", "cli"]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names.split()}


def module_names() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the package (packages by __init__)."""
    names = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = (ROOT,) + path.relative_to(PACKAGE_DIR).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that `name` (at `path`) imports anywhere in its source."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: climb level - 1 packages above this module's package
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from .data import masking` imports the submodule masking; `from .x import f` only x
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target in known and target != name:
                found.add(target)
                found |= _packages_run_first(target, name, known)
    return found


def _packages_run_first(target: str, importer: str, known: set[str]) -> set[str]:
    """Importing bertedu.data.qa runs bertedu/data/__init__.py first: the packages above
    `target`, except those the importer lives in (already being imported)."""
    parts = target.split(".")
    above = {".".join(parts[:i]) for i in range(1, len(parts))}
    return {p for p in above if p in known and not (importer == p or importer.startswith(p + "."))}


def import_graph() -> dict[str, set[str]]:
    names = module_names()
    return {name: imported_modules(name, path, set(names)) for name, path in names.items()}


def layer(module: str) -> str:
    """bertedu.training.loop -> "training"; bertedu.cli -> "cli"; the package itself -> ""."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a lower layer into a higher one, as "importer -> imported"."""
    bad = []
    for importer, targets in sorted(graph.items()):
        if not layer(importer):  # bertedu/__init__.py re-exports the model: it sits above all
            continue
        for target in sorted(targets):
            if layer(target) and RANK[layer(target)] > RANK[layer(importer)]:
                bad.append(f"{importer} ({layer(importer)}) -> {target} ({layer(target)})")
    return bad


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle as a list of modules [a, b, ..., a], or [] when the graph has none."""
    state = {}  # absent: unvisited; 1: on the current path; 2: done
    path = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def test_graph_reader_sees_relative_absolute_and_function_level_imports():
    graph = import_graph()
    assert "bertedu.data.masking" in graph and "bertedu.data" in graph
    assert "bertedu.model.config" in graph["bertedu"]  # from .model.config import BertConfig
    assert "bertedu.data.masking" in graph["bertedu.data"]  # from .masking import ... (in a package)
    # a toy cycle hidden inside functions is found
    toy = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(toy) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def test_function_level_and_annotation_only_imports_are_read(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .config import BertConfig\n"
                      "def f():\n    from .loop import read_metrics\n    import bertedu.course.viz\n")
    known = {"bertedu.model.loop", "bertedu.course.viz", "bertedu.model.config", "bertedu.model.mod",
             "bertedu.course", "bertedu.model"}
    assert imported_modules("bertedu.model.mod", source, known) == {
        "bertedu.model.config", "bertedu.model.loop", "bertedu.course.viz", "bertedu.course"}


def test_importing_a_submodule_runs_its_package_first(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from .data.padding import pad_rows\n")
    known = {"bertedu", "bertedu.data", "bertedu.data.padding", "bertedu.mod"}
    assert imported_modules("bertedu.mod", source, known) == {"bertedu.data.padding", "bertedu.data"}
    inside = tmp_path / "qa.py"
    inside.write_text("from .padding import pad_rows\n")  # bertedu.data is already running
    assert imported_modules("bertedu.data.qa", inside, known | {"bertedu.data.qa"}) == {"bertedu.data.padding"}


def test_the_layer_rule_catches_an_upward_import():
    graph = {"bertedu.model.heads": {"bertedu.training.loop"}, "bertedu.training.loop": {"bertedu.model.heads"},
             "bertedu.course.viz": {"bertedu.training.curves"}, "bertedu": {"bertedu.cli"}}
    assert upward_imports(graph) == ["bertedu.model.heads (model) -> bertedu.training.loop (training)"]


def test_every_module_has_a_layer():
    missing = sorted({layer(m) for m in module_names() if layer(m) and layer(m) not in RANK})
    assert not missing, f"modules outside the layer list {LAYERS}: {missing}; add them to a layer"


def test_no_module_imports_a_higher_layer():
    bad = upward_imports(import_graph())
    assert not bad, "imports from a lower layer into a higher one:\n" + "\n".join(bad)


def test_no_import_cycle_in_the_package():
    cycle = find_cycle(import_graph())
    assert not cycle, ("import cycle (imports inside functions and under TYPE_CHECKING count): "
                       + " -> ".join(cycle))
