"""Loading a saved model builds it on the meta device and assigns the saved tensors (issue 53 item 6):
the loaded model must hold exactly what the old build-then-overwrite path gave."""

import pytest
import torch

from bertedu.interop import _convert_state_dict, _load_exact, load_minilm
from bertedu.model.config import BertConfig
from bertedu.model.encoder import BertModel
from bertedu.model.heads import BertForPreTraining
from bertedu.model.tasks import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from bertedu.pretrained import minilm_dir
from bertedu.training.checkpoint import CheckpointError, load_weights, load_weights_into_new, save_weights

CONFIG = BertConfig.tiny()
BUILDERS = {
    "pretraining": lambda: BertForPreTraining(CONFIG),
    "classification": lambda: BertForSequenceClassification(CONFIG, num_labels=3),
    "tagging-crf": lambda: BertForTokenClassification(CONFIG, num_labels=5, head="crf"),
    "qa": lambda: BertForQuestionAnswering(CONFIG),
}


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]), k
    assert [n for n, p in a.named_parameters() if p.requires_grad] == [n for n, p in b.named_parameters() if p.requires_grad]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_meta_load_equals_build_then_overwrite(kind, tmp_path):
    torch.manual_seed(1)
    saved = BUILDERS[kind]()
    save_weights(tmp_path / "model", saved)
    old = load_weights(tmp_path / "model", BUILDERS[kind]()).eval()
    new = load_weights_into_new(tmp_path / "model", BUILDERS[kind]).eval()
    _same(old, new)
    assert not any(p.is_meta for p in new.parameters()) and not any(b.is_meta for b in new.buffers())
    ids = torch.randint(5, CONFIG.vocab_size, (2, 7))
    with torch.no_grad():
        out_old, out_new = old(ids), new(ids)
    for name in ("logits", "mlm_logits", "start_logits"):
        if hasattr(out_old, name):
            assert torch.equal(getattr(out_old, name), getattr(out_new, name))


def test_meta_load_keeps_the_mlm_decoder_tied(tmp_path):
    save_weights(tmp_path / "model", BertForPreTraining(CONFIG))
    model = load_weights_into_new(tmp_path / "model", BUILDERS["pretraining"])
    assert model.mlm.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.num_parameters() == BertForPreTraining(CONFIG).num_parameters()


def test_meta_load_refuses_weights_of_another_shape(tmp_path):
    save_weights(tmp_path / "model", BertForSequenceClassification(CONFIG, num_labels=3))
    with pytest.raises(CheckpointError, match="do not fit"):
        load_weights_into_new(tmp_path / "model", lambda: BertForSequenceClassification(CONFIG, num_labels=4))


def test_minilm_loads_the_same_numbers_as_build_then_overwrite():
    from safetensors.torch import load_file

    config = BertConfig.from_hf(__import__("json").loads((minilm_dir() / "config.json").read_text()))
    raw = load_file(str(minilm_dir() / "model.safetensors"))
    raw = {k[len("bert."):] if k.startswith("bert.") else k: v for k, v in raw.items()}
    old = BertModel(config, add_pooler=any(k.startswith("pooler.") for k in raw))
    _load_exact(old, _convert_state_dict(raw))
    _same(old.eval(), load_minilm())
