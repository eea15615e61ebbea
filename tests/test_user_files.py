"""The files people have, in the layouts their publishers ship (tests/data/...): GLUE task
folders as GLUE's download script leaves them, CoNLL-2003's original files and IOB2 copies,
SQuAD v2.0 (trained, predicted and scored with v2.0's metric), a user's own CSV / TSV /
JSON Lines and Chinese `character tag` files; and files in no known format."""

import json
import logging
import random
from pathlib import Path

import pytest

from bertedu.cli import main
from bertedu.data.files import load_path
from bertedu.data.formats import DataFormatError, read_squad_json
from bertedu.data.task_data import load_task
from bertedu.data.user_files import detect_format, read_cola_tsv
from bertedu.training.finetune import FinetuneConfig, finetune
from bertedu.training.metrics import best_null_threshold, squad_v2_metrics
from bertedu.pretrained import minilm_vocab_path

DATA = Path(__file__).resolve().parent / "data"


# ---- GLUE folders as the download script leaves them ------------------------------------------
def test_mrpc_folder_reads_its_splits_and_skips_msr_files_with_one_notice(caplog):
    with caplog.at_level(logging.WARNING):
        task = load_path(DATA / "glue" / "MRPC")
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1
    assert "skipped dev_ids.tsv, msr_paraphrase_test.txt, msr_paraphrase_train.txt" in notices[0]
    assert (task.kind, len(task.train), len(task.dev), len(task.test)) == ("pair-classification", 6, 3, 2)
    assert task.labels == ["not_equivalent", "equivalent"] and not task.test_has_labels
    assert task.train[0].text_a.startswith("The company said profits") and task.train[0].label == "equivalent"
    assert task.train[0].id == "702876-702977"


def test_mnli_folder_keeps_matched_and_mismatched_apart():
    task = load_path(DATA / "glue" / "MNLI")
    sizes = {name: len(split) for name, split in task.splits().items()}
    assert sizes == {"train": 6, "dev": 3, "test": 2, "dev_mismatched": 3, "test_mismatched": 3}  # "-" row dropped
    assert task.labels == ["contradiction", "entailment", "neutral"]
    assert [e.label for e in task.dev] == ["entailment", "contradiction", "neutral"]


def test_cola_without_a_header_and_its_headed_test_file():
    task = load_path(DATA / "glue" / "CoLA")
    assert (task.kind, len(task.train), len(task.dev), len(task.test)) == ("classification", 6, 2, 3)
    assert task.labels == ["unacceptable", "acceptable"]
    assert task.train[1].text_a == "Book this buy friends our will." and task.train[1].label == "unacceptable"
    assert all(e.label is None for e in task.test)
    assert detect_format(DATA / "glue" / "CoLA" / "train.tsv") == "cola"
    assert len(read_cola_tsv(DATA / "glue" / "CoLA" / "dev.tsv")) == 2


def test_sst2_folder():
    task = load_path(DATA / "glue" / "SST-2")
    assert (len(task.train), len(task.dev), len(task.test), task.labels) == (4, 2, 3, ["negative", "positive"])


# ---- CoNLL-2003 --------------------------------------------------------------------------------
def test_conll2003_original_iob1_files_and_iob2_copies_read_the_same():
    original, copy = load_path(DATA / "conll2003"), load_path(DATA / "conll2003_iob2")
    assert "IOB1 tags converted to BIO" in original.description and "IOB1" not in copy.description
    for split in ("train", "dev", "test"):
        a, b = getattr(original, split), getattr(copy, split)
        assert len(a) == len(b) == 4  # two -DOCSTART- documents of two sentences
        assert [(e.tokens, e.tags) for e in a] == [(e.tokens, e.tags) for e in b]
    ann = original.train[3]
    assert ann.tags == ["B-PER", "O", "B-PER", "B-PER", "O", "B-LOC", "O"]  # IOB1's B- between Bob and Carl kept


# ---- a user's own files -------------------------------------------------------------------------
def test_a_csv_with_common_column_names():
    task = load_path(DATA / "user" / "reviews.csv")
    assert (task.kind, task.labels, len(task.train) + len(task.dev) + len(task.test)) == ("classification",
                                                                                        ["neg", "pos"], 10)
    texts = {e.text_a for e in task.train + task.dev + task.test}
    assert 'Loud fan, and "smart" it is not' in texts  # CSV quoting honoured


def test_a_tsv_with_named_columns_is_a_pair_task():
    with pytest.raises(DataFormatError, match="in no known format"):  # no common names: say which columns
        load_path(DATA / "user" / "questions.tsv")
    task = load_task(DATA / "user" / "questions.tsv", text_column="q1", text_pair_column="q2",
                     label_column="is_duplicate")
    assert task.kind == "pair-classification" and task.labels == ["0", "1"]
    assert sum(map(len, (task.train, task.dev, task.test))) == 10
    with pytest.raises(DataFormatError, match="no label column 'dup' \\(--label-column\\)"):
        load_path(DATA / "user" / "questions.tsv", text_column="q1", label_column="dup")


def test_json_lines_and_a_seeded_single_file_split():
    a, b, c = (load_path(DATA / "user" / "news.jsonl", seed=s) for s in (0, 0, 1))
    assert a.labels == ["business", "sport", "tech"] and a.kind == "classification"
    assert (len(a.train), len(a.dev), len(a.test)) == (8, 1, 1)
    assert [e.id for e in a.train] == [e.id for e in b.train]  # the same seed, the same split
    assert [e.id for e in a.train] != [e.id for e in c.train]
    assert {e.id for e in a.train + a.dev + a.test} == {f"n{i}" for i in range(10)}


def test_chinese_ner_one_character_tag_a_line():
    task = load_path(DATA / "user" / "ner_zh.txt")
    assert (task.kind, task.language) == ("tagging", "zh")
    assert task.labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    sentences = {"".join(e.tokens): e.tags for e in task.train + task.dev + task.test}
    assert sentences["张三在上海工作"] == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O"]


def test_finetune_reads_named_columns_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["finetune", "--task", str(DATA / "user" / "questions.tsv"), "--text-column", "q1",
                 "--text-pair-column", "q2", "--label-column", "is_duplicate", "--init", "random", "--preset", "tiny",
                 "--vocab", str(minilm_vocab_path()), "--steps", "1", "--batch-size", "4", "--max-seq-length", "32",
                 "--no-progress", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["kind"] == "pair-classification" and results["train_examples"] == 8
    assert main(["finetune", "--task", "ner-en", "--text-column", "x", "--out", str(tmp_path / "o")]) == 2
    assert "do not apply to --task ner-en" in capsys.readouterr().err


# ---- a user's own TSV that shares column names with GLUE (issue 60 case 1) ------------------------------
PAIRS = [("a man plays a guitar", "someone plays the guitar", "same"), ("a dog runs", "a cat sleeps", "different"),
         ("he cooks rice", "rice is cooked by him", "same"), ("the film was long", "the film was short", "different")]


def _my_pairs(path: Path, header: str = "sentence1\tsentence2\tlabel") -> Path:
    path.write_text(header + "\n" + "".join(f"{a}\t{b}\t{y}\n" for a, b, y in PAIRS * 3), encoding="utf-8")
    return path


def test_a_users_tsv_with_glue_column_names_is_read_by_its_own_columns(tmp_path):
    """sentence1 sentence2 label is not MNLI (no index, promptID, pairID, genre ... gold_label), and
    sentence label with word labels is not SST-2 (0/1): both are the user's tables, labels kept."""
    pairs = _my_pairs(tmp_path / "mypairs.tsv")
    assert detect_format(pairs) == "table"
    task = load_path(pairs)
    assert (task.kind, task.labels) == ("pair-classification", ["different", "same"])
    assert all(e.label in ("same", "different") and e.text_b for e in task.train + task.dev + task.test)
    words = tmp_path / "mine.tsv"
    words.write_text("sentence\tlabel\n" + "a moving film\tpos\na dull film\tneg\n" * 5, encoding="utf-8")
    assert load_path(words).labels == ["neg", "pos"]
    folder = tmp_path / "folder"  # GLUE's file names, a user's header and labels: still the user's
    folder.mkdir()
    for split in ("train", "dev"):
        _my_pairs(folder / f"{split}.tsv")
    assert load_path(folder).labels == ["different", "same"]
    (folder / "test.tsv").write_text("sentence\tlabel\nthe film\tpos\n", encoding="utf-8")
    assert detect_format(folder / "test.tsv") == "table"


def test_glue_is_glue_only_with_its_own_header_and_file_names(tmp_path):
    sst = DATA / "glue" / "SST-2" / "train.tsv"
    assert detect_format(sst) == "glue"  # GLUE's file, GLUE's header, labels 0/1
    renamed = tmp_path / "reviews.tsv"  # the same rows under a name GLUE never uses: a table, labels as written
    renamed.write_bytes(sst.read_bytes())
    assert detect_format(renamed) == "table"
    mnli_like = _my_pairs(tmp_path / "train.tsv", "sentence1\tsentence2\tgold_label")  # GLUE's name, not its header
    assert detect_format(mnli_like) == "table"
    for task in ("MNLI", "MRPC", "SST-2"):
        assert detect_format(DATA / "glue" / task / "dev.tsv" if task != "MNLI" else
                             DATA / "glue" / task / "dev_matched.tsv") == "glue"


def test_finetune_and_evaluate_read_a_users_pairs_and_name_its_columns(tmp_path, capsys):
    """finetune --task mypairs.tsv stopped with "dev split has no labels" (read as MNLI); evaluate
    takes the column flags too, for a file whose columns have other names."""
    out = tmp_path / "run"
    assert main(["finetune", "--task", str(_my_pairs(tmp_path / "mypairs.tsv")), "--init", "random", "--preset",
                 "tiny", "--vocab", str(minilm_vocab_path()), "--steps", "1", "--batch-size", "4",
                 "--max-seq-length", "32", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    other = tmp_path / "other.csv"
    other.write_text("first,second,gold\n" + "".join(f"{a},{b},{y}\n" for a, b, y in PAIRS * 3), encoding="utf-8")
    assert main(["evaluate", str(out), "--task", str(other), "--text-column", "first", "--text-pair-column",
                 "second", "--label-column", "gold", "--no-progress"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["split"] == "test" and scores["examples"] == 1  # 12 rows cut 80/10/10
    assert main(["evaluate", str(out), "--task", str(other), "--text-column", "first", "--label-column", "nope",
                 "--no-progress"]) == 2
    assert "no label column 'nope' (--label-column)" in capsys.readouterr().err


# ---- a file in no known format ------------------------------------------------------------------
def test_a_headerless_tsv_says_what_was_tried_and_why_each_failed(tmp_path):
    path = tmp_path / "mine.tsv"
    path.write_text("a fine film\t1\ndull\t0\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as error:
        load_path(path)
    message = str(error.value)
    assert message.startswith(f"{path}: in no known format. Tried ")
    for tried in ("SQuAD JSON: not a .json file", "GLUE TSV with its header: line 1: the first line",
                  "CoLA TSV (no header): line 1: 2 tab-separated columns", "CSV/TSV with named columns: line 1: "
                  "no text column among ['a fine film', '1']", "--text-column",
                  "CoNLL columns (word ... BIO tag): line 1: last column '1' is not a BIO tag"):
        assert tried in message, tried


def test_not_utf8_is_a_format_error(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b"sentence\tlabel\n\xff\xfe bad\t1\n")
    with pytest.raises(DataFormatError, match="not UTF-8 text"):
        load_path(path)


# ---- SQuAD v2.0 -----------------------------------------------------------------------------------
def test_squad_v2_files_keep_unanswerable_questions():
    train = read_squad_json(DATA / "squad_v2" / "train-v2.0.json")
    assert [(e.id, len(e.answers)) for e in train] == [("q1", 1), ("q2", 1), ("q3", 0), ("q4", 1), ("q5", 0)]
    task = load_path(DATA / "squad_v2")
    assert (task.kind, len(task.train), len(task.dev)) == ("qa", 5, 3)


def test_squad_v2_metric_as_the_official_evaluation_defines_it():
    golds = {"a": [{"text": "Brazil and Peru"}], "b": [], "c": ["1911", "in 1911"], "d": []}
    preds = {"a": "Peru", "b": "", "c": "1911", "d": "Lima"}
    m = squad_v2_metrics(preds, golds)
    f1_a = 2 * 1 * (1 / 3) / (1 + 1 / 3)  # "peru" vs "brazil and peru": precision 1, recall 1/3
    assert m["has_ans_total"] == 2 and m["no_ans_total"] == 2
    assert m["has_ans_exact_match"] == pytest.approx(50.0) and m["has_ans_f1"] == pytest.approx(100 * (f1_a + 1) / 2)
    assert m["no_ans_exact_match"] == m["no_ans_f1"] == pytest.approx(50.0)  # "" right, "Lima" wrong
    assert m["exact_match"] == pytest.approx(50.0) and m["f1"] == pytest.approx(100 * (f1_a + 1 + 1) / 4)
    # a gold answer that normalises to nothing counts as "no answer" text, as in the official script
    assert squad_v2_metrics({"x": ""}, {"x": ["the"]})["exact_match"] == 100.0


def test_null_threshold_is_the_official_best_f1_threshold():
    golds = {"a": ["x"], "b": [], "c": ["y"], "d": []}
    spans = {"a": "x", "b": "z", "c": "w", "d": "v"}  # a right, c wrong; b and d should be ""
    margins = {"a": -3.0, "b": 2.0, "c": -1.0, "d": 0.5}
    threshold, best = best_null_threshold(spans, golds, margins)
    assert threshold == -3.0 and best == pytest.approx(75.0)  # answer only a: a, b, d right
    rng = random.Random(0)  # brute force over every cut agrees
    for _ in range(20):
        margins = {q: rng.uniform(-2, 2) for q in golds}
        threshold, best = best_null_threshold(spans, golds, margins)
        def f1_at(t):
            preds = {q: "" if margins[q] > t else spans[q] for q in golds}
            return squad_v2_metrics(preds, golds)["f1"]
        assert best == pytest.approx(max(f1_at(t) for t in [*margins.values(), float("-inf")]))
        assert f1_at(threshold) == pytest.approx(best)


def test_squad_v2_trains_no_answer_and_is_scored_with_hasans_and_noans(tmp_path):
    out = tmp_path / "qa"
    results = finetune(FinetuneConfig(task=str(DATA / "squad_v2"), init="random", preset="tiny", out=str(out),
                                      vocab=str(minilm_vocab_path()), steps=2, batch_size=4, max_seq_length=64,
                                      doc_stride=32, max_query_length=24, progress=False))
    assert results["train_examples"] == 5 and results["train_features"] >= 5  # the unanswerable ones train too
    assert set(results["dev"]) >= {"exact_match", "f1", "has_ans_exact_match", "has_ans_f1", "no_ans_exact_match",
                                   "no_ans_f1", "has_ans_total", "no_ans_total"}
    assert (results["dev"]["has_ans_total"], results["dev"]["no_ans_total"]) == (2, 1)
    info = json.loads((out / "model" / "task.json").read_text())
    assert isinstance(info["null_threshold"], float)  # chosen on dev
    rows = [json.loads(line) for line in (out / "predictions_dev.jsonl").read_text().splitlines()]
    assert [r["gold"] for r in rows if r["id"] == "d2"] == [[]]
