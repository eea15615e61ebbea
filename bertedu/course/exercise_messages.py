"""What the exercises' checks say, in the learner's language (``bertedu.course.i18n``).

The check cells of a Chinese lesson are byte for byte those of the English one, hints included
(``check_close(..., hint="...")`` holds an English string literal), so the checks translate at run
time: ``say(key, ...)`` fills the template of ``key`` in the language ``i18n.current()`` names,
``hint(text)`` looks an English hint up in the Chinese catalogue (``exercise_hints_zh.HINTS``), and
``name(text)`` does the same for what a check says it checks when that is words, not code
(``"your precision"``; ``exercise_hints_zh.NAMES``). Numbers, shapes and reprs are filled in
unchanged; only the words around them change.

    >>> from bertedu.course import i18n
    >>> with i18n.speaking("zh"):
    ...     say("number_differs", got=0.5, expected=0.15)
    '是 0.5，应为 0.15'

``hints_in(source)`` and ``names_in(source)`` read the hints and names a check cell passes (with
``ast``), so a test can hold the catalogue complete: a new English hint (or name in words) without
its Chinese fails tests/test_exercises.py.
Introduced for the Chinese edition (issue 58 item 3).
"""

from __future__ import annotations

import ast
import re

from bertedu.course import i18n
from bertedu.course.exercise_hints_zh import HINTS as HINTS_ZH
from bertedu.course.exercise_hints_zh import NAMES as NAMES_ZH

# One template per message and language; str.format fills them (``{got:.6g}``, ``{got!r}``).
MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        "message": "{name}: {problem}",
        "hint": "\nHint: {hint}",
        "result": "result",
        "your_function": "your function",
        "or": " or ",
        "not_defined": "is not defined: run your solution cell above first",
        "should_be_type": "should be a {expected}, got a {got}",
        "should_be_tensor": "should be a tensor of shape {shape}, got a {got}",
        "shape_differs": "has shape {shape}, expected {expected}",
        "dimensions_differ": " ({got} dimensions instead of {expected})",
        "single_number": "should be a single number, got shape {shape}",
        "a_number": "should be a number, got {got}",
        "is_nan": "is NaN",
        "number_differs": "is {got:.6g}, expected {expected:.6g}",
        "nan_positions": "contains NaN at {count} positions",
        "values_differ": "{bad} of {total} values differ; first at index {where}: got {got:.6g}, "
                         "expected {expected:.6g} (largest difference {largest:.3g})",
        "length_differs": "has {got} items, expected {expected}: {detail}",
        "position_differs": "differs at position {first}: got {got!r}, expected {expected!r}{more}",
        "positions_differ": " ({count} of {total} positions differ)",
        "index_differs": "differs at index {where}: got {got!r}, expected {expected!r}",
        "value_differs": "is {got!r}, expected {expected!r}",
        "item": "the item {value!r} at position {start}",
        "items": "the {count} items at positions {start}-{end} ({shown})",
        "one_missing": "{items} is missing",
        "many_missing": "{items} are missing",
        "extra": "{items} should not be there",
        "first_difference": "the first difference is at position {position}: got {got!r}, expected {expected!r}",
        "not_a_function": "should be a function, got a {got}",
        "raised": "raised {error}: {text}",
        "forbidden_call": "was called by your answer: the exercise is to compute what it computes, from its parts",
        "forbidden_hint": "use its sub-modules and weights (print it to see them), not the object itself",
        "forbid_needs": "forbid_calls(obj) needs an nn.Module, or the names of the methods to forbid",
        "reference_path": "reference({path!r}): write 'package.module:name', e.g. 'bertedu.data:mask_tokens'",
    },
    "zh": {
        "message": "{name}：{problem}",
        "hint": "\n提示：{hint}",
        "result": "结果",
        "your_function": "你的函数",
        "or": " 或 ",
        "not_defined": "还没有定义：请先运行上面你的答案单元格",
        "should_be_type": "应是 {expected}，实际是 {got}",
        "should_be_tensor": "应是形状为 {shape} 的张量，实际是 {got}",
        "shape_differs": "形状是 {shape}，应为 {expected}",
        "dimensions_differ": "（{got} 维，应为 {expected} 维）",
        "single_number": "应是单个数，实际形状是 {shape}",
        "a_number": "应是一个数，实际是 {got}",
        "is_nan": "是 NaN",
        "number_differs": "是 {got:.6g}，应为 {expected:.6g}",
        "nan_positions": "有 {count} 个位置是 NaN",
        "values_differ": "{total} 个值中有 {bad} 个不对；第一个在下标 {where}：得到 {got:.6g}，"
                         "应为 {expected:.6g}（最大差 {largest:.3g}）",
        "length_differs": "有 {got} 项，应为 {expected} 项：{detail}",
        "position_differs": "在位置 {first} 不同：得到 {got!r}，应为 {expected!r}{more}",
        "positions_differ": "（{total} 个位置中有 {count} 个不同）",
        "index_differs": "在下标 {where} 不同：得到 {got!r}，应为 {expected!r}",
        "value_differs": "是 {got!r}，应为 {expected!r}",
        "item": "位置 {start} 上的 {value!r}",
        "items": "位置 {start}-{end} 上的 {count} 项（{shown}）",
        "one_missing": "缺了{items}",
        "many_missing": "缺了{items}",
        "extra": "多了{items}",
        "first_difference": "第一处不同在位置 {position}：得到 {got!r}，应为 {expected!r}",
        "not_a_function": "应是函数，实际是 {got}",
        "raised": "抛出了 {error}：{text}",
        "forbidden_call": "被你的答案调用了：这道练习要你用它的组成部分算出它算的东西",
        "forbidden_hint": "用它的子模块和权重（print 它就能看到），不要直接调用它",
        "forbid_needs": "forbid_calls(obj) 需要一个 nn.Module，或者要禁止的方法名",
        "reference_path": "reference({path!r})：请写成 'package.module:name'，例如 'bertedu.data:mask_tokens'",
    },
}


def say(key: str, **values) -> str:
    """The message ``key`` in the current language, with ``values`` filled in."""
    return MESSAGES[i18n.current()][key].format(**values)


def hint(text: str) -> str:
    """An exercise's hint in the current language: English as written, Chinese from the catalogue
    (an English hint the catalogue lacks is shown as it is)."""
    if i18n.current() == "zh":
        return HINTS_ZH.get(text, text)
    return text


def _template(pattern: str) -> re.Pattern:
    """``"sequence {} in packed"`` -> a pattern whose groups are the values at the ``{}``."""
    return re.compile("(.*?)".join(re.escape(part) for part in pattern.split("{}")), re.S)


_NAME_TEMPLATES = [(_template(en), zh) for en, zh in NAMES_ZH.items() if "{}" in en]


def name(text: str) -> str:
    """What a check checks, in the current language: a name in words is looked up in the catalogue
    (f-string names by their template, the values kept); code names are shown as they are."""
    if i18n.current() != "zh":
        return text
    if text in NAMES_ZH:
        return NAMES_ZH[text]
    for pattern, zh in _NAME_TEMPLATES:
        found = pattern.fullmatch(text)
        if found:
            parts = zh.split("{}")
            return parts[0] + "".join(value + part for value, part in zip(found.groups(), parts[1:]))
    return text


# The checks that take a hint, and its place among their positional arguments (the name is one before).
HINT_POSITION = {"check_defined": 2, "check_type": 3, "check_shape": 3, "check_close": 3, "check_equal": 3,
                 "check_function": 4}


def _literals(node: ast.expr, source: str) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Constant) and node.value is None:
        return []
    if isinstance(node, ast.IfExp):  # "a" if name == ... else "b": both can be shown
        return _literals(node.body, source) + _literals(node.orelse, source)
    raise ValueError(f"hint={ast.get_source_segment(source, node)}: write a hint as a string literal "
                     "(or `a if condition else b` of literals), so that it can be translated")


def _call_name(node: ast.Call) -> str:
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")


def names_in(source: str) -> list[str]:
    """The names the ``check_*`` calls of a cell give what they check: string literals as they are,
    f-strings as templates with ``{}`` for their values (names held in variables are not read)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        position = HINT_POSITION.get(_call_name(node)) if isinstance(node, ast.Call) else None
        if position is None:
            continue
        given = [k.value for k in node.keywords if k.arg == "name"] or node.args[position - 1:position]
        for value in given:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.append(value.value)
            elif isinstance(value, ast.JoinedStr):
                found.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in value.values))
    return found


def in_words(name: str) -> bool:
    """Whether a check's name holds English words to translate (``your precision``,
    ``softmax_backward on scores {}``), not only code (``tokens``, ``lr_at({}, {})``)."""
    code = re.sub(r"'[^']*'|\"[^\"]*\"|\{\}", "", name)
    while True:  # calls and subscripts, innermost first: word_ids(...), tokens[...]
        shorter = re.sub(r"[\w.]+\([^()]*\)|\[[^\[\]]*\]", "x", code)
        if shorter == code:
            break
        code = shorter
    return bool(re.search(r"[A-Za-z]{2,}", code)) and bool(re.search(r"\S\s+\S", code.strip()))


def hints_in(source: str) -> list[str]:
    """The hints a cell's checks pass: ``hint=`` keywords and positional hints of the
    ``check_*`` functions. A hint built at run time (an f-string, a variable) raises ValueError."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg == "hint":
                found += _literals(keyword.value, source)
        position = HINT_POSITION.get(_call_name(node))
        if position is not None and len(node.args) > position:
            found += _literals(node.args[position], source)
    return found
