"""Which masked LM a name or folder means, and whether its MLM head was ever trained.

`bertedu fill-mask`, `bertedu masked-accuracy` and `bertedu export` read a masked LM from a
shipped name (`bertedu.pretrained.MASKED_LMS`) or a run folder. Before loading one, they ask
`check_masked_lm`, which refuses in one line what would otherwise print a random head's
guesses at status 0 or a misleading "no checkpoint" message:

    minilm                 all-MiniLM-L6-v2 ships without an MLM head: use minilm-mlm
    a misspelled name      the close shipped names (difflib) and the full list
    a distilled student    whose teacher had no MLM head (`bertedu distill --teacher minilm`):
                           its head is the fresh one `student_from_teacher` drew
    a fine-tuning run      a task head, not a masked LM: `bertedu predict`

Once loaded, `check_head_weights` also refuses a head whose LayerNorm still holds its initial
values (weight 1, bias 0 exactly): no training step ever reached it, wherever the folder came from.
Introduced with the command line (docs/command_line.md); the heads themselves in notebook 05.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Optional

from ..errors import MissingFileError, SettingError
from ..pretrained import MASKED_LMS

DISTILL_RUN = "distill.json"  # bertedu.training.distill.RUN_NAME (read here, never imported: no cycle)
PRETRAIN_RUN = "run.json"
FINETUNE_TASK = Path("model") / "task.json"


def shipped_names_hint(name: str, names: Optional[list[str]] = None) -> str:
    """'did you mean course-en? ' (difflib's close matches among `names`) and the list of them."""
    names = list(MASKED_LMS) if names is None else names
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    guess = f"did you mean {' or '.join(close)}? " if close else ""
    return f"{guess}the shipped masked LMs are {', '.join(names)}"


def check_masked_lm(name_or_run: str | Path) -> None:
    """Raise a one-line UserError unless `name_or_run` is a masked LM with a trained MLM head:
    a shipped name, or a `bertedu pretrain` / `bertedu distill` folder (see the module docstring)."""
    name = str(name_or_run)
    if name in MASKED_LMS:
        return
    if name == "minilm":
        raise SettingError("minilm has no MLM head: use minilm-mlm (all-MiniLM-L6-v2 ships its encoder alone; "
                           "minilm-mlm is MiniLM given a trained MLM head)")
    folder = Path(name)
    if not folder.is_dir():
        raise MissingFileError(f"{name}: no shipped masked LM and no folder of that name; {shipped_names_hint(name)}")
    if (folder / FINETUNE_TASK).is_file():
        raise SettingError(f"{name} is a fine-tuning run (a task head, no MLM head): use `bertedu predict {name} "
                           "TEXT`, or fill-mask its --init")
    why = untrained_head_reason(folder)
    if why:
        raise SettingError(f"{name}: its MLM head was never trained ({why}), so its guesses are noise; fill-mask "
                           "a masked LM (minilm-mlm, course-en), or distil from one with --soft-weight 5 --mlm-weight 2")


def untrained_head_reason(folder: Path, depth: int = 0) -> Optional[str]:
    """Why the MLM head of the run in `folder` was never trained, or None when it was (or
    cannot be told). A pretraining run always trains it; a distillation run trains it with
    --soft-weight or --mlm-weight, else keeps its teacher's (or --init-student's) head, which
    is fresh when the teacher has none."""
    settings_path = folder / DISTILL_RUN
    if not settings_path.is_file() or depth > 8:
        return None  # a pretraining run (run.json), or a folder this cannot read
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    if settings.get("soft_weight") or settings.get("mlm_weight"):
        return None
    source = settings.get("init_student") or settings.get("teacher")
    if source == "minilm":
        return "a student distilled from minilm, which has no MLM head, without --soft-weight or --mlm-weight"
    if source and Path(source).is_dir():
        inner = untrained_head_reason(Path(source), depth + 1)
        return f"its head comes from {source}: {inner}" if inner else None
    return None


def mlm_head_trained(name_or_run: str | Path) -> bool:
    """True when `name_or_run` (a shipped name or a run folder) has a trained MLM head."""
    name = str(name_or_run)
    if name in MASKED_LMS:
        return True
    if name == "minilm":
        return False
    return untrained_head_reason(Path(name)) is None


def nsp_head_trained(name_or_run: str | Path) -> bool:
    """True when the run's settings say it trained next sentence prediction (run.json's nsp);
    False for every shipped model (their last phase ran --no-nsp), a distillation run, MiniLM."""
    from ..pretrained import masked_lm_or_run_dir

    if str(name_or_run) == "minilm":
        return False
    path = masked_lm_or_run_dir(name_or_run) / PRETRAIN_RUN
    if not path.is_file() or (path.parent / DISTILL_RUN).is_file():
        return False
    return bool(json.loads(path.read_text(encoding="utf-8")).get("nsp", False))


def head_untouched(model) -> bool:
    """True when the MLM head of a `BertForPreTraining` is as `init_head_layers` left it: its
    LayerNorm weight all 1 and bias all 0, which one optimizer step that reaches the head changes."""
    norm = model.mlm.layer_norm
    return bool((norm.weight == 1).all() and (norm.bias == 0).all())


def check_head_weights(model, name_or_run: str | Path) -> None:
    """Raise a one-line SettingError when the loaded masked LM's head was never trained (`head_untouched`)."""
    if head_untouched(model):
        raise SettingError(f"{name_or_run}: its MLM head was never trained (its LayerNorm still holds its initial "
                           "values), so its guesses are noise; use a pretraining run or a shipped masked LM")
