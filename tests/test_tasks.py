"""The fine-tuning heads, word/piece label alignment, span decoding and the QA window."""

import pytest
import torch
import torch.nn.functional as F

from bertedu import BertConfig, BertForPreTraining, BertModel
from bertedu.pretrained import minilm_vocab_path
from bertedu.tasks import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    align_word_labels,
    best_span,
    collate_qa,
    decode_qa,
    encode_words,
    freeze_encoder,
    mean_pool,
    qa_features,
    tokenize_with_offsets,
    top_spans,
    word_predictions,
)
from bertedu.tokenizer import load_vocab_tokenizer
from conftest import ragged_batch

V = 100
CONFIG = BertConfig.tiny(vocab_size=V, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def tok():
    return load_vocab_tokenizer(minilm_vocab_path())


@pytest.fixture(scope="module")
def fast_tok():
    return load_vocab_tokenizer(minilm_vocab_path(), impl="fast")


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


# ---------------------------------------------------------------------------------------
# Words and pieces
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("impl", ["reference", "fast"])
def test_word_labels_go_to_the_first_piece(impl):
    tok = load_vocab_tokenizer(minilm_vocab_path(), impl=impl)
    words = ["The", "unaffable", "Zoë", "left", "."]
    enc = encode_words(tok, words, pad_to=12)
    assert enc.tokens[:9] == ["[CLS]", "the", "una", "##ffa", "##ble", "zoe", "left", ".", "[SEP]"]
    assert enc.word_ids == [None, 0, 1, 1, 1, 2, 3, 4, None, None, None, None]
    assert enc.attention_mask == [1] * 9 + [0] * 3
    labels = align_word_labels(enc.word_ids, [0, 3, 1, 0, 0])
    assert labels == [-100, 0, 3, -100, -100, 1, 0, 0, -100, -100, -100, -100]
    # The way back: each word takes its first piece's prediction (here, its label).
    logits = F.one_hot(torch.tensor([0 if y == -100 else y for y in labels]), 4).float()  # (T, 4)
    logits[3] = logits[4] = F.one_hot(torch.tensor(2), 4).float()  # other pieces disagree: ignored
    assert word_predictions(logits, enc.word_ids) == [0, 3, 1, 0, 0]


def test_truncated_words_get_the_fill_value(tok):
    enc = encode_words(tok, ["unaffable", "cat", "dog"], max_length=5)  # [CLS] una ##ffa ##ble [SEP]
    assert enc.word_ids == [None, 0, 0, 0, None]
    assert word_predictions([9, 7, 8, 8, 9], enc.word_ids, num_words=3, fill=0) == [7, 0, 0]
    with pytest.raises(TypeError, match="ids"):
        align_word_labels(enc.word_ids, ["B-PER", "O", "O"])


# ---------------------------------------------------------------------------------------
# Span decoding
# ---------------------------------------------------------------------------------------


def test_best_span_respects_order_length_and_context():
    def logits(**high):
        x = torch.full((10,), -10.0)
        for i, v in high.items():
            x[int(i[1:])] = v
        return x

    # The best start (6) lies after the best end (3): no span; the best valid one wins.
    assert best_span(logits(p6=9.0, p4=5.0), logits(p3=9.0, p5=4.0)) == (4, 5, 9.0)
    # The highest-scoring pair (1, 8) is 8 tokens long.
    start, end = logits(p1=5.0, p4=3.0, p7=1.0), logits(p8=5.0, p5=3.0)
    assert best_span(start, end) == (1, 8, 10.0)
    assert best_span(start, end, max_answer_length=3) == (4, 5, 6.0)
    # Tokens 0-4 are the question and specials: the answer must lie in 5..9.
    context = torch.tensor([False] * 5 + [True] * 5)
    assert best_span(start, end, context_mask=context) == (7, 8, 6.0)
    with pytest.raises(ValueError, match="no valid"):
        best_span(start, end, context_mask=torch.zeros(10, dtype=torch.bool))


def test_top_spans_are_the_best_valid_pairs():
    g = torch.Generator().manual_seed(0)
    start, end = torch.randn(25, generator=g), torch.randn(25, generator=g)
    brute = sorted(
        ((i, j, float(start[i] + end[j])) for i in range(25) for j in range(i, min(25, i + 4))),
        key=lambda x: -x[2],
    )
    spans = top_spans(start, end, max_answer_length=4, n_best=5)
    assert [(s, e) for s, e, _ in spans] == [(s, e) for s, e, _ in brute[:5]]
    assert [x[2] for x in spans] == pytest.approx([x[2] for x in brute[:5]])


# ---------------------------------------------------------------------------------------
# Offsets and the sliding window
# ---------------------------------------------------------------------------------------

ZOE = "Zoë visited Café Müller in 1998."


@pytest.mark.parametrize("impl", ["reference", "fast"])
def test_offsets_point_into_the_original_text(impl):
    tok = load_vocab_tokenizer(minilm_vocab_path(), impl=impl)
    tokens, offsets = tokenize_with_offsets(tok, ZOE)
    assert tokens == tok.tokenize(ZOE) == ["zoe", "visited", "cafe", "muller", "in", "1998", "."]
    assert [ZOE[a:b] for a, b in offsets] == ["Zoë", "visited", "Café", "Müller", "in", "1998", "."]
    text = "Ｎaïve  北京\u00a0Straße"  # full-width letter, CJK, no-break space
    tokens, offsets = tokenize_with_offsets(tok, text)
    assert tokens == tok.tokenize(text)
    assert [text[a:b] for a, b in offsets][:3] == ["Ｎaïve", "北", "京"]


@pytest.mark.parametrize("impl", ["reference", "fast"])
def test_decoded_answer_is_the_exact_original_substring(impl):
    tok = load_vocab_tokenizer(minilm_vocab_path(), impl=impl)
    start = ZOE.index("Café")
    (f,) = qa_features(tok, "Where did Zoë go?", ZOE, answer_start=start, answer_text="Café Müller")
    assert f.tokens[f.start_position : f.end_position + 1] == ["cafe", "muller"]
    assert f.token_type_ids == [0] * (f.tokens.index("[SEP]") + 1) + [1] * (len(f) - f.tokens.index("[SEP]") - 1)
    start_logits, end_logits = torch.zeros(1, len(f)), torch.zeros(1, len(f))
    start_logits[0, f.start_position] = end_logits[0, f.end_position] = 5.0
    start_logits[0, 1] = end_logits[0, 1] = 20.0  # "where", in the question: never an answer
    pred = decode_qa(start_logits, end_logits, [f], ZOE)
    assert (pred.text, pred.start_char, pred.end_char) == ("Café Müller", start, start + len("Café Müller"))
    assert pred.score == 10.0


def long_context(n=40):
    return " ".join(f"Sentence {i} mentions the town of Ålesund and café number {i}." for i in range(n))


def test_sliding_window_covers_a_long_context(fast_tok):
    context = long_context()
    tokens, _ = tokenize_with_offsets(fast_tok, context)
    features = qa_features(fast_tok, "Which town?", context, max_seq_length=64, doc_stride=24)
    assert len(tokens) > 64 and len(features) > 2
    covered = set()
    owners = {}
    for f in features:
        assert len(f) <= 64 and f.tokens[0] == "[CLS]" and f.tokens[-1] == "[SEP]"
        for t, (off, mc) in enumerate(zip(f.offsets, f.max_context)):
            if off is not None:
                covered.add(off)
                assert f.token_type_ids[t] == 1
                owners[off] = owners.get(off, 0) + mc
    _, all_offsets = tokenize_with_offsets(fast_tok, context)
    assert covered == set(all_offsets)  # every context token is in some window
    assert set(owners.values()) == {1}  # and is the max-context token of exactly one window


def test_answer_in_the_second_window_is_found(fast_tok):
    context = long_context(12)
    answer = "café number 7"
    answer_start = context.index(answer)
    features = qa_features(fast_tok, "Which café?", context, max_seq_length=48, doc_stride=20,
                           answer_start=answer_start, answer_text=answer)
    holding = [f.window for f in features if f.start_position != 0]
    assert holding and holding[0] >= 1 and features[0].start_position == 0  # not in the first window
    w = holding[0]
    # Hand-made logits: everywhere mildly positive, the answer's ends strongly so in window w.
    batch = collate_qa(features)
    start_logits = torch.full(batch["input_ids"].shape, 0.5)
    end_logits = torch.full(batch["input_ids"].shape, 0.5)
    start_logits[w, features[w].start_position] = 6.0
    end_logits[w, features[w].end_position] = 6.0
    pred = decode_qa(start_logits, end_logits, features, context)
    assert pred.text == answer and pred.window == w and pred.start_char == answer_start
    # The training targets point at those tokens; the model trains on the batch.
    assert batch["start_positions"][w] == features[w].start_position
    model = BertForQuestionAnswering(BertConfig.tiny(vocab_size=fast_tok.vocab_size))
    assert torch.isfinite(model(**batch).loss)


def test_qa_feature_errors(tok):
    with pytest.raises(ValueError, match="answer_start"):
        qa_features(tok, "q?", ZOE, answer_start=3, answer_text="Café")
    with pytest.raises(ValueError, match="max_seq_length"):
        qa_features(tok, "a very long question indeed", ZOE, max_seq_length=8)
