"""A run folder that knows what it holds (bertedu.training.runfolder): every --resume and
--overwrite is checked against the folder's kind, settings, data and vocabulary before a
byte is written; a refusal is one line with status 2 and leaves every file as it was."""

import json
import shutil
import signal
from pathlib import Path

import pytest

import bertedu.training.pretrain as pretrain_module
from bertedu.cli import main
from bertedu.training.checkpoint import DamagedCheckpointError, list_checkpoints
from bertedu.training.finetune import load_finetuned
from bertedu.training.jobs import StopSignals
from bertedu.training.runfolder import IDENTITY_NAME
from bertedu.pretrained import minilm_vocab_path

WORDS = [w for w in minilm_vocab_path().read_text(encoding="utf-8").split()[3000:4000] if w.isalpha()]
TEXT = "\n\n".join(f"Document {i} tells of rivers, banks and bridges.\n{' '.join(WORDS[i * 60:i * 60 + 60])}."
                   for i in range(8)) + "\n"
SMALL = ["--preset", "tiny", "--max-seq-length", "32", "--batch-size", "2", "--max-eval-examples", "2",
         "--no-progress", "--steps", "1"]
FT = ["--init", "random", "--preset", "tiny", "--max-seq-length", "16", "--batch-size", "4", "--no-progress"]


def snapshot(folder: Path) -> dict:
    """Every path under `folder` with its bytes (None for a folder): what must not change."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def refused(capsys, args: list[str], folder: Path) -> str:
    """Run the command; check status 2, one `bertedu <command>: error:` line and nothing in
    `folder` changed; return the line."""
    before = snapshot(folder) if folder.exists() else None
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"bertedu {args[0]}: error: "), err
    assert (snapshot(folder) if folder.exists() else None) == before
    return err[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished pretraining run, a finished fine-tuning run, an interrupted one, a task folder."""
    root = tmp_path_factory.mktemp("made")
    (root / "corpus.txt").write_text(TEXT, encoding="utf-8")
    for name, labels in (("sst", (0, 1)), ("other", (1, 0))):
        (root / name).mkdir()
        rows = "".join(f"{t}\t{labels[i % 2]}\n" for i, t in enumerate(["a fine film", "dull", "great", "bad"] * 4))
        for split in ("train", "dev"):
            (root / name / f"{split}.tsv").write_text("sentence\tlabel\n" + rows, encoding="utf-8")
    assert main(["pretrain", *SMALL, "--corpus", str(root / "corpus.txt"), "--out", str(root / "pre")]) == 0
    assert main(["finetune", "--task", str(root / "sst"), *FT, "--steps", "2", "--out", str(root / "ft")]) == 0
    return root


@pytest.fixture
def run(made, tmp_path):
    """A copy of one of the made folders, to change or to see unchanged."""
    def copy(name: str) -> Path:
        shutil.copytree(made / name, tmp_path / name)
        return tmp_path / name
    return copy


def interrupted_finetune(made, out: Path, monkeypatch, capsys) -> None:
    """A fine-tuning run stopped by SIGINT after its first step (a checkpoint, no results.json)."""
    with monkeypatch.context() as m:
        m.setattr(StopSignals, "requested", lambda self, ctx=None: int(signal.SIGINT))
        assert main(["finetune", "--task", str(made / "sst"), *FT, "--steps", "3", "--out", str(out)]) == 130
    assert list_checkpoints(out) and not (out / "results.json").exists()
    capsys.readouterr()  # the stop's own lines


def test_every_run_says_what_it_is(made):
    pre = json.loads((made / "pre" / IDENTITY_NAME).read_text())
    ft = json.loads((made / "ft" / IDENTITY_NAME).read_text())
    assert (pre["kind"], ft["kind"]) == ("pretrain", "finetune")
    assert pre["settings"]["corpus"] == str(made / "corpus.txt") and len(pre["data"]["corpus"]["sha256"]) == 64
    assert ft["settings"]["task"] == str(made / "sst") and len(ft["data"]["task"]["sha256"]) == 64
    assert len(pre["vocab_sha256"]) == len(ft["vocab_sha256"]) == 64


def test_a_finetune_resume_into_a_pretraining_run_is_refused(capsys, run):
    """The issue's command: it overwrote the run's vocab.txt with course-zh's, then a KeyError."""
    pre = run("pre")
    line = refused(capsys, ["finetune", "--task", "sentiment-zh", "--init", "course-zh", "--out", str(pre),
                            "--resume"], pre)
    assert line.endswith(f"--resume: {pre} holds a pretraining run (identity.json), not a fine-tuning run: pass "
                         "the folder of the fine-tuning run to continue")


@pytest.mark.parametrize("change, says", [(["--preset", "mini"], "--preset tiny, not mini"),
                                          (["--max-seq-length", "24"], "--max-seq-length 32, not 24"),
                                          (["--vocab-size", "2000"], "--vocab-size 8000, not 2000")])
def test_a_pretrain_resume_with_other_settings_names_them_and_writes_nothing(capsys, run, change, says):
    pre = run("pre")
    corpus = json.loads((pre / "run.json").read_text())["corpus"]
    line = refused(capsys, ["pretrain", *SMALL, "--corpus", corpus, *change, "--out", str(pre), "--resume"], pre)
    assert says in line and "resume it with its own settings, or choose another --out" in line


def test_a_pretrain_resume_on_a_changed_corpus_file_is_refused(capsys, run, made, tmp_path):
    pre = run("pre")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT.replace("rivers", "lakes"), encoding="utf-8")
    identity = json.loads((pre / IDENTITY_NAME).read_text())
    identity["settings"]["corpus"] = identity["data"]["corpus"]["path"] = str(corpus)  # as if made on it before
    (pre / IDENTITY_NAME).write_text(json.dumps(identity))
    line = refused(capsys, ["pretrain", *SMALL, "--corpus", str(corpus), "--out", str(pre), "--resume"], pre)
    assert f"--corpus {corpus} as it was when the run began (its sha256 has changed since)" in line


def test_a_pretrain_resume_into_a_finetune_folder_leaves_no_run_json(capsys, run, made):
    ft = run("ft")
    line = refused(capsys, ["pretrain", *SMALL, "--corpus", str(made / "corpus.txt"), "--out", str(ft), "--resume"],
                   ft)
    assert "holds a fine-tuning run (identity.json), not a pretraining run" in line
    assert not (ft / "run.json").exists()


def test_finetune_overwrite_replaces_only_a_finetuning_run(capsys, run, made):
    pre = run("pre")
    line = refused(capsys, ["finetune", "--task", str(made / "sst"), *FT, "--steps", "1", "--overwrite",
                            "--out", str(pre)], pre)
    assert line.endswith(f"--out {pre} holds a pretraining run (identity.json), not a fine-tuning run: --overwrite "
                         "replaces only a fine-tuning run; choose another --out")
    ft = run("ft")
    assert main(["finetune", "--task", str(made / "other"), *FT, "--steps", "1", "--overwrite", "--out", str(ft)]) == 0
    assert json.loads((ft / IDENTITY_NAME).read_text())["settings"]["task"] == str(made / "other")


def test_a_pretraining_run_of_an_earlier_bertedu_is_still_recognised(capsys, run, made):
    """A folder from before identity.json: its run.json says it is a pretraining run."""
    pre = run("pre")
    (pre / IDENTITY_NAME).unlink()
    line = refused(capsys, ["finetune", "--task", str(made / "sst"), *FT, "--steps", "1", "--overwrite",
                            "--out", str(pre)], pre)
    assert "holds a pretraining run (run.json), not a fine-tuning run" in line
    line = refused(capsys, ["pretrain", *SMALL, "--corpus", str(made / "corpus.txt"), "--preset", "mini",
                            "--out", str(pre), "--resume"], pre)
    assert "--preset tiny, not mini" in line


@pytest.mark.parametrize("legacy", [False, True])
def test_a_fresh_run_never_trains_on_a_stale_vocabulary(made, tmp_path, monkeypatch, legacy):
    """Ctrl-C while the data is prepared leaves identity.json (before: run.json) and vocab.txt, no
    checkpoint; the next run with --vocab-size 150 trained on the old 8,000-piece vocabulary."""
    out, corpus = tmp_path / "out", str(made / "corpus.txt")

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(pretrain_module, "build_datasets", ctrl_c)
        assert main(["pretrain", *SMALL, "--corpus", corpus, "--out", str(out)]) == 130
    first = (out / "vocab.txt").read_text().splitlines()
    assert len(first) > 150 and not list_checkpoints(out)
    if legacy:  # what an earlier bertedu left: run.json beside the vocabulary
        (out / IDENTITY_NAME).unlink()
        (out / "run.json").write_text(json.dumps({"corpus": corpus, "vocab_size": 8000}))
    assert main(["pretrain", *SMALL, "--corpus", corpus, "--vocab-size", "150", "--out", str(out)]) == 0
    assert len((out / "vocab.txt").read_text().splitlines()) == 150
    assert json.loads((out / "run.json").read_text())["vocab_size"] == 150


def test_a_fresh_run_keeps_the_vocabulary_of_its_own_start(made, tmp_path, monkeypatch):
    out, corpus = tmp_path / "out", str(made / "corpus.txt")
    with monkeypatch.context() as m:
        m.setattr(pretrain_module, "build_datasets", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
        assert main(["pretrain", *SMALL, "--corpus", corpus, "--out", str(out)]) == 130
    inode = (out / "vocab.txt").stat().st_ino
    assert main(["pretrain", *SMALL, "--corpus", corpus, "--out", str(out)]) == 0
    assert (out / "vocab.txt").stat().st_ino == inode  # the same file: the same settings made it


def test_a_finetune_resume_checks_task_and_data(capsys, made, tmp_path, monkeypatch):
    out = tmp_path / "ft"
    interrupted_finetune(made, out, monkeypatch, capsys)
    base = ["finetune", *FT, "--steps", "3", "--out", str(out), "--resume"]
    line = refused(capsys, [*base, "--task", "paraphrase-en"], out)
    assert f"--task {made / 'sst'}, not paraphrase-en" in line
    line = refused(capsys, [*base, "--task", str(made / "sst"), "--max-train", "8"], out)
    assert "--max-train unset, not 8" in line
    task = tmp_path / "sst"
    shutil.copytree(made / "sst", task)
    identity = json.loads((out / IDENTITY_NAME).read_text())
    identity["settings"]["task"] = identity["data"]["task"]["path"] = str(task)
    (out / IDENTITY_NAME).write_text(json.dumps(identity))
    (task / "train.tsv").write_text((task / "train.tsv").read_text().replace("dull", "dreary"))
    line = refused(capsys, [*base, "--task", str(task)], out)
    assert f"--task {task} as it was when the run began (its sha256 has changed since)" in line
    (task / "train.tsv").write_text((made / "sst" / "train.tsv").read_text())
    assert main([*base, "--task", str(task)]) == 0  # its own settings and data: resumed and finished
    assert (out / "results.json").is_file()


def test_a_resume_whose_vocabulary_was_replaced_is_refused(capsys, made, tmp_path, monkeypatch):
    out = tmp_path / "ft"
    interrupted_finetune(made, out, monkeypatch, capsys)
    with open(out / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("extra\n")
    line = refused(capsys, ["finetune", "--task", str(made / "sst"), *FT, "--steps", "3", "--out", str(out),
                            "--resume"], out)
    assert "vocab.txt is not the vocabulary this run was trained with" in line


@pytest.mark.parametrize("command", ["pretrain", "finetune", "distill"])
def test_a_resume_of_nothing_says_so(capsys, made, tmp_path, command):
    args = {"pretrain": ["pretrain", *SMALL, "--corpus", str(made / "corpus.txt")],
            "finetune": ["finetune", "--task", str(made / "sst"), *FT, "--steps", "1"],
            "distill": ["distill", "--steps", "1", "--no-progress"]}[command]
    missing = tmp_path / "missing"
    line = refused(capsys, [*args, "--out", str(missing), "--resume"], missing)
    assert f"--resume: {missing} does not exist, so there is no run to resume: drop --resume" in line
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    line = refused(capsys, [*args, "--out", str(empty), "--resume"], empty)
    assert f"--resume: {empty} is empty, so there is nothing to resume" in line


def test_a_resume_of_a_start_without_a_checkpoint_says_so(capsys, made, tmp_path, monkeypatch):
    out, corpus = tmp_path / "out", str(made / "corpus.txt")
    with monkeypatch.context() as m:
        m.setattr(pretrain_module, "build_datasets", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
        assert main(["pretrain", *SMALL, "--corpus", corpus, "--out", str(out)]) == 130
    capsys.readouterr()
    line = refused(capsys, ["pretrain", *SMALL, "--corpus", corpus, "--out", str(out), "--resume"], out)
    assert line.endswith(f"--resume: {out} holds no checkpoint (the run stopped before its first one), so there is "
                         "nothing to resume: run the same command without --resume to start it again")


def test_the_final_model_carries_a_manifest_and_a_flipped_byte_is_found(run):
    ft = run("ft")
    manifest = json.loads((ft / "model" / "manifest.json").read_text())["files"]
    assert set(manifest) == {"model.safetensors", "config.json", "task.json"}
    load_finetuned(ft)  # verified
    weights = ft / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(DamagedCheckpointError, match="its sha256 differs from the manifest's"):
        load_finetuned(ft)
