"""Execute an edition's own cells, and only them, a fresh kernel for each lesson (``editions run``).

The mirrored cells of a Chinese lesson are the English lesson's, checked by equality; its own
cells (the map in Chinese, a Chinese sentence to try) are executed here, each lesson's own cells
in their order in a kernel of their own, every cell self-contained (one kernel for all lessons
would let one lesson's settings, such as its thread count, change another's last digits). As nbval does, the text of each output is compared with
the stored one (streams, ``text/plain``, errors) and a picture must still be a picture; a cell
tagged ``NBVAL_IGNORE_OUTPUT`` is run but not compared. ``write=True`` stores the fresh outputs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Sequence

from .edition_cells import _read, is_own, numbered

IGNORE = "NBVAL_IGNORE_OUTPUT"


def _shown(outputs: list) -> list:
    """What nbval would compare of a cell's outputs: text exactly, pictures by their kind only."""
    shown = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            shown.append((out.get("name"), "".join(out.get("text", ""))))
        elif kind == "error":
            shown.append(("error", out.get("ename"), out.get("evalue")))
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            pictures = sorted(k for k in data if k.startswith("image/"))
            text = data.get("text/plain", "")
            shown.append(("data", pictures, "" if pictures else ("".join(text) if isinstance(text, list) else text)))
    # a figure's text/plain is its repr ("<Figure size ...>"), not compared; streams are joined as nbval does
    return shown


def _execute(cells: list, cwd: Path) -> list:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[copy.deepcopy(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb.cells


def run(paths: Sequence[str | Path], write: bool = False) -> list[str]:
    """Run the own cells of every lesson in ``paths`` (a kernel each); returns the differences
    from the stored outputs, or with ``write`` stores the new outputs and returns the errors."""
    import nbformat

    paths = [Path(p) for p in paths]
    notebooks = {p: _read(p) for p in paths}
    jobs = [(p, i) for p, nb in notebooks.items() for i, c in enumerate(nb.cells) if is_own(c)]
    fresh = []
    for path in paths:
        own = [notebooks[path].cells[i] for p, i in jobs if p == path]
        fresh += _execute(own, path.parent) if own else []
    problems, changed = [], set()
    for (path, i), new in zip(jobs, fresh):
        old = notebooks[path].cells[i]
        errors = [o for o in new.outputs if o.get("output_type") == "error"]
        if errors:
            problems.append(f"{path.name}: own cell {old.get('id')} raised {errors[0]['ename']}: {errors[0]['evalue']}")
        if write:
            old.outputs = new.outputs
            changed.add(path)
        elif IGNORE not in old.get("metadata", {}).get("tags", []) and _shown(old.outputs) != _shown(new.outputs):
            problems.append(f"{path.name}: own cell {old.get('id')} printed something else than its stored outputs: "
                            f"{_shown(new.outputs)!r:.300} against {_shown(old.outputs)!r:.300}")
    for path in changed:
        numbered(notebooks[path])
        nbformat.write(notebooks[path], path)
    return problems
