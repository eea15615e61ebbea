"""The QA sliding window, character offsets and span decoding (bertedu.data.qa)."""

import pytest
import torch

from bertedu import BertConfig
from bertedu.data.qa import (best_span, collate_qa, decode_qa, qa_features, tokenize_with_offsets, top_spans,
                             whole_words)
from bertedu.pretrained import minilm_vocab_path
from bertedu.model.tasks import BertForQuestionAnswering
from bertedu.data.tokenizer import load_vocab_tokenizer

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


def test_a_span_inside_a_word_is_widened_to_the_whole_word(fast_tok):
    context = "On the other hand, Huxley's second wife wrote a memoir."
    (f,) = qa_features(fast_tok, "Whose wife?", context)
    i = f.tokens.index("##xley")
    assert f.tokens[i - 1 : i + 1] == ["hu", "##xley"]  # "Huxley" is two pieces
    start_logits, end_logits = torch.zeros(1, len(f)), torch.zeros(1, len(f))
    start_logits[0, i] = end_logits[0, i] = 5.0  # the best span is the continuation piece alone
    pred = decode_qa(start_logits, end_logits, [f], context)
    assert pred.text == "Huxley" and pred.start_char == context.index("Huxley")  # not "xley"
    start_logits[0, i] = 0.0
    start_logits[0, i - 1] = 5.0
    end_logits[0, i], end_logits[0, i - 1] = 0.0, 5.0  # ends on "hu": widened forward to "##xley"
    assert decode_qa(start_logits, end_logits, [f], context).text == "Huxley"
    mask = [True] * 4
    assert whole_words(["a", "##b", "##c", "d"], mask, 1, 1) == (0, 2)
    assert whole_words(["a", "##b", "##c", "d"], [False, True, True, True], 1, 1) == (1, 2)  # never into the question
    assert whole_words(["a", "##b", "##c", "d"], mask, 3, 3) == (3, 3)  # a whole word stays


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
