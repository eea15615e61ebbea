"""The fine-tuning heads (tagging data: test_tagging.py; QA windows and decoding: test_qa.py)."""

import pytest
import torch
import torch.nn.functional as F

from bertedu import BertConfig, BertForPreTraining, BertModel
from bertedu.model.tasks import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    freeze_encoder,
    mean_pool,
)
from conftest import ragged_batch

V = 100
CONFIG = BertConfig.tiny(vocab_size=V, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


# ---------------------------------------------------------------------------------------
# Heads
# ---------------------------------------------------------------------------------------


def test_head_output_shapes():
    ids, types, mask = ragged_batch(V)  # (4, 9)
    B, T = ids.shape
    seq = BertForSequenceClassification(CONFIG, num_labels=3)(ids, types, mask, output_hidden_states=True)
    assert seq.logits.shape == (B, 3) and len(seq.hidden_states) == CONFIG.num_hidden_layers + 1
    tagger = BertForTokenClassification(CONFIG, num_labels=5)(ids, types, mask, output_attentions=True)
    assert tagger.logits.shape == (B, T, 5) and tagger.attentions[0].shape == (B, 2, T, T)
    qa = BertForQuestionAnswering(CONFIG)(ids, types, mask)
    assert qa.start_logits.shape == qa.end_logits.shape == (B, T)
    assert seq.loss is None and tagger.loss is None and qa.loss is None


def test_sequence_classification_loss_and_pairs():
    ids, types, mask = ragged_batch(V)
    model = BertForSequenceClassification(CONFIG, num_labels=3).eval()
    labels = torch.tensor([0, 2, 1, 2])
    out = model(ids, types, mask, labels=labels)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels))
    # The pair's segments matter: the same tokens with other token_type_ids score differently.
    other = model(ids, torch.zeros_like(types), mask)
    assert not torch.allclose(out.logits, other.logits, atol=1e-4)


def test_regression_uses_mse():
    ids, types, mask = ragged_batch(V)
    model = BertForSequenceClassification(CONFIG, num_labels=1)
    scores = torch.tensor([0.5, 4.0, 2.5, 1.0])
    out = model(ids, types, mask, labels=scores)
    assert out.logits.shape == (4, 1)
    torch.testing.assert_close(out.loss, F.mse_loss(out.logits.squeeze(-1), scores))


def test_mean_pooling_ignores_padding():
    h = torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    pooled = mean_pool(h, mask)
    torch.testing.assert_close(pooled[0], h[0, :3].mean(0))
    h2 = h.clone()
    h2[0, 3:] = 100.0  # whatever sits on padding does not matter
    torch.testing.assert_close(mean_pool(h2, mask), pooled)
    # A classifier with mean pooling works on an encoder without a pooler.
    encoder = BertModel(CONFIG, add_pooler=False)
    model = BertForSequenceClassification.from_encoder(encoder, num_labels=2, pooling="mean")
    ids, types, mask = ragged_batch(V)
    assert model(ids, types, mask).logits.shape == (4, 2)
    with pytest.raises(ValueError, match="pooling='mean'"):
        BertForSequenceClassification.from_encoder(encoder, num_labels=2)


def test_token_classification_loss_ignores_minus_100():
    ids, types, mask = ragged_batch(V)
    model = BertForTokenClassification(CONFIG, num_labels=4).eval()
    labels = torch.randint(0, 4, ids.shape)
    labels[:, 0] = -100  # [CLS]
    labels[1, 3:] = -100
    out = model(ids, types, mask, labels=labels)
    keep = (labels != -100) & (mask == 1)
    expected = F.cross_entropy(out.logits[keep], labels[keep])
    torch.testing.assert_close(out.loss, expected)
    # Labels on padding do not count even when they are not -100.
    labels_on_padding = labels.masked_fill(mask == 0, 3)
    torch.testing.assert_close(model(ids, types, mask, labels=labels_on_padding).loss, expected)
    # Nothing labelled: a zero loss that still backpropagates, not NaN.
    empty = model(ids, types, mask, labels=torch.full_like(labels, -100)).loss
    assert empty.item() == 0.0
    empty.backward()


def test_qa_loss_averages_start_and_end_and_ignores_outside_positions():
    ids, types, mask = ragged_batch(V)
    model = BertForQuestionAnswering(CONFIG).eval()
    starts, ends = torch.tensor([1, 0, 4, 2]), torch.tensor([3, 0, 5, 2])
    out = model(ids, types, mask, start_positions=starts, end_positions=ends)
    expected = (F.cross_entropy(out.start_logits, starts) + F.cross_entropy(out.end_logits, ends)) / 2
    torch.testing.assert_close(out.loss, expected)
    # A position past the sequence (T = 9) is ignored.
    outside = torch.tensor([1, 0, 4, 99]), torch.tensor([3, 0, 5, 99])
    far = model(ids, types, mask, start_positions=outside[0], end_positions=outside[1])
    expected = (F.cross_entropy(out.start_logits[:3], starts[:3]) + F.cross_entropy(out.end_logits[:3], ends[:3])) / 2
    torch.testing.assert_close(far.loss, expected)


def test_from_encoder_shares_the_pretrained_weights():
    pretrained = BertForPreTraining(CONFIG)
    model = BertForTokenClassification.from_encoder(pretrained, num_labels=3)
    assert model.bert is pretrained.bert and model.training
    ids, types, mask = ragged_batch(V)
    pretrained.eval(), model.eval()
    torch.testing.assert_close(
        model.bert(ids, types, mask).last_hidden_state, pretrained.bert(ids, types, mask).last_hidden_state
    )
    with pytest.raises(TypeError, match="BertModel"):
        BertForQuestionAnswering.from_encoder(torch.nn.Linear(2, 2))


def test_classifier_on_the_real_minilm_encoder(tok):
    from bertedu.interop import load_minilm

    encoder = load_minilm()
    model = BertForSequenceClassification.from_encoder(encoder, num_labels=2).eval()
    assert model.bert is encoder and model.config.hidden_size == 384
    batch = tok.encode_batch([("A man plays a guitar.", "Someone plays music."), ("Hi.", "Bye.")])
    out = model(**batch, labels=torch.tensor([1, 0]))
    assert out.logits.shape == (2, 2) and torch.isfinite(out.loss)
    # The head reads the pooler: [CLS] through MiniLM's trained dense + tanh.
    pooled = encoder(**batch).pooler_output
    torch.testing.assert_close(out.logits, model.classifier(pooled))


def test_freeze_encoder_trains_only_the_head():
    ids, types, mask = ragged_batch(V)
    model = BertForSequenceClassification(BertConfig.tiny(vocab_size=V), num_labels=2, pooling="mean")
    n_frozen = freeze_encoder(model)
    assert n_frozen == model.bert.num_parameters()
    assert model.num_parameters(trainable_only=True) == 128 * 2 + 2  # the linear head only
    model.train()
    assert model.training and not model.bert.training  # no dropout inside a frozen encoder
    before = {k: v.clone() for k, v in model.bert.state_dict().items()}
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    model(ids, types, mask, labels=torch.tensor([0, 1, 0, 1])).loss.backward()
    assert all(p.grad is None for p in model.bert.parameters())
    assert model.classifier.weight.grad is not None
    optimizer.step()
    assert all(torch.equal(before[k], v) for k, v in model.bert.state_dict().items())
    freeze_encoder(model, frozen=False)
    assert model.bert.training and all(p.requires_grad for p in model.bert.parameters())


@pytest.mark.slow
def test_tiny_classifier_overfits_a_small_batch():
    torch.manual_seed(0)
    ids, types, mask = ragged_batch(V, lengths=(9, 5, 7, 2, 8, 6, 3, 9))
    labels = torch.tensor([0, 1, 2, 1, 0, 2, 1, 0])
    model = BertForSequenceClassification(CONFIG, num_labels=3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(30):
        optimizer.zero_grad()
        loss = model(ids, types, mask, labels=labels).loss
        loss.backward()
        optimizer.step()
    model.eval()
    out = model(ids, types, mask, labels=labels)
    assert out.loss.item() < 0.05
    assert torch.equal(out.logits.argmax(-1), labels)
