"""A training job on a shared machine (bertedu.training.jobs, the manifest in bertedu.training.checkpoint):
one run per output folder, SIGINT / SIGTERM stop after a whole step and resume bit for bit,
damaged checkpoints are named and skipped."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertedu.training.checkpoint import (
    MANIFEST_NAME,
    DamagedCheckpointError,
    list_checkpoints,
    load_checkpoint,
    load_weights,
    save_checkpoint,
)
from bertedu.cli import main
from bertedu.errors import OutputFolderError
from bertedu.training.jobs import LOCK_NAME, StopSignals, run_lock
from bertedu.pretrained import minilm_vocab_path
from bertedu.training.loop import TrainConfig, train

ROOT = Path(__file__).resolve().parent.parent


# ---- a toy model: a checkpoint in well under a second ----------------------------------------
class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, x, y):
        return type("Out", (), {"loss": ((self.lin(x).squeeze(-1) - y) ** 2).mean()})()


def toy_data(n=16):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4, generator=g), float(i % 3)) for i in range(n)]


def toy_collate(examples, generator):
    return {"x": torch.stack([x for x, _ in examples]), "y": torch.tensor([y for _, y in examples])}


def toy_config(out, **kw):
    return TrainConfig(**{**dict(lr=1e-2, batch_size=4, steps=6, save_every=1, keep_checkpoints=3, log_every=1,
                                 progress=False, out=str(out)), **kw})


# ---- one run per folder --------------------------------------------------------------------------
HOLDER = """
import sys, time
from bertedu.training.jobs import run_lock
with run_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_live_run_holds_its_folder_and_a_killed_one_leaves_it_free(tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputFolderError, match=f"in use by a live run \\(process {holder.pid} "):
            with run_lock(out):
                pass
        # the command line says so at once, in one line, status 2
        assert main(["pretrain", "--preset", "tiny", "--steps", "1", "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("bertedu pretrain: error: ") and "in use by a live run" in err[0]
        assert main(["finetune", "--task", "ner-en", "--steps", "1", "--out", str(out)]) == 2
        assert "in use by a live run" in capsys.readouterr().err
    finally:
        holder.kill()  # SIGKILL: no clean-up code runs, the OS drops the lock
        holder.wait()
    assert (out / LOCK_NAME).exists()  # the stale file stays ...
    with run_lock(out):  # ... but nobody holds it
        assert f"process {os.getpid()}" in (out / LOCK_NAME).read_text()
    assert not (out / LOCK_NAME).exists()  # a run that ends removes it


def test_a_stale_lock_file_does_not_block_and_the_lock_nests_in_one_process(tmp_path):
    (tmp_path / LOCK_NAME).write_text("process 999999 on some-node\n")  # left by a crashed run
    with run_lock(tmp_path):
        with run_lock(tmp_path):  # finetune holds it around each train() call
            pass
        assert (tmp_path / LOCK_NAME).exists()  # still held by the outer one
    assert not (tmp_path / LOCK_NAME).exists()


def test_train_takes_the_lock_too(tmp_path):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputFolderError):
            train(Toy(), toy_data(), toy_collate, toy_config(out))
        assert list_checkpoints(out) == []  # never two runs interleaving checkpoints
    finally:
        holder.kill()
        holder.wait()


# ---- keep the newest N, each with a manifest ------------------------------------------------------
def test_keep_checkpoints_keeps_the_newest_n_each_with_a_manifest(tmp_path):
    train(Toy(), toy_data(), toy_collate, toy_config(tmp_path, keep_checkpoints=3))
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-4", "checkpoint-5", "checkpoint-6"]
    manifest = json.loads((tmp_path / "checkpoint-6" / MANIFEST_NAME).read_text())["files"]
    names = sorted(p.name for p in (tmp_path / "checkpoint-6").iterdir() if p.name != MANIFEST_NAME)
    assert sorted(manifest) == names
    for name, entry in manifest.items():
        assert entry["size"] == (tmp_path / "checkpoint-6" / name).stat().st_size and len(entry["sha256"]) == 64


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:  # flip bytes in the middle: same size, other content
        for i in range(len(data) // 2, len(data) // 2 + 8):
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("how, file, says", [("truncate", "training_state.pt", "truncated"),
                                             ("flip", "model.safetensors", "sha256")])
def test_a_damaged_checkpoint_is_named_and_resume_falls_back_to_an_intact_one(tmp_path, how, file, says):
    reference = Toy()
    train(reference, toy_data(), toy_collate, toy_config(tmp_path / "whole"))

    out = tmp_path / "run"
    train(Toy(), toy_data(), toy_collate, toy_config(out, steps=6), stop_at_step=4)
    _damage(out / "checkpoint-4" / file, how)
    with pytest.raises(DamagedCheckpointError, match=f"checkpoint-4/{file} is damaged.*{says}"):
        load_checkpoint(out / "checkpoint-4", Toy())
    with pytest.raises(DamagedCheckpointError, match=file):
        load_weights(out / "checkpoint-4", Toy())  # --init-from, fill-mask: the same check

    resumed = Toy()
    with pytest.warns(UserWarning, match=f"checkpoint-4/{file} is damaged.*older checkpoint"):
        result = train(resumed, toy_data(), toy_collate, toy_config(out), resume=True)
    assert result.step == 6
    for name, w in reference.state_dict().items():  # from checkpoint-3 on, the same run
        assert torch.equal(resumed.state_dict()[name], w), name


def test_retention_never_keeps_a_damaged_checkpoint_for_the_newest_intact_one(tmp_path):
    """The newest checkpoint truncated; the resumed run stopped before it wrote that step again
    (a time budget, a signal). It kept the damaged checkpoint-4 and deleted the intact
    checkpoint-2; now it keeps checkpoint-2 and its own checkpoint-3, and drops the damaged one."""
    out = tmp_path / "run"
    train(Toy(), toy_data(), toy_collate, toy_config(out, steps=6, save_every=2, keep_checkpoints=2),
          stop_at_step=4)
    assert [p.name for p in list_checkpoints(out)] == ["checkpoint-2", "checkpoint-4"]
    _damage(out / "checkpoint-4" / "model.safetensors", "truncate")
    with pytest.warns(UserWarning, match="checkpoint-4/model.safetensors is damaged"):
        train(Toy(), toy_data(), toy_collate, toy_config(out, steps=6, save_every=2, keep_checkpoints=2),
              resume=True, stop_at_step=3)
    assert [p.name for p in list_checkpoints(out)] == ["checkpoint-2", "checkpoint-3"]
    for checkpoint in list_checkpoints(out):
        load_checkpoint(checkpoint, Toy())  # both intact


def test_retention_counts_only_intact_older_checkpoints(tmp_path):
    """keep 2 of [2 intact, 3 truncated, 4 new]: checkpoint-2 stays beside 4, not the damaged 3."""
    out = tmp_path / "run"
    train(Toy(), toy_data(), toy_collate, toy_config(out, steps=6, keep_checkpoints=3), stop_at_step=3)
    _damage(out / "checkpoint-3" / "training_state.pt", "truncate")
    save_checkpoint(out, 4, Toy(), {"step": 4}, keep_last=2)
    assert [p.name for p in list_checkpoints(out)] == ["checkpoint-2", "checkpoint-4"]


def test_the_command_line_names_a_damaged_file_in_one_line(tmp_path, capsys):
    train(Toy(), toy_data(), toy_collate, toy_config(tmp_path, steps=2))
    for ckpt in list_checkpoints(tmp_path):
        _damage(ckpt / "model.safetensors", "flip")
    assert main(["fill-mask", str(tmp_path), "a [MASK]"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoint-2/model.safetensors is damaged" in err[0]


def test_a_checkpoint_from_before_manifests_loads_with_a_warning(tmp_path):
    train(Toy(), toy_data(), toy_collate, toy_config(tmp_path, steps=2))
    (tmp_path / "checkpoint-2" / MANIFEST_NAME).unlink()
    with pytest.warns(UserWarning, match="no manifest.json .* unverified"):
        state = load_checkpoint(tmp_path / "checkpoint-2", Toy())
    assert state["step"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a plain weights folder (no manifest) loads silently
        load_weights(tmp_path / "checkpoint-2", Toy())


# ---- SIGINT / SIGTERM: stop after a whole step, resume bit for bit --------------------------------
def _pretrain_args(out: Path, vocab: Path) -> list[str]:
    return ["pretrain", "--preset", "tiny", "--corpus", "wiki-en", "--max-documents", "24", "--vocab", str(vocab),
            "--no-progress", "--max-seq-length", "64", "--log-every", "1", "--steps", "10", "--batch-size", "8",
            "--max-eval-examples", "16", "--out", str(out)]


def _bertedu(args, **kw) -> subprocess.Popen:
    # SIGINT as in a terminal, even when these tests run as a background job (which ignores it)
    return subprocess.Popen([sys.executable, "-m", "bertedu.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kw)


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A fixed vocabulary (training one is not deterministic in its tie order)."""
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(minilm_vocab_path().read_text(encoding="utf-8").split("\n")[:3000]) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, small_vocab):
    out = tmp_path_factory.mktemp("whole") / "run"
    proc = _bertedu(_pretrain_args(out, small_vocab))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_after_the_step_and_resume_reproduces_the_run(tmp_path, small_vocab, uninterrupted,
                                                                      signum, status):
    out = tmp_path / "run"
    args = _pretrain_args(out, small_vocab)
    proc = _bertedu(args)
    deadline = time.monotonic() + 300
    while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.02)
    proc.send_signal(signum)  # training has started: at least one step is logged
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == status, err[-2000:]
    step = int(json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])["step"])
    assert 1 <= step < 10
    assert [p.name for p in list_checkpoints(out)] == [f"checkpoint-{step}"]  # the step it finished
    lines = err.strip().splitlines()
    assert lines[-2] == (f"bertedu pretrain: stopped by {signal.Signals(signum).name} after step {step}: "
                         f"checkpoint {out}/checkpoint-{step}")
    resume = lines[-1].removeprefix("resume with: ")
    assert resume.startswith("bertedu pretrain ") and resume.endswith(" --resume") and "Traceback" not in err

    proc = _bertedu(resume.split()[1:])  # the command it printed
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    final = load_file(str(out / "checkpoint-10" / "model.safetensors"))
    expected = load_file(str(uninterrupted / "checkpoint-10" / "model.safetensors"))
    assert final.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(final[name], tensor), name
    losses = lambda run: [(r["step"], r["loss"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
                          if "loss" in r]
    assert losses(out) == losses(uninterrupted)


def test_a_signal_ignored_on_purpose_stays_ignored():
    """nohup, or a script's background job (SIGINT ignored): the run keeps ignoring it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with StopSignals() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == stop._handle
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, previous)


DDP_SIGNAL_SCRIPT = """
import faulthandler, os, signal, sys, time
import torch
faulthandler.enable()  # should a process abort, its threads' Python stacks reach stderr
sys.path.insert(0, {tests!r})
from test_jobs import Toy, toy_data, toy_config
from bertedu.training.jobs import TrainingInterrupted
from bertedu.training.loop import train

calls = []
def collate(examples, generator):
    calls.append(1)
    if os.environ["RANK"] == "1" and len(calls) == 3:
        os.kill(os.getpid(), signal.SIGTERM)  # only process 1 is told to stop, in its third step
    time.sleep(0.05)
    return {{"x": torch.stack([x for x, _ in examples]), "y": torch.tensor([y for _, y in examples])}}

try:
    train(Toy(), toy_data(64), collate, toy_config(sys.argv[1], steps=50, save_every=0, batch_size=2))
except TrainingInterrupted as stop:
    open(os.path.join(sys.argv[1], "stopped-" + os.environ["RANK"]), "w").write(str(stop.step))

# the process group's threads block SIGTERM (bit 15 of SigBlk), so it reaches the main thread
def blocked(task):
    line = [l for l in open(f"/proc/self/task/{{task}}/status") if l.startswith("SigBlk:")][0]
    return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
others = [t for t in os.listdir("/proc/self/task") if int(t) != os.getpid()]
open(os.path.join(sys.argv[1], "threads-" + os.environ["RANK"]), "w").write(
    f"{{len(others)}} {{sum(map(blocked, others))}} {{int(blocked(os.getpid()))}}")
"""


@pytest.mark.slow
def test_under_torchrun_every_process_stops_at_the_same_step(tmp_path):
    script = tmp_path / "ddp_signal.py"
    script.write_text(DDP_SIGNAL_SCRIPT.format(tests=str(Path(__file__).parent)))
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                             str(script), str(tmp_path / "run")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:  # a deadlock: one process waiting in a collective
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the processes did not stop together")
    assert proc.returncode == 0, err[-3000:]
    steps = {(tmp_path / "run" / f"stopped-{r}").read_text() for r in (0, 1)}
    assert steps == {"3"}  # both stopped after step 3, the one process 1 was in
    for r in (0, 1):  # (threads besides the main one, how many block SIGTERM, main blocks it)
        others, blocking, main = map(int, (tmp_path / "run" / f"threads-{r}").read_text().split())
        assert others > 0 and blocking == others and main == 0
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["checkpoint-3"]
