"""The shipped checkpoint of the plateau climb (bertedu/weights/plateau-climb-5500), which the
appendix to notebook 06 resumes: intact by its manifest's sha256, the record's run at step 5,500,
and a damaged copy refused before anything loads."""

import json
import shutil
from importlib.resources import files
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from bertedu import BertConfig, BertForPreTraining
from bertedu.training.checkpoint import (DamagedCheckpointError, load_checkpoint, load_weights, read_config,
                                        verify_folder)

SHIPPED = Path(str(files("bertedu").joinpath("weights/plateau-climb-5500")))
RECORD = json.loads(files("bertedu").joinpath("weights/plateau_climb.json").read_text(encoding="utf-8"))


def test_the_shipped_checkpoint_is_intact_and_is_the_records_run_at_step_5500():
    assert verify_folder(SHIPPED, warn_unverified=False)  # every file's size and sha256 as its manifest says
    state = torch.load(SHIPPED / "training_state.pt", map_location="cpu", weights_only=True)
    assert state["step"] == 5500 and state["global_batch"] == RECORD["settings"]["batch_size"]
    trained_with = json.loads((SHIPPED / "train_config.json").read_text(encoding="utf-8"))
    for key in ("lr", "steps", "seed", "batch_size", "warmup_ratio", "weight_decay", "precision"):
        assert trained_with[key] == RECORD["settings"][key], key
    assert "plateau_climb.py" in (SHIPPED / "COMMAND.md").read_text(encoding="utf-8")


def test_a_damaged_copy_is_refused_before_loading(tmp_path):
    copy = tmp_path / "checkpoint-5500"
    shutil.copytree(SHIPPED, copy)
    weights = bytearray((copy / "model.safetensors").read_bytes())
    weights[-1] ^= 1  # one bit of the last weight
    (copy / "model.safetensors").write_bytes(bytes(weights))
    model = BertForPreTraining(BertConfig(**read_config(SHIPPED)))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(DamagedCheckpointError, match="sha256"):
        load_checkpoint(copy, model)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # nothing was loaded


@pytest.mark.slow
def test_its_weights_score_the_records_held_out_loss_at_step_5500():
    """Rebuild the record's held-out set from its settings: the loss at [MASK] is the record's."""
    from bertedu.data import collate_pretraining
    from bertedu.data.tokenizer import load_vocab_tokenizer
    from bertedu.training.pretrain import PretrainConfig, heldout_dataset

    vocab = str(files("bertedu").joinpath("weights/course-en/vocab.txt"))
    cfg = PretrainConfig(**{**RECORD["settings"], "vocab": vocab, "out": None})
    tokenizer = load_vocab_tokenizer(vocab, impl="fast")
    held_out = heldout_dataset(cfg, tokenizer)
    batch = collate_pretraining([held_out[i] for i in range(len(held_out))], pad_token_id=tokenizer.pad_token_id)
    at_mask = (batch["labels"] != -100) & (batch["input_ids"] == tokenizer.mask_token_id)
    assert int(at_mask.sum()) == RECORD["held_out"]["mask_positions"]
    model = load_weights(SHIPPED, BertForPreTraining(BertConfig(**read_config(SHIPPED)))).eval()
    with torch.no_grad():
        h = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).last_hidden_state
        loss = F.cross_entropy(model.mlm(h[at_mask]), batch["labels"][at_mask]).item()
    recorded = next(r["loss_mask"] for r in RECORD["steps"] if r["step"] == 5500)
    assert abs(loss - recorded) < 1e-3, (loss, recorded)
