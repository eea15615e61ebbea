"""Byte-level BPE (RoBERTa's vocabulary kind) in the library: trained with `tokenizers`, read
as transformers' RobertaTokenizer reads it, lossless on any text, and a `bertedu pretrain`
vocabulary whose run fine-tunes, fills in masks and exports like a WordPiece one."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bertedu.cli import main
from bertedu.data.vocab import build_bpe_vocab
from bertedu.data.tokenizer import (
    SPECIAL_TOKENS,
    ByteLevelBPETokenizer,
    WordPieceTokenizer,
    load_merges,
    load_vocab_tokenizer,
    train_byte_level_bpe,
)
from conftest import tiny_sentence_task

TEXTS = ["The capital of France is Paris.", "Hello  wörld, naïve café!", "中国的首都是北京。", "emoji 😀 and tabs\tand\nlines",
         "the [MASK] sat on the mat.", "[MASK] first, then words", "unaffable UNAFFABLE Unaffable"]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bpe")
    path = build_bpe_vocab("wiki-en", 800, folder, max_documents=60)
    return path, load_vocab_tokenizer(path, impl="fast")


def test_the_vocabulary_is_specials_then_bytes_then_merges(bpe):
    from tokenizers import pre_tokenizers

    path, tok = bpe
    tokens = path.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(tokens) == 800 and tuple(tokens[:5]) == SPECIAL_TOKENS
    assert set(pre_tokenizers.ByteLevel.alphabet()) <= set(tokens)  # every byte has a piece: no [UNK] needed
    assert path.with_name("merges.txt").read_text(encoding="utf-8").startswith("#version: 0.2\n")
    merges = load_merges(path.with_name("merges.txt"))
    assert all(a + b in tok.vocab for a, b in merges)  # each merge made a piece of the vocabulary
    assert isinstance(tok, ByteLevelBPETokenizer) and not tok.lowercase
    assert "Ġthe" in tok.vocab  # the space marker


def test_a_vocabulary_without_merges_is_still_wordpiece(tmp_path, bpe):
    path, _ = bpe
    (tmp_path / "vocab.txt").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    tok = load_vocab_tokenizer(tmp_path / "vocab.txt", impl="fast")
    assert isinstance(tok, WordPieceTokenizer) and not isinstance(tok, ByteLevelBPETokenizer)


def test_same_pieces_and_ids_as_transformers_roberta_tokenizer(bpe):
    from tokenizers import AddedToken
    from transformers import RobertaTokenizer

    path, tok = bpe
    reference = RobertaTokenizer(
        vocab=dict(tok.vocab), merges=load_merges(path.with_name("merges.txt")), add_prefix_space=True,
        bos_token="[CLS]", eos_token="[SEP]", sep_token="[SEP]", cls_token="[CLS]", unk_token="[UNK]",
        pad_token="[PAD]", mask_token=AddedToken("[MASK]", lstrip=True),  # as RoBERTa's <mask>
    )
    for text in TEXTS:
        ids = reference(text, add_special_tokens=False)["input_ids"]
        assert tok.tokenize(text) == reference.convert_ids_to_tokens(ids), text
        assert tok.encode(text).input_ids == reference(text)["input_ids"], text
    pair = tok.encode("A first text.", "A second one.")
    assert pair.tokens[0] == "[CLS]" and pair.tokens.count("[SEP]") == 2  # BERT's layout of a pair


def test_mask_takes_the_space_before_it(bpe):
    _, tok = bpe
    pieces = tok.tokenize("the [MASK] sat")
    assert pieces[:2] == ["Ġthe", "[MASK]"] and pieces[2].startswith("Ġ")  # no lone "Ġ" before the mask
    ids = tok.encode("is [MASK].").input_ids
    assert ids.count(tok.mask_token_id) == 1 and tok.unk_token_id not in ids


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=1, max_size=60).filter(lambda t: not t[0].isspace() and "[" not in t))
def test_any_text_round_trips_without_unk(bpe, text):
    _, tok = bpe
    ids = tok.encode(text).input_ids
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


def test_a_too_small_vocabulary_is_refused(tmp_path):
    with pytest.raises(ValueError, match="261 pieces"):
        train_byte_level_bpe(["some text"], 100, tmp_path)


@pytest.mark.slow
def test_pretrain_finetune_and_export_with_a_bpe_vocabulary(tmp_path, capsys):
    from bertedu.training.pretrain import load_pretrained
    from bertedu.pretrained import load_masked_lm_folder
    from bertedu.training.ship import ship_pretrain_run

    run = tmp_path / "roberta"
    args = ["pretrain", "--preset", "tiny", "--steps", "2", "--batch-size", "4", "--corpus", "wiki-en",
            "--max-documents", "12", "--vocab-size", "600", "--no-progress", "--max-seq-length", "48",
            "--no-nsp", "--packing", "full-sentences"]
    assert main([*args, "--vocab-kind", "bpe", "--out", str(run)]) == 0
    assert (run / "merges.txt").is_file()
    model, tok = load_pretrained(run)
    assert isinstance(tok, ByteLevelBPETokenizer) and model.config.vocab_size == len(tok) == 600
    assert main(["fill-mask", str(run), "The capital of France is [MASK]."]) == 0
    assert "[MASK] 1:" in capsys.readouterr().out

    # whole-word masking needs WordPiece's ## marks; a BPE --vocab and --vocab-kind together are ambiguous
    for extra, says in [(["--vocab-kind", "bpe", "--whole-word"], "whole_word"),
                        (["--vocab-kind", "bpe", "--vocab", str(run / "vocab.txt")], "vocab_kind"),
                        (["--vocab", str(run / "vocab.txt"), "--whole-word"], "## marks")]:
        assert main([*args, *extra, "--out", str(tmp_path / "refused")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err

    # fine-tuning from the run copies both files, so the task model reads text as pretraining did
    sst = tiny_sentence_task(tmp_path / "sst")
    ft = tmp_path / "ft"
    assert main(["finetune", "--task", sst, "--init", str(run), "--out", str(ft), "--steps", "2",
                 "--batch-size", "4", "--no-progress"]) == 0
    assert (ft / "merges.txt").read_bytes() == (run / "merges.txt").read_bytes()

    shipped = ship_pretrain_run(run, tmp_path / "shipped", command="bertedu pretrain ...")
    manifest = json.loads((shipped / "manifest.json").read_text(encoding="utf-8"))
    assert "merges.txt" in manifest["files"]  # sha256-checked like the weights
    _, shipped_tok = load_masked_lm_folder(shipped)
    assert shipped_tok.tokenize(TEXTS[1]) == tok.tokenize(TEXTS[1])
