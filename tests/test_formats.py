"""The canonical formats (GLUE TSV, CoNLL, SQuAD JSON, Hugging Face schemas) read into
the internal structures, on small files in the real schemas (offline)."""

import json

import pytest

from bertedu.data.files import load_path
from bertedu.data.formats import (
    CONLL2003_TAGS,
    MNLI_LABELS,
    DataFormatError,
    QAExample,
    TaggingExample,
    TaskData,
    TextClassificationExample,
    bio_labels,
    hf_examples,
    hf_task_data,
    iob1_to_bio,
    read_conll,
    read_glue_tsv,
    read_squad_json,
    squad_dict,
    starts_entity_with_i,
)

# ----------------------------------------------------------------------------------------
# Files in the real schemas (rows copied from the real data sets)
# ----------------------------------------------------------------------------------------

SST2_TRAIN = (
    "sentence\tlabel\n"
    "hide new secretions from the parental units \t0\n"
    "contains no wit , only labored gags \t0\n"
    "that loves its characters and communicates something rather beautiful about human nature \t1\n"
)
SST2_DEV = "sentence\tlabel\nit 's a charming and often affecting journey . \t1\n"
SST2_TEST = (
    "index\tsentence\n"
    "0\tuneasy mishmash of styles and genres .\n"
    "1\tthis film 's relationship to actual tension is the same as what christmas-tree flocking in a spray can "
    "is to actual snow : a poor -- if durable -- imitation .\n"
)
# GLUE's MRPC files start with a byte-order mark; MSR's sentences hold bare quotes.
MRPC_TRAIN = (
    "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    '1\t702876\t702977\tAmrozi accused his brother , whom he called " the witness " , of deliberately distorting '
    'his evidence .\tReferring to him as only " the witness " , Amrozi accused his brother of deliberately '
    "distorting his evidence .\n"
    "0\t2108705\t2108831\tYucaipa owned Dominick 's before selling the chain to Safeway in 1998 for $ 2.5 billion ."
    "\tYucaipa bought Dominick 's in 1995 for $ 693 million and sold it to Safeway for $ 1.8 billion in 1998 .\n"
)
MNLI_COLUMNS = ("index promptID pairID genre sentence1_binary_parse sentence2_binary_parse sentence1_parse "
                "sentence2_parse sentence1 sentence2").split()


def mnli_tsv(rows, n_labels):
    """MNLI rows (sentence1, sentence2, gold_label) with train's 1 or dev's 5 annotator labels."""
    label_columns = [f"label{i}" for i in range(1, n_labels + 1)] + ["gold_label"] if n_labels else []
    lines = ["\t".join(MNLI_COLUMNS + label_columns)]
    for i, (premise, hypothesis, gold) in enumerate(rows):
        parses = ["( x )"] * 4
        labels = [gold] * n_labels + [gold] if n_labels else []
        lines.append("\t".join([str(i), str(31193 + i), f"{31193 + i}n", "government", *parses, premise, hypothesis,
                                *labels]))
    return "\n".join(lines) + "\n"


MNLI_ROWS = [
    ("Conceptually cream skimming has two basic dimensions - product and geography.",
     "Product and geography are what make cream skimming work. ", "neutral"),
    ("you know during the season and i guess at at your level uh you lose them to the next level",
     "You lose the things to the following level if the people recall.", "entailment"),
    ('The "new" rights are nice enough', "Everyone really likes the newest benefits ", "contradiction"),
]
CONLL_IOB1 = """-DOCSTART- -X- O O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
to TO I-VP O
boycott VB I-VP O
British JJ I-NP I-MISC
lamb NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- O O

BRUSSELS NNP I-NP I-LOC
1996-08-22 CD I-NP O
"""
CONLL_BIO = CONLL_IOB1.replace("I-ORG", "B-ORG").replace("I-MISC", "B-MISC").replace("I-LOC", "B-LOC")
CONLL_BIO = CONLL_BIO.replace("Peter NNP I-NP I-PER", "Peter NNP I-NP B-PER")
SQUAD_CONTEXT = (
    "Super Bowl 50 was an American football game to determine the champion of the National Football League "
    "(NFL) for the 2015 season. The American Football Conference (AFC) champion Denver Broncos defeated the "
    "National Football Conference (NFC) champion Carolina Panthers 24–10 to earn their third Super Bowl title."
)
SQUAD = {
    "version": "1.1",
    "data": [{"title": "Super_Bowl_50", "paragraphs": [{"context": SQUAD_CONTEXT, "qas": [
        {"answers": [{"answer_start": 177, "text": "Denver Broncos"}, {"answer_start": 177, "text": "Denver Broncos"}],
         "question": "Which NFL team represented the AFC at Super Bowl 50?", "id": "56be4db0acb8001400a502ec"},
        {"answers": [{"answer_start": 249, "text": "Carolina Panthers"}],
         "question": "Which NFL team represented the NFC at Super Bowl 50?", "id": "56be4db0acb8001400a502ed"},
    ]}]}],
}


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------
# GLUE TSV
# ----------------------------------------------------------------------------------------


def test_sst2_tsv(tmp_path):
    task, examples = read_glue_tsv(write(tmp_path / "train.tsv", SST2_TRAIN))
    assert task == "sst2" and len(examples) == 3
    assert [e.label for e in examples] == ["negative", "negative", "positive"]
    assert examples[1].text_a == "contains no wit , only labored gags " and examples[1].text_b is None
    assert len({e.id for e in examples}) == 3
    task, test = read_glue_tsv(write(tmp_path / "test.tsv", SST2_TEST))
    assert task == "sst2" and [e.label for e in test] == [None, None] and [e.id for e in test] == ["0", "1"]


def test_mrpc_tsv_with_byte_order_mark_and_quotes(tmp_path):
    task, examples = read_glue_tsv(write(tmp_path / "msr_paraphrase_train.txt", MRPC_TRAIN))
    assert task == "mrpc"
    assert [e.label for e in examples] == ["equivalent", "not_equivalent"]
    assert examples[0].id == "702876-702977"
    assert examples[0].text_a.count('"') == 2 and examples[0].text_b.startswith('Referring to him as only "')


def test_mnli_tsv_train_dev_and_unlabelled_test(tmp_path):
    task, train = read_glue_tsv(write(tmp_path / "train.tsv", mnli_tsv(MNLI_ROWS, 1)))
    assert task == "mnli"
    assert [(e.text_a, e.text_b, e.label) for e in train] == MNLI_ROWS
    assert train[0].id == "31193n"
    # dev has five annotator labels; a "-" gold label (no consensus) is skipped
    rows = MNLI_ROWS + [("A man.", "A woman.", "-")]
    _, dev = read_glue_tsv(write(tmp_path / "dev_matched.tsv", mnli_tsv(rows, 5)))
    assert [e.label for e in dev] == [r[2] for r in MNLI_ROWS]
    _, test = read_glue_tsv(write(tmp_path / "test_matched.tsv", mnli_tsv(MNLI_ROWS, 0)))
    assert len(test) == 3 and all(e.label is None for e in test)


def test_glue_folder_gives_task_data(tmp_path):
    write(tmp_path / "train.tsv", mnli_tsv(MNLI_ROWS, 1))
    write(tmp_path / "dev_matched.tsv", mnli_tsv(MNLI_ROWS[:2], 5))
    write(tmp_path / "dev_mismatched.tsv", mnli_tsv(MNLI_ROWS[2:], 5))
    write(tmp_path / "test_matched.tsv", mnli_tsv(MNLI_ROWS, 0))
    write(tmp_path / "README.md", "not data")
    task = load_path(tmp_path)
    assert task.kind == "pair-classification" and task.labels == MNLI_LABELS
    assert (len(task.train), len(task.dev), len(task.test)) == (3, 2, 3)
    assert [e.label for e in task.extra_splits["dev_mismatched"]] == ["contradiction"]
    assert not task.test_has_labels


def test_malformed_tsv_rows_name_file_and_line(tmp_path):
    bad = write(tmp_path / "train.tsv", SST2_TRAIN + "a sentence with\ta tab inside\t1\n")
    with pytest.raises(DataFormatError, match=r"train\.tsv:5: 3 tab-separated columns, but the header has 2"):
        read_glue_tsv(bad)
    with pytest.raises(DataFormatError, match=r"train\.tsv:3: label 'x' is not 0 or 1"):
        read_glue_tsv(write(tmp_path / "train.tsv", "sentence\tlabel\nfine\t1\nodd\tx\n"))
    mnli = mnli_tsv(MNLI_ROWS, 1).replace("\tneutral\tneutral\n", "\tneutral\tmaybe\n")
    with pytest.raises(DataFormatError, match=r"train\.tsv:2: gold_label 'maybe'"):
        read_glue_tsv(write(tmp_path / "train.tsv", mnli))
    with pytest.raises(DataFormatError, match=r"other\.tsv:1: not a GLUE header"):
        read_glue_tsv(write(tmp_path / "other.tsv", "text\tscore\nhello\t3\n"))


# ----------------------------------------------------------------------------------------
# CoNLL
# ----------------------------------------------------------------------------------------


def test_iob1_to_bio():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "I-ORG"]
    assert starts_entity_with_i(iob1)
    bio = iob1_to_bio(iob1)
    assert bio == ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "I-ORG"]
    assert not starts_entity_with_i(bio) and iob1_to_bio(bio) == bio  # BIO passes unchanged


def test_conll2003_original_iob1_is_converted(tmp_path):
    examples = read_conll(write(tmp_path / "eng.train", CONLL_IOB1))
    assert [e.tokens for e in examples] == [
        ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
        ["Peter", "Blackburn"],
        ["BRUSSELS", "1996-08-22"],
    ]  # -DOCSTART- lines are skipped and end a sentence
    assert examples[0].tags == ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"]
    assert examples[1].tags == ["B-PER", "I-PER"] and examples[2].tags == ["B-LOC", "O"]
    assert [e.tags for e in read_conll(write(tmp_path / "train.txt", CONLL_BIO))] == [e.tags for e in examples]


def test_conll_folder_and_two_column_tabs(tmp_path):
    write(tmp_path / "eng.train", CONLL_IOB1)
    write(tmp_path / "eng.testa", CONLL_IOB1)
    write(tmp_path / "eng.testb", CONLL_IOB1.split("\n\n-DOCSTART-")[0])
    task = load_path(tmp_path)
    assert task.kind == "tagging" and (len(task.train), len(task.dev), len(task.test)) == (3, 3, 2)
    assert task.labels == bio_labels(["LOC", "MISC", "ORG", "PER"]) and task.labels[0] == "O"
    assert "IOB1 tags converted to BIO" in task.description
    tweets = write(tmp_path / "ner.txt", "@paulwalk\tO\nEmpire\tB-facility\nState\tI-facility\n\t\nFrom\tO\n")
    assert [(e.tokens, e.tags) for e in read_conll(tweets)] == [
        (["@paulwalk", "Empire", "State"], ["O", "B-facility", "I-facility"]), (["From"], ["O"])]


def test_malformed_conll_lines_name_file_and_line(tmp_path):
    with pytest.raises(DataFormatError, match=r"eng\.train:4: one column \('rejects'\)"):
        read_conll(write(tmp_path / "eng.train", CONLL_IOB1.replace("rejects VBZ I-VP O", "rejects")))
    with pytest.raises(DataFormatError, match=r"eng\.train:5: 3 columns, but the file's first line has 4"):
        read_conll(write(tmp_path / "eng.train", CONLL_IOB1.replace("German JJ I-NP", "German I-NP")))
    with pytest.raises(DataFormatError, match=r"eng\.train:3: tag 'S-ORG' is not BIO"):
        read_conll(write(tmp_path / "eng.train", CONLL_IOB1.replace("I-ORG", "S-ORG")))


# ----------------------------------------------------------------------------------------
# SQuAD
# ----------------------------------------------------------------------------------------


def test_squad_v1_json(tmp_path):
    path = tmp_path / "dev-v1.1.json"
    path.write_text(json.dumps(SQUAD))
    examples = read_squad_json(path)
    assert [e.id for e in examples] == ["56be4db0acb8001400a502ec", "56be4db0acb8001400a502ed"]
    first = examples[0]
    assert first.title == "Super_Bowl_50" and first.context == SQUAD_CONTEXT and len(first.answers) == 2
    for example in examples:
        for answer in example.answers:
            start = answer["answer_start"]
            assert example.context[start : start + len(answer["text"])] == answer["text"]
    # round trip through squad_dict
    path.write_text(json.dumps(squad_dict(examples)))
    assert read_squad_json(path) == examples


def test_squad_v2_is_impossible_and_folder(tmp_path):
    v2 = json.loads(json.dumps(SQUAD))
    v2["version"] = "v2.0"
    v2["data"][0]["paragraphs"][0]["qas"].append({
        "question": "Who won Super Bowl 51?", "id": "5a8d7bf7df8bba001a0f9ab1", "answers": [],
        "plausible_answers": [{"text": "Denver Broncos", "answer_start": 177}], "is_impossible": True})
    (tmp_path / "train-v2.0.json").write_text(json.dumps(v2))
    (tmp_path / "dev-v2.0.json").write_text(json.dumps(SQUAD))
    task = load_path(tmp_path)
    assert task.kind == "qa" and task.labels == [] and (len(task.train), len(task.dev)) == (3, 2)
    assert task.train[2].answers == [] and task.train[0].answers[0]["text"] == "Denver Broncos"


def test_squad_answer_not_at_answer_start(tmp_path):
    bad = json.loads(json.dumps(SQUAD))
    bad["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = 250
    path = tmp_path / "train-v1.1.json"
    path.write_text(json.dumps(bad, indent=1))  # indented: the question is on its own line
    lines = path.read_text().split("\n")
    line = next(n for n, text in enumerate(lines, 1) if '"id": "56be4db0acb8001400a502ed"' in text)
    assert line > 10
    with pytest.raises(DataFormatError, match=rf"train-v1\.1\.json:{line}: question '56be4db0acb8001400a502ed': "
                                              r"answer 'Carolina Panthers' is not at answer_start 250"):
        read_squad_json(path)
    assert [e.id for e in read_squad_json(path, strict=False)] == ["56be4db0acb8001400a502ec"]
    path.write_text('{"data": [')
    with pytest.raises(DataFormatError, match=r"not valid JSON"):
        read_squad_json(path)


# ----------------------------------------------------------------------------------------
# Hugging Face datasets schemas (in-memory)
# ----------------------------------------------------------------------------------------


@pytest.fixture
def hf():
    """Hugging Face datasets (the course extra), used offline: in-memory Datasets only."""
    return pytest.importorskip("datasets")


def glue_features(hf, names, *text_columns):
    columns = {c: hf.Value("string") for c in text_columns}
    return hf.Features({**columns, "label": hf.ClassLabel(names=names), "idx": hf.Value("int32")})


def test_hf_glue_schemas(hf):
    sst2 = hf.Dataset.from_dict({"sentence": ["hide new secretions ", "a charming journey "], "label": [0, 1],
                                 "idx": [0, 1]}, features=glue_features(hf, ["negative", "positive"], "sentence"))
    examples = hf_examples(sst2)
    assert examples == [TextClassificationExample("hide new secretions ", None, "negative", "0"),
                        TextClassificationExample("a charming journey ", None, "positive", "1")]
    mrpc = hf.Dataset.from_dict(
        {"sentence1": ["a", "b"], "sentence2": ["c", "d"], "label": [1, 0], "idx": [7, 8]},
        features=glue_features(hf, ["not_equivalent", "equivalent"], "sentence1", "sentence2"),
    )
    assert [(e.text_a, e.text_b, e.label, e.id) for e in hf_examples(mrpc)] == [("a", "c", "equivalent", "7"),
                                                                               ("b", "d", "not_equivalent", "8")]
    # glue/mnli's ClassLabel order is entailment, neutral, contradiction; -1 is a hidden test label
    mnli = hf.Dataset.from_dict({"premise": ["p"] * 4, "hypothesis": ["h"] * 4, "label": [0, 1, 2, -1],
                                 "idx": [0, 1, 2, 3]})
    assert [e.label for e in hf_examples(mnli)] == ["entailment", "neutral", "contradiction", None]


def test_hf_conll2003_with_and_without_class_names(hf):
    features = hf.Features({"id": hf.Value("string"), "tokens": hf.Sequence(hf.Value("string")),
                            "ner_tags": hf.Sequence(hf.ClassLabel(names=CONLL2003_TAGS))})
    rows = {"id": ["0", "1"], "tokens": [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]],
            "ner_tags": [[3, 0, 7, 0], [1, 2]]}
    with_names = hf_examples(hf.Dataset.from_dict(rows, features=features))
    assert with_names[0] == TaggingExample(["EU", "rejects", "German", "call"], ["B-ORG", "O", "B-MISC", "O"], "0")
    assert with_names[1].tags == ["B-PER", "I-PER"]
    plain_ints = hf_examples(hf.Dataset.from_dict(rows))  # a copy without ClassLabel: conll2003's names
    assert plain_ints == with_names
    other_names = ["O", "B-X", "I-X", "B-Y", "I-Y", "B-Z", "I-Z", "B-W", "I-W"]
    custom = hf.Features({**features, "ner_tags": hf.Sequence(hf.ClassLabel(names=other_names))})
    assert hf_examples(hf.Dataset.from_dict(rows, features=custom))[1].tags == ["B-X", "I-X"]


def test_hf_squad_and_dataset_dict(hf):
    row = {"id": ["56be4db0acb8001400a502ec"], "title": ["Super_Bowl_50"], "context": [SQUAD_CONTEXT],
           "question": ["Which NFL team represented the AFC at Super Bowl 50?"],
           "answers": [{"text": ["Denver Broncos", "Denver Broncos"], "answer_start": [177, 177]}]}
    squad = hf.DatasetDict({"train": hf.Dataset.from_dict(row), "validation": hf.Dataset.from_dict(row)})
    task = hf_task_data(squad, "squad")
    assert task.kind == "qa" and len(task.train) == len(task.dev) == 1 and task.test == []
    assert task.train[0] == QAExample("56be4db0acb8001400a502ec", row["question"][0], SQUAD_CONTEXT,
                                      [{"text": "Denver Broncos", "answer_start": 177}] * 2, "Super_Bowl_50")
    row["answers"][0]["answer_start"] = [176, 177]
    with pytest.raises(ValueError, match="is not at answer_start 176"):
        hf_examples(hf.Dataset.from_dict(row))
    with pytest.raises(TypeError, match="Pass one split"):
        hf_examples(squad)


def test_hf_mnli_dataset_dict_matches_the_tsv_labels(hf):
    def split(labels):
        return hf.Dataset.from_dict(
            {"premise": ["p"] * len(labels), "hypothesis": ["h"] * len(labels), "label": labels,
             "idx": list(range(len(labels)))},
            features=glue_features(hf, ["entailment", "neutral", "contradiction"], "premise", "hypothesis"),
        )

    splits = {"train": split([0, 1, 2]), "validation_matched": split([2]), "validation_mismatched": split([1]),
              "test_matched": split([-1])}
    task = hf_task_data(hf.DatasetDict(splits), "mnli")
    assert task.labels == MNLI_LABELS  # the TSV reader's order, whatever the ClassLabel order
    assert [e.label for e in task.dev] == ["contradiction"]
    assert [e.label for e in task.extra_splits["dev_mismatched"]] == ["neutral"]
    assert not task.test_has_labels
    # the sst2 schema with other class names keeps them, in their order
    reviews = hf.Dataset.from_dict({"sentence": ["fine", "awful"], "label": [2, 0], "idx": [0, 1]},
                                   features=glue_features(hf, ["bad", "so-so", "good"], "sentence"))
    task = hf_task_data(hf.DatasetDict({"train": reviews}), "reviews")
    assert task.labels == ["bad", "so-so", "good"] and [e.label for e in task.train] == ["good", "bad"]


# ----------------------------------------------------------------------------------------
# TaskData and single files
# ----------------------------------------------------------------------------------------


def test_single_file_is_split_and_subsample_is_seeded(tmp_path):
    rows = "".join(f"sentence number {i} \t{i % 2}\n" for i in range(50))
    task = load_path(write(tmp_path / "mine.tsv", "sentence\tlabel\n" + rows), seed=3)
    assert (len(task.train), len(task.dev), len(task.test)) == (40, 5, 5)
    ids = [e.id for split in task.splits().values() for e in split]
    assert len(ids) == len(set(ids)) == 50
    assert [e.id for e in load_path(tmp_path / "mine.tsv", seed=3).dev] == [e.id for e in task.dev]
    small = task.subsample(max_train=10, max_eval=2, seed=1)
    assert (len(small.train), len(small.dev), len(small.test)) == (10, 2, 2)
    assert {e.id for e in small.train} <= {e.id for e in task.train}
    assert [e.id for e in small.train] == [e.id for e in task.subsample(10, 2, seed=1).train]
    assert "subsampled" in small.description


def test_task_data_checks_kind_and_load_path_errors(tmp_path):
    with pytest.raises(ValueError, match="Unknown task kind"):
        TaskData("x", "regression", [], [], [], [])
    with pytest.raises(FileNotFoundError):
        load_path(tmp_path / "missing")
    with pytest.raises(ValueError, match="No data files"):
        load_path(tmp_path)
    write(tmp_path / "train.tsv", SST2_TRAIN)
    write(tmp_path / "dev.txt", CONLL_BIO)
    with pytest.raises(ValueError, match="mix formats"):
        load_path(tmp_path)
