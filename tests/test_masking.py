"""bertedu.data.masking: the 15% / 80-10-10 rule, special tokens, whole words, reproducibility."""

import pytest
import torch

from bertedu.data import IGNORE_INDEX, mask_tokens, segmented_word_ids, wordpiece_word_ids

# The uncased vocabulary's special ids.
PAD, UNK, CLS, SEP, MASK = 0, 100, 101, 102, 103
V = 30522
SPECIAL_IDS = {PAD, UNK, CLS, SEP, MASK}


def padded_batch(B, T, seed=0, low=1000, high=V):
    """[CLS] tokens [SEP] tokens [SEP] [PAD]...: random real lengths, ids in low..high-1."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(low, high, (B, T), generator=g)
    special = torch.zeros(B, T, dtype=torch.bool)
    lengths = torch.randint(8, T + 1, (B,), generator=g)
    for b, n in enumerate(lengths.tolist()):
        mid = n // 2
        input_ids[b, 0], input_ids[b, mid], input_ids[b, n - 1] = CLS, SEP, SEP
        input_ids[b, n:] = PAD
        special[b, [0, mid, n - 1]] = True
        special[b, n:] = True
    return input_ids, special


def mask(input_ids, special, seed=0, **kwargs):
    kwargs = {"mask_token_id": MASK, "vocab_size": V, "special_ids": SPECIAL_IDS, **kwargs}
    return mask_tokens(input_ids, special, generator=torch.Generator().manual_seed(seed), **kwargs)


def test_statistics_15_percent_and_80_10_10():
    input_ids, special = padded_batch(4000, 128)
    eligible = ~special
    assert eligible.sum() > 200_000
    masked, labels = mask(input_ids, special)
    selected = labels != IGNORE_INDEX
    n = selected.sum().item()
    assert abs(n / eligible.sum().item() - 0.15) < 0.005
    as_mask = (selected & (masked == MASK)).sum().item() / n
    unchanged = (selected & (masked == input_ids)).sum().item() / n
    # "random" = replaced by something other than [MASK]; a random draw equals the original
    # with probability 1/30517, too rare to move these numbers.
    random = (selected & (masked != MASK) & (masked != input_ids)).sum().item() / n
    assert abs(as_mask - 0.80) < 0.01
    assert abs(random - 0.10) < 0.01
    assert abs(unchanged - 0.10) < 0.01


def test_labels_are_the_original_exactly_where_selected():
    input_ids, special = padded_batch(64, 96, seed=3)
    masked, labels = mask(input_ids, special, mlm_probability=0.4)
    selected = labels != IGNORE_INDEX
    assert torch.equal(labels[selected], input_ids[selected])
    assert torch.all(labels[~selected] == IGNORE_INDEX)
    # Nothing changes outside the selected positions, and specials/padding are never selected.
    assert torch.equal(masked[~selected], input_ids[~selected])
    assert not (selected & special).any()
    assert torch.equal(masked[special], input_ids[special])


def test_inputs_are_not_modified():
    input_ids, special = padded_batch(8, 32)
    before = input_ids.clone()
    mask(input_ids, special, mlm_probability=0.9)
    assert torch.equal(input_ids, before)


def test_random_replacements_are_never_special():
    # A tiny vocabulary where most ids are special: a draw from the whole vocabulary would
    # hit one thousands of times.
    vocab_size, specials = 12, {0, 1, 2, 3, 4, 7, 9}
    ordinary = torch.tensor([5, 6, 8, 10, 11])
    g = torch.Generator().manual_seed(1)
    input_ids = ordinary[torch.randint(len(ordinary), (500, 64), generator=g)]
    input_ids[:, 0], input_ids[:, -1] = 2, 3
    special = torch.zeros_like(input_ids, dtype=torch.bool)
    special[:, [0, -1]] = True
    masked, labels = mask_tokens(
        input_ids, special, mask_token_id=4, vocab_size=vocab_size, special_ids=specials,
        mlm_probability=0.5, mask_replace_prob=0.0, random_replace_prob=1.0,
        generator=torch.Generator().manual_seed(0),
    )
    replaced = masked[labels != IGNORE_INDEX]
    assert replaced.numel() > 10_000
    assert not torch.isin(replaced, torch.tensor(sorted(specials))).any()
    # Every allowed id is drawn (uniformly over the 5 ordinary ids).
    assert set(replaced.unique().tolist()) == set(ordinary.tolist())


def test_default_special_ids_are_mask_and_the_batch_specials():
    # Without special_ids, [MASK] and every id at a special position are still excluded.
    vocab_size = 8
    g = torch.Generator().manual_seed(2)
    input_ids = torch.randint(2, 6, (400, 40), generator=g)
    input_ids[:, 0], input_ids[:, -1], input_ids[:, -2] = 6, 7, 0  # [CLS]=6, [SEP]=7, [PAD]=0
    special = torch.zeros_like(input_ids, dtype=torch.bool)
    special[:, [0, -2, -1]] = True
    masked, labels = mask_tokens(
        input_ids, special, mask_token_id=1, vocab_size=vocab_size, mlm_probability=0.5,
        mask_replace_prob=0.0, random_replace_prob=1.0, generator=torch.Generator().manual_seed(0),
    )
    replaced = masked[labels != IGNORE_INDEX]
    assert set(replaced.unique().tolist()) == {2, 3, 4, 5}


def test_trained_vocab_specials_at_0_to_4():
    input_ids, special = padded_batch(200, 64, low=5, high=60)
    input_ids[input_ids == CLS] = 2
    input_ids[input_ids == SEP] = 3
    masked, labels = mask_tokens(
        input_ids, special, mask_token_id=4, vocab_size=60, special_ids=range(5),
        mask_replace_prob=0.0, random_replace_prob=1.0, mlm_probability=0.5,
        generator=torch.Generator().manual_seed(0),
    )
    assert masked[labels != IGNORE_INDEX].min() >= 5


def test_same_seed_same_output_other_seed_other_output():
    input_ids, special = padded_batch(16, 64)
    a = mask(input_ids, special, seed=7)
    b = mask(input_ids, special, seed=7)
    c = mask(input_ids, special, seed=8)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
    # Without a generator the global RNG is used, so torch.manual_seed reproduces it.
    torch.manual_seed(5)
    d = mask_tokens(input_ids, special, mask_token_id=MASK, vocab_size=V)
    torch.manual_seed(5)
    e = mask_tokens(input_ids, special, mask_token_id=MASK, vocab_size=V)
    assert torch.equal(d[0], e[0]) and torch.equal(d[1], e[1])


def test_one_sequence_of_shape_T():
    input_ids, special = padded_batch(1, 50)
    masked, labels = mask(input_ids[0], special[0], mlm_probability=0.5)
    assert masked.shape == labels.shape == (50,)
    batched = mask(input_ids, special, mlm_probability=0.5)
    assert torch.equal(batched[1][0], labels)  # the same draws as a batch of one


def test_exact_selection_count_per_sequence():
    input_ids, special = padded_batch(300, 128, seed=4)
    masked, labels = mask(input_ids, special, selection="exact")
    n = (~special).sum(1)
    expected = torch.floor(n * 0.15 + 0.5).long().clamp(min=1)  # round half up, at least 1
    assert torch.equal((labels != IGNORE_INDEX).sum(1), expected)
    assert not ((labels != IGNORE_INDEX) & special).any()
    # The cap of the original (20 predictions for 128 tokens).
    _, capped = mask(input_ids, special, selection="exact", max_predictions_per_seq=5)
    assert torch.equal((capped != IGNORE_INDEX).sum(1), expected.clamp(max=5))


def test_exact_selection_gives_at_least_one_label():
    input_ids = torch.tensor([[CLS, 2000, SEP, 2001, SEP]])
    special = torch.tensor([[1, 0, 1, 0, 1]], dtype=torch.bool)
    for seed in range(20):
        _, labels = mask(input_ids, special, seed=seed, selection="exact")
        assert (labels != IGNORE_INDEX).sum() == 1


def test_errors_say_what_to_fix():
    input_ids, special = padded_batch(2, 16)
    with pytest.raises(ValueError, match="vocab_size"):
        mask_tokens(input_ids, special, mask_token_id=MASK, vocab_size=1000)
    with pytest.raises(ValueError, match="must match"):
        mask_tokens(input_ids, special[:, :5], mask_token_id=MASK, vocab_size=V)
    with pytest.raises(ValueError, match="selection='exact'"):
        mask(input_ids, special, max_predictions_per_seq=20)
    with pytest.raises(ValueError, match="selection must be"):
        mask(input_ids, special, selection="poisson")
    with pytest.raises(TypeError, match="LongTensor"):
        mask_tokens(input_ids.float(), special, mask_token_id=MASK, vocab_size=V)


# ----------------------------------------------------------------------------------------
# Whole words
# ----------------------------------------------------------------------------------------


def test_wordpiece_word_ids():
    tokens = ["[CLS]", "una", "##ff", "##able", "cafe", "[SEP]", "##s", "the", "[SEP]", "[PAD]"]
    assert wordpiece_word_ids(tokens) == [-1, 0, 0, 0, 1, -1, 2, 3, -1, -1]


def test_segmented_word_ids_for_chinese():
    tokens, word_ids = segmented_word_ids(["中国", "人民", "银行", "在", "北京"])
    assert tokens == list("中国人民银行在北京")
    assert word_ids == [0, 0, 1, 1, 2, 2, 3, 4, 4]
    # With a tokenizer, each word is tokenised on its own; all its pieces share the word id.
    pieces = {"1998年": ["1998", "年"], "中国": ["中", "国"]}
    tokens, word_ids = segmented_word_ids(["1998年", "中国"], tokenize=pieces.__getitem__)
    assert tokens == ["1998", "年", "中", "国"] and word_ids == [0, 0, 1, 1]


def word_batch(B, seed=0):
    """Rows of words of 1..4 pieces: ids, special mask and word ids (-1 on specials)."""
    g = torch.Generator().manual_seed(seed)
    rows_ids, rows_words = [], []
    for _ in range(B):
        ids, words = [CLS], [-1]
        for w in range(torch.randint(10, 30, (1,), generator=g).item()):
            n = torch.randint(1, 5, (1,), generator=g).item()
            ids += torch.randint(1000, V, (n,), generator=g).tolist()
            words += [w] * n
        ids.append(SEP)
        words.append(-1)
        rows_ids.append(ids)
        rows_words.append(words)
    T = max(len(r) for r in rows_ids)
    input_ids = torch.full((B, T), PAD)
    word_ids = torch.full((B, T), -1)
    for b, (ids, words) in enumerate(zip(rows_ids, rows_words)):
        input_ids[b, : len(ids)] = torch.tensor(ids)
        word_ids[b, : len(words)] = torch.tensor(words)
    special = word_ids < 0
    return input_ids, special, word_ids


def words_of(word_ids_row):
    return [(word_ids_row == w).nonzero().squeeze(1) for w in word_ids_row.unique().tolist() if w >= 0]


def test_whole_word_masking_labels_every_piece_of_a_word():
    input_ids, special, word_ids = word_batch(300)
    masked, labels = mask(input_ids, special, word_ids=word_ids)
    selected = labels != IGNORE_INDEX
    n_words = n_selected_words = n_all_mask = 0
    mixed = 0
    for b in range(len(input_ids)):
        for positions in words_of(word_ids[b]):
            chosen = selected[b, positions]
            assert chosen.all() or not chosen.any(), "a word was only partly selected"
            n_words += 1
            if chosen.all():
                n_selected_words += 1
                is_mask = masked[b, positions] == MASK
                n_all_mask += bool(is_mask.all())
                mixed += bool(is_mask.any() and not is_mask.all())
    assert mixed == 0  # the 80/10/10 decision is made per word
    assert abs(n_selected_words / n_words - 0.15) < 0.02
    assert abs(n_all_mask / n_selected_words - 0.80) < 0.04
    assert not (selected & special).any()


def test_per_piece_decision_mixes_pieces_of_a_word():
    # Google's release decides 80/10/10 per piece: some selected words are then half [MASK].
    input_ids, special, word_ids = word_batch(300)
    masked, labels = mask(input_ids, special, word_ids=word_ids, per_word_decision=False)
    selected = labels != IGNORE_INDEX
    mixed = 0
    for b in range(len(input_ids)):
        for positions in words_of(word_ids[b]):
            chosen = selected[b, positions]
            assert chosen.all() or not chosen.any()
            is_mask = masked[b, positions] == MASK
            mixed += bool(chosen.all() and is_mask.any() and not is_mask.all())
    assert mixed > 0


def test_whole_word_exact_selection():
    input_ids, special, word_ids = word_batch(100, seed=1)
    _, labels = mask(input_ids, special, word_ids=word_ids, selection="exact")
    selected = labels != IGNORE_INDEX
    k = torch.floor((~special).sum(1) * 0.15 + 0.5).long()
    counts = selected.sum(1)
    assert (counts <= k).all() and (counts >= 1).all()
    assert (counts == k).float().mean() > 0.9  # a word that does not fit is skipped for a shorter one
    for b in range(len(input_ids)):
        for positions in words_of(word_ids[b]):
            assert selected[b, positions].all() or not selected[b, positions].any()


def test_chinese_words_are_masked_together():
    words = ["中国", "人民", "银行", "在", "北京", "召开", "会议", "。"]
    tokens, word_ids = segmented_word_ids(words)
    chars = sorted(set(tokens))
    vocab = {c: 10 + i for i, c in enumerate(chars)}
    row = [2] + [vocab[t] for t in tokens] + [3]
    wid = [-1] + word_ids + [-1]
    input_ids = torch.tensor([row] * 500)
    word_ids_t = torch.tensor([wid] * 500)
    special = word_ids_t < 0
    _, labels = mask_tokens(
        input_ids, special, mask_token_id=4, vocab_size=10 + len(chars), special_ids=range(5),
        word_ids=word_ids_t, generator=torch.Generator().manual_seed(0),
    )
    selected = labels != IGNORE_INDEX
    assert selected.any()
    for w in set(word_ids):
        cols = [j for j, x in enumerate(wid) if x == w]
        together = selected[:, cols]
        assert torch.equal(together.all(1), together.any(1)), f"word {words[w]} split"


def test_word_ids_as_lists_with_none():
    tokens = ["[CLS]", "una", "##ff", "##able", "cafe", "[SEP]"]
    input_ids = torch.tensor([CLS, 2000, 2001, 2002, 2003, SEP])
    special = torch.tensor([1, 0, 0, 0, 0, 1], dtype=torch.bool)
    word_ids = [None if w < 0 else w for w in wordpiece_word_ids(tokens)]
    for seed in range(30):
        _, labels = mask(input_ids, special, seed=seed, word_ids=word_ids, mlm_probability=0.5)
        chosen = (labels[1:4] != IGNORE_INDEX).tolist()
        assert chosen in ([True] * 3, [False] * 3)
    with pytest.raises(ValueError, match="word_ids"):
        mask(input_ids, special, word_ids=[-1, 0, 0, -1, 1, -1])  # an eligible token without a word


# ----------------------------------------------------------------------------------------
# A whole batch of pairs masked at once (PretrainingDataset.masked_batch, issue 52 item 3)


def pairs_dataset(seed=0):
    import random

    from bertedu.data.pretraining import PretrainingDataset, create_pretraining_examples

    rng = random.Random(0)
    documents = [[[rng.randrange(5, 60) for _ in range(rng.randrange(4, 12))] for _ in range(6)] for _ in range(8)]
    examples = create_pretraining_examples(documents, 32, 0.1, 0.5, random.Random(0), cls_token_id=2, sep_token_id=3)
    return PretrainingDataset(examples, mask_token_id=4, vocab_size=60, special_ids=[0, 1, 2, 3, 4], seed=seed)


def test_a_batch_masked_at_once_is_reproducible_for_a_seed():
    dataset = pairs_dataset()
    indices = [3, 0, 7, 5]
    batch = dataset.masked_batch(indices)
    again = pairs_dataset().masked_batch(indices)
    for key in batch:
        assert torch.equal(batch[key], again[key]), key
    other_seed = pairs_dataset(seed=1).masked_batch(indices)
    assert not torch.equal(batch["labels"], other_seed["labels"])
    # the per-example path (the default) is what it was: each pair with its own generator
    per_example = dataset.collate([dataset[i] for i in indices])
    assert torch.equal(per_example["attention_mask"], batch["attention_mask"])
    assert torch.equal(per_example["token_type_ids"], batch["token_type_ids"])
    real = batch["attention_mask"].bool()
    labelled = batch["labels"] != IGNORE_INDEX
    assert labelled.any() and not (labelled & ~real).any()  # padding is never a label
    originals = dataset.collate([{**dataset[i], "input_ids": torch.tensor(dataset.examples[i].input_ids),
                                  "labels": torch.tensor(dataset.examples[i].input_ids)} for i in indices])
    assert torch.equal(batch["labels"][labelled], originals["input_ids"][labelled])  # labels are the originals
