"""benchmarks/soft_targets.py --merge: records of the same study on other seeds become one record (notebook 18)."""

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("soft_targets", REPO / "benchmarks" / "soft_targets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(seeds, lr="0.0003"):
    rows = [{"seed": s, **{way: {"test": {"accuracy": 0.2 + s / 100 + (way == "soft") / 50,
                                          "agreement": 0.3 + (way == "soft") / 10}} for way in ("hard", "soft")}}
            for s in seeds]
    return {"command": f"run {seeds}", "settings": {"steps": 40, "seeds": ",".join(map(str, seeds))},
            "sweep": {"hard": {lr: {}}, "soft": {lr: {}}}, "chosen_lr": {"hard": lr, "soft": lr},
            "train_windows": 10, "test_masked": 5, "teacher_test_accuracy": 0.3, "machine": "m", "seeds": rows}


def test_merge_keeps_every_seed_in_order_and_recomputes_the_summary(tmp_path):
    paths = []
    for name, seeds in [("b", [2, 3]), ("a", [0, 1])]:
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(_record(seeds)))
    out = tmp_path / "merged.json"
    record = _script().merge([str(p) for p in paths], str(out), "merge command")
    assert [row["seed"] for row in record["seeds"]] == [0, 1, 2, 3]
    assert record["settings"]["seeds"] == "0,1,2,3" and record["merged"] == ["run [2, 3]", "run [0, 1]"]
    assert record["accuracy"]["difference"] == pytest.approx(0.02) and record["agreement"]["soft"] == pytest.approx(0.4)
    assert json.loads(out.read_text()) == record


def test_merge_refuses_other_settings_or_a_seed_twice(tmp_path):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(_record([0, 1])))
    b.write_text(json.dumps(_record([2], lr="0.001")))
    c.write_text(json.dumps(_record([1])))
    with pytest.raises(ValueError, match="sweep"):
        _script().merge([str(a), str(b)], str(tmp_path / "out.json"), "merge")
    with pytest.raises(ValueError, match="seed"):
        _script().merge([str(a), str(c)], str(tmp_path / "out.json"), "merge")
