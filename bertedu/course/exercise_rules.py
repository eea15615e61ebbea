"""Exercises that cannot be bypassed: four rules, read from a notebook's cells with `ast`.

An exercise (bertedu.course.exercises: a solution cell and the check cells after it) teaches only
if the learner has to do it. Each rule below returns the ways a notebook lets a learner skip that
work, one `Violation` each, with the exercise, the cell and the fix:

- `reference_in_namespace` (a): the check compares the answer with a bertedu function, or a
  function defined in a cell, that an exercise cell above the solution (the set-up cell, an
  earlier exercise) already put in the learner's namespace, so ``answer = reference(...)``
  passes. Also: the check compares ``your_function(obj, x)`` with ``obj(x)`` (the object handed
  to the learner computes the answer) and does not run it under ``forbid_calls(obj)``.
- `reveals_before_check` (b): a check cell prints a computed value before its last comparison,
  so running the check shows the truth to a learner who has not yet got it right.
- `unchecked_predictions` (c): an exercise that asks to predict has no check that reads the
  learner's predicted value, the check reassigns it first, or the "prediction" is computed
  with the very tools the check uses.
- `answer_above` (d): a piece of code in the prose above the solution (an inline code span)
  that is the solution's own code, or a predicted number that an output above already prints.

The namespace a rule reads is the one the exercises are written for: the exercise cells above
the solution (they run on their own after a kernel restart, see tests/test_exercises.py). What a
learner also holds after running the lesson's cells above is left out: the exercises are about
the lesson's tools, and a predict exercise can always be computed with them.

    python -m bertedu.course.exercise_rules notebooks/      # every violation, one a line; exit 1 if any

The fixes use two helpers of bertedu.course.exercises: `reference("module:name")` fetches the
reference inside the check without binding a name, and `forbid_calls(obj)` makes calling the
handed object raise while the learner's function runs. Introduced for issue 57 item 3; tested
in tests/test_exercise_rules.py.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import io
import json
import math
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

from bertedu.course import exercises as ex
from bertedu.course.lessons import solution_code

PROJECT = "bertedu"
HARMLESS = ("bertedu.course.exercises",)  # the check helpers themselves
# methods that compute on data (a tensor, a list, a string): the value flows through them
DATA_METHODS = set("""tolist item float double long int bool half flatten view reshape squeeze unsqueeze t
transpose permute detach clone cpu numpy nonzero sum mean std var max min values indices argmax argmin abs exp
log sqrt norm softmax log_softmax cumsum count index split strip lower upper sort argsort topk eq ne gt lt ge le
all any contiguous expand repeat gather masked_fill where round keys items get join startswith endswith""".split())
ARITHMETIC = set(dir(math)) | {"round", "int", "float", "sum", "len", "abs", "min", "max", "pow", "list", "tuple",
                                "dict", "set", "bool", "range", "sorted", "str", "Fraction"}
_ASKS_TO_PREDICT = re.compile(r"before (?:you run|running|computing|any code)|without running|then predict|"
                              r"predict:|\bguess\b", re.I)


@dataclass(frozen=True)
class Violation:
    notebook: str
    exercise: str  # "ex11-1"
    cell: int  # the cell to change
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.notebook} {self.exercise} c{self.cell} [{self.rule}]: {self.message}"


@dataclass(frozen=True)
class Binding:
    name: str
    cell: int
    kind: str  # "import" (target: what it names), "def", "value"
    target: str = ""


# -- reading cells ------------------------------------------------------------------------

def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def parse(source: str) -> ast.Module:
    """A code cell as a module; IPython magics and shell lines become blank lines."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _dotted(node: ast.AST) -> tuple[str, list[str]] | None:
    """`a.b.c` -> ("a", ["b", "c"]); None when the chain does not start at a name."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    return (node.id, chain[::-1]) if isinstance(node, ast.Name) else None


def _reference_target(node: ast.AST) -> str | None:
    """`reference("pkg.mod:name")` -> "pkg.mod.name" (the helper of bertedu.course.exercises)."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reference"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value.replace(":", ".")
    return None


def _store_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def bindings(tree: ast.Module, cell: int) -> list[Binding | tuple[str, None]]:
    """The names a cell binds at module level, in order; ("name", None) for a `del name`."""
    found: list = []

    def visit(statements):
        for node in statements:
            if isinstance(node, ast.Import):
                for a in node.names:
                    found.append(Binding(a.asname or a.name.split(".")[0], cell, "import",
                                         a.name if a.asname else a.name.split(".")[0]))
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    found.append(Binding(a.asname or a.name, cell, "import", f"{node.module}.{a.name}"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append(Binding(node.name, cell, "def"))
            elif isinstance(node, ast.Delete):
                found.extend((name, None) for t in node.targets for name in _store_names_del(t))
            else:
                value = getattr(node, "value", None)
                target = _reference_target(value) if value is not None else None
                for t in _targets(node):
                    for name in _store_names(t):
                        found.append(Binding(name, cell, "import" if target else "value", target or ""))
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, []))

    visit(tree.body)
    return found


def _store_names_del(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in node.items if i.optional_vars is not None]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [ast.Name(node.name, ast.Store())]
    return []


def namespace_before(nb, index: int) -> dict[str, Binding]:
    """What the exercise cells above cell `index` leave bound, name -> its last binding."""
    names: dict[str, Binding] = {}
    for i, cell in enumerate(nb["cells"][:index]):
        if cell["cell_type"] != "code" or not ex.is_exercise_cell(cell):
            continue
        for b in bindings(parse(_source(cell)), i):
            if isinstance(b, Binding):
                names[b.name] = b
            else:
                names.pop(b[0], None)
    return names


_CANONICAL: dict[str, str] = {}


def canonical(target: str) -> str:
    """`bertedu.data.mask_tokens` -> `bertedu.data.masking.mask_tokens`: where the object is defined
    (imported to find out; only bertedu's own modules are imported). Other targets stay as they are."""
    if not target.startswith(PROJECT + ".") or target in _CANONICAL:
        return _CANONICAL.get(target, target)
    import importlib

    module, _, name = target.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), name)
        where = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        _CANONICAL[target] = f"{where[0]}.{where[1]}" if all(where) else target
    except (ImportError, AttributeError):
        try:
            importlib.import_module(target)  # a module
            _CANONICAL[target] = target
        except ImportError:
            _CANONICAL[target] = target
    return _CANONICAL[target]


def is_project(target: str) -> bool:
    return (target == PROJECT or target.startswith(PROJECT + ".")) and not target.startswith(HARMLESS)


# -- one exercise, read -------------------------------------------------------------------

@dataclass
class Context:
    """One exercise of a notebook with what the rules need to know about it."""

    nb: dict
    name: str  # "ex11-1"
    solution: int
    checks: list[int]
    statement: str  # the markdown between the previous exercise and the solution
    kind: str  # metadata bertedu.kind ("predict", "derive", ...)
    learner: set[str]  # the names the solution cell binds
    predicted: set[str]  # the values bound by top-level statements between the solution markers
    namespace: dict[str, Binding]  # what the exercise cells above leave bound


def _marked_lines(source: str) -> set[int]:
    inside, marked = False, set()
    for number, line in enumerate(source.split("\n"), 1):
        if line.strip() in (ex.BEGIN, ex.END):
            inside = line.strip() == ex.BEGIN
        elif inside:
            marked.add(number)
    return marked


def _solution_statements(source: str, overlapping: bool = False) -> list[ast.stmt]:
    """Top-level statements of a solution cell that lie between its solution markers (or, with
    `overlapping`, that hold marked lines: a `def` whose body is the solution)."""
    marked = _marked_lines(source)
    return [s for s in parse(source).body
            if (marked & set(range(s.lineno, s.end_lineno + 1)) if overlapping else s.lineno in marked)]


def contexts(nb) -> list[Context]:
    cells = nb["cells"]
    start = next((i for i, c in enumerate(cells) if ex.is_exercise_cell(c)), len(cells))
    found = []
    for e in ex.exercises(nb):
        cell = cells[e.solution]
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", f"cell{e.solution}")
        statement = "\n".join(_source(c) for c in cells[start:e.solution] if c["cell_type"] == "markdown")
        source = _source(cell)
        answer = ast.Module(body=_solution_statements(source, overlapping=True), type_ignores=[])
        learner = {b.name for b in bindings(answer, e.solution) if isinstance(b, Binding) and b.kind != "import"}
        predicted = {name for s in _solution_statements(source) if not isinstance(s, (ast.FunctionDef, ast.ClassDef))
                     for t in _targets(s) for name in _store_names(t)}
        found.append(Context(nb, grade_id.removesuffix("-solution"), e.solution, e.checks, statement,
                             cell.get("metadata", {}).get("bertedu", {}).get("kind", ""), learner, predicted,
                             namespace_before(nb, e.solution)))
        start = (e.checks[-1] if e.checks else e.solution) + 1
    return found


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _is_comparison(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        return name.startswith("check_") and name not in ("check_defined", "check_type")
    return False


def _operands(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assert):
        test = node.test
        if isinstance(test, ast.UnaryOp):
            test = test.operand
        if isinstance(test, ast.Compare):
            return [test.left, *test.comparators]
        return list(test.args) if isinstance(test, ast.Call) else [test]
    args = list(node.args[:2]) + [k.value for k in node.keywords if k.arg in ("actual", "expected", "reference")]
    return args


def _in_order(tree: ast.AST) -> list[ast.AST]:
    nodes = [n for n in ast.walk(tree) if hasattr(n, "lineno")]
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


@dataclass
class CheckFlow:
    """A check cell's data flow: which local names carry the learner's answer, what the others hold."""

    tree: ast.Module
    values: dict[str, list[ast.expr]]  # name -> expressions assigned to it that do not carry the answer
    carried: dict[str, list[ast.expr]]  # name -> expressions assigned to it that carry the answer
    defs: dict[str, ast.FunctionDef]
    comparisons: list[tuple[ast.AST, set[str]]]  # each comparison and the names carrying the answer there
    reassigned: set[str]  # the learner's names the check cell assigns anew


def check_flow(source: str, learner: set[str]) -> CheckFlow:
    tree = parse(source)
    flow = CheckFlow(tree, {}, {}, {}, [], set())
    carrying = set(learner)
    for node in _in_order(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            flow.defs[node.name] = node
        value = {ast.Assign: "value", ast.AnnAssign: "value", ast.AugAssign: "value", ast.NamedExpr: "value",
                 ast.For: "iter", ast.comprehension: "iter"}.get(type(node))
        exprs = [getattr(node, value)] if value and getattr(node, value, None) is not None else []
        if isinstance(node, ast.With):
            exprs = [i.context_expr for i in node.items if i.optional_vars is not None]
        targets = [node.target] if isinstance(node, (ast.comprehension, ast.NamedExpr)) else _targets(node)
        for expr in exprs:
            carries = bool(_names(expr) & carrying) or (isinstance(node, ast.AugAssign) and
                                                        bool(_store_names(node.target) and
                                                             set(_store_names(node.target)) & carrying))
            for name in (n for t in targets for n in _store_names(t)):
                (flow.carried if carries else flow.values).setdefault(name, []).append(expr)
                if carries:
                    carrying.add(name)
                elif name in carrying:
                    carrying.discard(name)
                    if name in learner:
                        flow.reassigned.add(name)
        if _is_comparison(node):
            flow.comparisons.append((node, set(carrying)))
    return flow


# -- (a) the reference in the learner's namespace -------------------------------------------

def _is_class_path(root: str, chain: list[str]) -> bool:
    """`BertConfig.base`, `AlbertModel`: a class or its constructor builds a tool, not the answer."""
    return any(part[:1].isupper() for part in [root, *chain])


@dataclass(frozen=True)
class Producer:
    """A call whose result the check compares with: the reference."""

    call: str  # the call as written, e.g. "mean_pool(...)"
    target: str  # what it calls: "bertedu.model.tasks.mean_pool", or "def lib_mask" for a function of a cell
    origin: Binding | None  # its binding in the namespace above the solution, if it has one


def _call_text(node: ast.Call) -> str:
    return ast.unparse(node.func) + "(...)"


def producers(flow: CheckFlow, expressions: list[ast.expr], namespace: dict[str, Binding]) -> list[Producer]:
    """The calls to bertedu functions, or to functions of a cell above, that compute `expressions`.

    The walk follows the value through the check cell's own names, arithmetic, torch and Python
    built-ins and data methods (`.tolist()`, `.sum()`); it stops at the first call of a bertedu
    function or of a function defined above (that is the reference), at a class (a tool being
    built) and at an object's own methods (`tok.encode(text)`: the object is a tool, and only
    the method's arguments are followed).
    """
    local_imports = {b.name: b for b in bindings(flow.tree, -1) if isinstance(b, Binding) and b.kind == "import"}
    found: list[Producer] = []
    seen: set[int] = set()
    todo = list(expressions)

    def follow(*nodes):
        todo.extend(n for n in nodes if n is not None)

    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ast.Name):
            follow(*flow.values.get(node.id, []))
            continue
        if not isinstance(node, ast.Call):
            follow(*ast.iter_child_nodes(node))
            continue
        arguments = [*node.args, *(k.value for k in node.keywords)]
        target = _reference_target(node.func)
        if target:
            found.append(Producer(_call_text(node), target, None))
            continue
        dotted = _dotted(node.func)
        if dotted is None:
            follow(node.func, *arguments)
            continue
        root, chain = dotted
        binding = local_imports.get(root) or (None if root in flow.values or root in flow.defs else namespace.get(root))
        above = namespace.get(root)
        if above is not None and above.kind == "def" and not chain:  # even if the check defines it again
            found.append(Producer(_call_text(node), f"def {root}", above))
        elif root in flow.defs and not chain:
            follow(*(r.value for r in ast.walk(flow.defs[root]) if isinstance(r, ast.Return)), *arguments)
        elif binding is not None and binding.kind == "import":
            qualified = ".".join([binding.target, *chain])
            if _is_class_path(root, chain):
                continue
            if is_project(qualified):
                found.append(Producer(_call_text(node), qualified, binding if binding.cell >= 0 else None))
            else:
                follow(*arguments)
        elif _is_class_path(root, chain):
            continue
        elif chain and (chain[-1] in DATA_METHODS or not isinstance(node.func.value, ast.Name)):
            follow(node.func.value, *arguments)  # a method of data (a result, not a tool held in a name)
        else:  # an object called, or one of its methods: follow the arguments only
            follow(*arguments)
    return found


def _reachable(target: str, namespace: dict[str, Binding]) -> Binding | None:
    """The binding above that gives the learner `target` (the same object, or a module holding it)."""
    wanted = canonical(target)
    for b in namespace.values():
        if b.kind != "import":
            continue
        held = canonical(b.target)
        if held == wanted or wanted.startswith(held + ".") or target.startswith(b.target + "."):
            return b
    return None


def _where(b: Binding, nb) -> str:
    grade_id = nb["cells"][b.cell].get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
    what = "the set-up cell" if grade_id.endswith("setup") else "an exercise cell above"
    return f"{what} c{b.cell} ({grade_id})" if grade_id else f"cell c{b.cell}"


def _reference_sides(flow: CheckFlow) -> list[tuple[ast.AST, list[ast.expr], list[ast.expr]]]:
    """Each comparison with its operands split: (node, the learner's side, the reference side)."""
    split = []
    for node, carrying in flow.comparisons:
        operands = _operands(node)
        mine = [o for o in operands if _names(o) & carrying]
        if mine and len(mine) < len(operands):
            split.append((node, mine, [o for o in operands if not _names(o) & carrying]))
    return split


def reference_in_namespace(nb) -> list[Violation]:
    """Rule (a): no check compares the answer with a reference the learner's namespace already holds."""
    found = []
    for c in contexts(nb):
        reported = set()
        for check in c.checks:
            flow = check_flow(_source(nb["cells"][check]), c.learner)
            for node, mine, theirs in _reference_sides(flow):
                for p in producers(flow, theirs, c.namespace):
                    origin = p.origin or (None if p.target.startswith("def ") else _reachable(p.target, c.namespace))
                    if origin is None or (p.target, origin.cell) in reported:
                        continue
                    reported.add((p.target, origin.cell))
                    found.append(Violation("", c.name, origin.cell, "reference-in-namespace", _reference_message(
                        p, origin, check, nb)))
                found.extend(_handed_objects(c, check, flow, node, mine, theirs))
    return found


def _reference_message(p: Producer, origin: Binding, check: int, nb) -> str:
    if p.target.startswith("def "):
        return (f"check c{check} compares the answer with {p.call}, which {_where(origin, nb)} defines, so the "
                f"learner can call it. Fix: compute the reference inside the check (define it there with a leading "
                f"underscore, or call the library through reference(\"module:name\")), not in a cell above")
    module, _, name = p.target.rpartition(".")
    return (f"check c{check} compares the answer with {p.call}, which {_where(origin, nb)} binds as "
            f"`{origin.name}`, so the learner can call it. Fix: remove that import from c{origin.cell} and write "
            f"reference(\"{module}:{name}\")(...) in the check (bertedu.course.exercises.reference)")


def _expand(flow: CheckFlow, expressions: list[ast.expr], table: dict[str, list[ast.expr]]) -> list[ast.AST]:
    """Every node of `expressions`, and of what the check cell assigned to the names they use (by `table`)."""
    nodes, todo, seen = [], list(expressions), set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for n in ast.walk(node):
            nodes.append(n)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                todo.extend(table.get(n.id, []))
    return nodes


def _forbidden(tree: ast.Module) -> dict[int, set[str]]:
    """id(call) -> the names `forbid_calls(name, ...)` guards where that call runs."""
    guarded: dict[int, set[str]] = {}
    for w in (n for n in ast.walk(tree) if isinstance(n, (ast.With, ast.AsyncWith))):
        names = {i.context_expr.args[0].id for i in w.items
                 if isinstance(i.context_expr, ast.Call) and isinstance(i.context_expr.func, (ast.Name, ast.Attribute))
                 and (getattr(i.context_expr.func, "id", None) or i.context_expr.func.attr) == "forbid_calls"
                 and i.context_expr.args and isinstance(i.context_expr.args[0], ast.Name)}
        for statement in w.body:
            for n in ast.walk(statement):
                guarded.setdefault(id(n), set()).update(names)
    return guarded


def _outermost_calls(flow: CheckFlow, expressions: list[ast.expr]) -> list[ast.Call]:
    """The calls that produce `expressions` at the top: through indexing, the check cell's own names,
    data methods (`.tolist()`) and conversions (`float(...)`), not into any call's arguments."""
    found, todo, seen = [], list(expressions), set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ast.Subscript):
            todo.append(node.value)
        elif isinstance(node, ast.Name):
            todo.extend(flow.values.get(node.id, []))
        elif isinstance(node, ast.Call):
            dotted = _dotted(node.func)
            if dotted and not dotted[1] and dotted[0] in ("float", "int", "list", "tuple", "bool") and node.args:
                todo.append(node.args[0])
            elif isinstance(node.func, ast.Attribute) and node.func.attr in DATA_METHODS:
                todo.append(node.func.value)
            else:
                found.append(node)
    return found


def _handed_objects(c: Context, check: int, flow: CheckFlow, node, mine, theirs) -> list[Violation]:
    """Rule (a), second form: `your_function(obj, x)` compared with `obj(x)` or `obj.method(x)`."""
    guarded = _forbidden(flow.tree)
    calls = [n for n in _expand(flow, mine, flow.carried)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in c.learner]
    references = _outermost_calls(flow, theirs)
    found = []
    for call in calls:
        given = [ast.unparse(a) for a in call.args]
        for obj in (a for a in call.args if isinstance(a, ast.Name) and a.id not in c.learner):
            if obj.id in guarded.get(id(call), set()):
                continue
            rest = set(given) - {obj.id}
            for ref in references:
                dotted = _dotted(ref.func)
                inputs = {ast.unparse(a) for a in [*ref.args, *(k.value for k in ref.keywords)]
                          if not isinstance(a, ast.Constant) or a in ref.args}
                if dotted and dotted[0] == obj.id and len(dotted[1]) <= 1 and ref.args and inputs <= rest:
                    found.append(Violation("", c.name, check, "reference-in-namespace", (
                        f"check c{check} compares {ast.unparse(call)} with {ast.unparse(ref)}: the object the "
                        f"learner's function is given computes the answer, so `return {ast.unparse(ref)}` passes. "
                        f"Fix: call the learner's function inside `with forbid_calls({obj.id}"
                        f"{', ' + repr(dotted[1][0]) if dotted[1] else ''}):` (bertedu.course.exercises)")))
                    break
    return found


# -- (b) a check reveals the truth before it compares ---------------------------------------

def _contains_comparison(node: ast.AST) -> bool:
    return any(_is_comparison(n) for n in ast.walk(node))


def _is_reveal(node: ast.AST, quiet: set[str]) -> bool:
    """A `print(...)` or `display(...)` of something computed (not only text, not only the answer)."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id in ("print", "display")):
        return False
    return bool(_names(node.value) - quiet)


def _early_reveals(block: list[ast.stmt], later: bool, quiet: set[str]) -> list[ast.stmt]:
    """The reveals in `block` that run before a comparison (one after them, here or further out)."""
    found = []
    for i, statement in enumerate(block):
        after = later or any(_contains_comparison(s) for s in block[i + 1:])
        if _is_reveal(statement, quiet) and after:
            found.append(statement)
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(statement, field, None)
            if isinstance(inner, list) and not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.extend(_early_reveals(inner, after, quiet))
    return found


def reveals_before_check(nb) -> list[Violation]:
    """Rule (b): in a check cell, nothing computed is printed or displayed before the last comparison."""
    found = []
    for c in contexts(nb):
        for check in c.checks:
            flow = check_flow(_source(nb["cells"][check]), c.learner)
            quiet = c.learner | set(flow.carried) | set(dir(builtins))
            for statement in _early_reveals(flow.tree.body, False, quiet):
                found.append(Violation("", c.name, check, "reveal-before-check", (
                    f"check c{check} line {statement.lineno} prints `{ast.unparse(statement)[:70]}` before it "
                    "compares, so a learner who runs the check sees the truth before getting it right. Fix: move "
                    "the print below the last check_* call or assert of the cell")))
    return found


# -- (c) a prediction that is never checked, overwritten, or computed -----------------------

def asks_to_predict(c: Context) -> bool:
    """The exercise is a prediction: its kind says so, or its statement asks for an answer before running."""
    return c.kind == "predict" or bool(_ASKS_TO_PREDICT.search(c.statement))


def _read_predictions(c: Context, nb) -> tuple[set[str], set[str]]:
    """The learner's predicted values that some check compares, and those a check cell assigns anew."""
    read, reassigned = set(), set()
    for check in c.checks:
        flow = check_flow(_source(nb["cells"][check]), c.learner)
        reassigned |= flow.reassigned & c.predicted
        for node, carrying in flow.comparisons:
            mine = [o for o in _operands(node) if _names(o) & carrying]
            read |= {n.id for n in _expand(flow, mine, flow.carried) if isinstance(n, ast.Name)} & c.predicted
    return read, reassigned


def _computed_with(c: Context, nb) -> list[str]:
    """The calls, other than arithmetic, that compute the prediction between the solution markers."""
    calls = []
    for statement in _solution_statements(_source(nb["cells"][c.solution])):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for n in ast.walk(statement):
            dotted = _dotted(n.func) if isinstance(n, ast.Call) else None
            if dotted and not (dotted[0] in ARITHMETIC and not dotted[1]) and dotted[0] != "math":
                calls.append(ast.unparse(n.func))
    return calls


def unchecked_predictions(nb) -> list[Violation]:
    """Rule (c): an exercise that asks to predict compares the learner's own predicted value, unchanged,
    and that value is written, not computed with the check's tools."""
    found = []
    for c in (c for c in contexts(nb) if asks_to_predict(c)):
        read, reassigned = _read_predictions(c, nb)
        computed = _computed_with(c, nb)
        if reassigned:
            found.append(Violation("", c.name, (c.checks or [c.solution])[0], "prediction-unchecked", (
                f"the check assigns {', '.join(sorted(reassigned))} anew before comparing, overwriting the "
                "learner's prediction. Fix: give the check's own values other names")))
        elif not read:
            found.append(Violation("", c.name, c.solution, "prediction-unchecked", (
                "the exercise asks to predict, but no check compares a value the learner writes in the solution "
                "(e.g. `predicted_share = ...`). Fix: add the predicted value to the solution and compare it in "
                "the check, or do not ask for a prediction")))
        if computed:
            found.append(Violation("", c.name, c.solution, "prediction-unchecked", (
                f"the prediction is computed with {', '.join(sorted(set(computed)))}: that is the check's "
                "computation, not a prediction. Fix: ask for a number written before running anything (a literal "
                "or arithmetic on the given numbers), and leave the computation to the check")))
    return found


# -- (d) the answer stands above the solution ------------------------------------------------

MIN_SPAN_TOKENS = 6  # a code span this long in the prose, found in the solution, gives the solution away
_SPAN = re.compile(r"`([^`\n]+)`")


def code_tokens(code: str) -> list[str]:
    """Python tokens of `code`, comments and line breaks left out ([] if it does not tokenize)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def _contains(tokens: list[str], part: list[str]) -> bool:
    return any(tokens[i:i + len(part)] == part for i in range(len(tokens) - len(part) + 1))


def _selects(span: str) -> bool:
    """The span is an expression that indexes or tests (`hidden[labels != -100]`): the work of an
    exercise, where a call with names (`layer.attention(x, mask)`) only names the tools."""
    try:
        tree = ast.parse(span, mode="eval")
    except SyntaxError:
        return False
    return any(isinstance(n, (ast.Subscript, ast.Compare)) for n in ast.walk(tree))


def _outputs(cell) -> str:
    texts = []
    for out in cell.get("outputs", []):
        text = out.get("text") or out.get("data", {}).get("text/plain", "")
        texts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(texts)


def _texts(cells) -> set[str]:
    """The texts (string constants of two words or more, 8 characters at least) in these cells' code."""
    found = set()
    for cell in cells:
        tree = parse(_source(cell))
        shown = {id(n) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print")
            for n in ast.walk(node)}  # what a cell prints about its result is not its input
        found |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and len(n.value) >= 8 and " " in n.value.strip() and id(n) not in shown}
    return found


def _worked_above(c: Context, nb) -> list[int]:
    """The code cells above the exercises that use one of the exercise's own input texts."""
    cells = nb["cells"]
    inputs = _texts([cells[i] for i in [c.solution, *c.checks]])
    first = next(i for i, cell in enumerate(cells) if ex.is_exercise_cell(cell))
    return [i for i in range(first) if cells[i]["cell_type"] == "code" and inputs & _texts([cells[i]])]


def _shown_forms(value) -> list[str]:
    """How a predicted number would be printed, if it is one a reader could not guess by chance."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return []
    if isinstance(value, int) or float(value).is_integer():
        return [f"{int(value):,}", str(int(value))] if abs(value) >= 1000 else []
    digits = f"{abs(value):.3g}".replace(".", "").lstrip("0")
    return [f"{value:.3f}", f"{value:.4f}"] if len(digits.rstrip("0")) >= 3 else []


def _arithmetic(statement: ast.stmt) -> bool:
    """An assignment of numbers, containers of numbers and `math` to names: safe to evaluate."""
    safe = (ast.Assign, ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.List,
            ast.Tuple, ast.Load, ast.Store, ast.Call, ast.Attribute)
    nodes = list(ast.walk(statement))
    return (isinstance(statement, ast.Assign) and all(isinstance(n, safe) for n in nodes)
            and all(isinstance(n.value, ast.Name) and n.value.id == "math" for n in nodes if isinstance(n, ast.Attribute)))


def _predicted_values(c: Context, nb) -> dict:
    """The solution's predicted values, when they are arithmetic on numbers (evaluated with `math` only)."""
    allowed = ("round", "abs", "min", "max", "sum", "len", "int", "float")
    namespace: dict = {"math": math, "__builtins__": {k: getattr(builtins, k) for k in allowed}}
    for statement in _solution_statements(_source(nb["cells"][c.solution])):
        if not _arithmetic(statement):
            continue
        try:
            exec(compile(ast.Module(body=[statement], type_ignores=[]), "<prediction>", "exec"), namespace)
        except Exception:  # anything but arithmetic: not a value this rule can read
            continue
    return {name: namespace[name] for name in c.predicted if name in namespace}


def answer_above(nb) -> list[Violation]:
    """Rule (d): the prose above a solution shows none of its code, and no output above prints a predicted number."""
    found = []
    for c in contexts(nb):
        solution = code_tokens(solution_code(_source(nb["cells"][c.solution])))
        for span in dict.fromkeys(_SPAN.findall(c.statement)):
            tokens = code_tokens(span)
            if len(tokens) >= MIN_SPAN_TOKENS and _selects(span) and _contains(solution, tokens):
                found.append(Violation("", c.name, c.solution, "answer-above", (
                    f"the statement shows `{span}`, which is the solution's own code. Fix: describe what to "
                    "compute, not the expression that computes it")))
        if not asks_to_predict(c):
            continue
        worked = {i: _outputs(nb["cells"][i]) for i in _worked_above(c, nb)}
        for name, value in sorted(_predicted_values(c, nb).items()):
            for i, shown in worked.items():
                hit = next((f for f in _shown_forms(value) if re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", shown)),
                           None)
                if hit:
                    found.append(Violation("", c.name, c.solution, "answer-above", (
                        f"the predicted {name} = {hit} is printed by c{i}, a worked example on the exercise's own "
                        "input. Fix: ask about an input the lesson has not worked through")))
    return found


# -- all rules, and the command --------------------------------------------------------------

RULES = (reference_in_namespace, reveals_before_check, unchecked_predictions, answer_above)


def violations(path: str | Path) -> list[Violation]:
    """Every rule's violations in one notebook, exercise by exercise."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    found = [v for rule in RULES for v in rule(nb)]
    named = [Violation(Path(path).name, v.exercise, v.cell, v.rule, v.message) for v in found]
    return sorted(named, key=lambda v: (v.exercise, v.cell, v.rule))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertedu.course.exercise_rules",
                                     description="List the exercises a learner can bypass (issue 57 item 3).")
    parser.add_argument("paths", nargs="+", type=Path, help="notebooks, or folders of lessons (NN_*.ipynb)")
    args = parser.parse_args(argv)
    paths = [p for path in args.paths for p in (sorted(path.glob("[0-9]*.ipynb")) if path.is_dir() else [path])]
    found = [v for path in paths for v in violations(path)]
    for v in found:
        print(v)
    print(f"{len(found)} violations in {len({v.notebook for v in found})} of {len(paths)} notebooks", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
