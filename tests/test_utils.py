import random

import pytest
import torch

from bertedu.utils import course_scale, seed_everything


def test_seed_everything_makes_draws_repeat():
    seed_everything(5)
    a = (random.random(), torch.rand(3))
    g = seed_everything(5)
    b = (random.random(), torch.rand(3))
    assert a[0] == b[0] and torch.equal(a[1], b[1])
    assert torch.equal(torch.rand(2, generator=g), torch.rand(2, generator=torch.Generator().manual_seed(5)))


def test_course_scale_switch(monkeypatch):
    monkeypatch.setenv("BERTEDU_SCALE", "gpu")
    assert course_scale() == "gpu"
    monkeypatch.setenv("BERTEDU_SCALE", "CPU")
    assert course_scale() == "cpu"
    monkeypatch.delenv("BERTEDU_SCALE")
    assert course_scale() == ("gpu" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("BERTEDU_SCALE", "tpu")
    with pytest.raises(ValueError, match="BERTEDU_SCALE"):
        course_scale()


def test_resolve_device(monkeypatch):
    """`--device`: the GPU when PyTorch sees one (this process's under torchrun), else the CPU;
    a GPU the machine lacks, or a name PyTorch does not know, is a SettingError saying so."""
    from bertedu.errors import SettingError
    from bertedu.utils import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device(None) == torch.device("cpu") == resolve_device("cpu")
    with pytest.raises(SettingError, match=r"--device cuda: this machine has no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(SettingError, match=r"--device gpu: not a device PyTorch knows"):
        resolve_device("gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device(None, local_rank=1) == torch.device("cuda:1") == resolve_device("cuda", local_rank=1)
    assert resolve_device("cuda:0", local_rank=1) == torch.device("cuda:0")
    with pytest.raises(SettingError, match=r"--device cuda:2: this machine has 2 CUDA GPU\(s\), numbered from 0"):
        resolve_device("cuda:2")


def test_written_files_follow_the_umask(tmp_path):
    """Weights and vocabularies are readable as the user's umask says (issue 53 item 7): mkstemp and
    safetensors create files 0600, which left a shared run's weights private to their owner."""
    import os
    import stat

    from bertedu import BertConfig, BertForPreTraining
    from bertedu.data.tokenizer import write_vocab
    from bertedu.training.checkpoint import save_weights

    old = os.umask(0o022)
    try:
        vocab = write_vocab(["[PAD]", "[UNK]", "a"], tmp_path / "vocab.txt")
        folder = save_weights(tmp_path / "model", BertForPreTraining(BertConfig.tiny(vocab_size=8)))
    finally:
        os.umask(old)
    for path in (vocab, folder / "model.safetensors"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path.name
