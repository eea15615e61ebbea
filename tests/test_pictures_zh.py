"""The teaching pictures in the Chinese edition (issue 58 item 5): every picture a lesson draws comes
out labelled in Chinese when the course speaks zh (`i18n`), in the glossary's terms, with no English
word the table missed, every label in its box, Chinese drawn by the course's own font (no missing
glyph), and the English pictures exactly as they were."""
import logging
import re
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib as mpl  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from test_diagrams import PICTURES  # noqa: E402  (every picture of diagrams and mechanisms, as English tests it)

from bertedu import BertConfig  # noqa: E402
from bertedu.course import diagrams, drawing, i18n, labels_zh, viz  # noqa: E402


# PICTURES has every lesson's map at CPU scale; these are the maps a lesson draws at GPU scale with
# another model (every kind of model appears in one of the two).
MAPS = {f"you_are_here({n}, gpu)": (lambda n=n: diagrams.you_are_here(n, scale="gpu")) for n in diagrams.LESSON_PIECES
        if diagrams.model_name(*diagrams.lesson_model(n, "gpu")) != diagrams.model_name(*diagrams.lesson_model(n))
        or diagrams.lesson_model(n, "gpu")[1] != diagrams.lesson_model(n)[1]}
# Lesson 05's masking pictures, with the titles the lesson gives them (and lesson 19's).
MASKING = {
    "draw_masking": lambda tok: viz.draw_masking(tok, "BERT reads the whole sentence at once, left and right.", seed=4,
                                                 mlm_probability=0.3),
    "draw_masking whole words": lambda tok: viz.draw_masking(tok, "The unaffable chancellor was flummoxed.", seed=1,
                                                             mlm_probability=0.35, whole_word=True),
    "draw_masking token-level": lambda tok: viz.draw_masking(
        tok, "The unaffable chancellor was inexplicably flummoxed.", seed=1, mlm_probability=0.35, legend=False,
        line_chars=125, title="token-level masking (p = 0.35, seed 1)"),
    "draw_masking whole-word": lambda tok: viz.draw_masking(
        tok, "The unaffable chancellor was inexplicably flummoxed.", seed=1, mlm_probability=0.35, whole_word=True,
        line_chars=125, title="whole-word masking (p = 0.35, seed 1)"),
    "masking_strip": lambda tok: viz.masking_strip(["[CLS]", "input", "original", "[SEP]"],
                                                   ["[CLS]", "[MASK]", "original", "[SEP]"], [4, 1, 3, 4],
                                                   title="MLM masking of real text (seed 3)"),
    "masking_strip 19": lambda tok: viz.masking_strip(["[CLS]", "人", "民", "[SEP]"], ["[CLS]", "[MASK]", "民", "[SEP]"],
                                                      [4, 1, 0, 4], title="whole words: 1 of 2 selected, 0 word(s) half hidden"),
    "token_strip": lambda tok: viz.token_strip(["[CLS]", "a", "[SEP]", "b"], {"token_type_ids": [0, 0, 0, 1]},
                                               title="segment ids around the first [SEP] of an IsNext pair"),
}

# What may stay in Latin letters in a Chinese picture: names of models, tools and functions, symbols
# and units; inputs the model reads (the example sentences, the masking pictures' tokens, marked VERBATIM).
NAMES = {"BERT", "BASE", "LARGE", "BERTs", "GPT", "RoBERTa", "ALBERT", "DistilBERT", "MiniLM", "WordPiece",
         "SentencePiece", "BPE", "GELU", "LayerNorm", "softmax", "tanh", "dropout", "logits", "AdamW", "fp32",
         "IsNext", "NotNext", "GiB", "MiB", "PER", "LOC", "tiny", "mini", "small", "medium", "view", "transpose",
         "Hugging", "Face", "inf"}
EXAMPLES = ["all-MiniLM-L6-v2", "course-zh", "“the cat sat on the mat”", *(kind.example for kind in diagrams.KINDS.values())]
CODE = re.compile(r"[A-Za-z0-9]+(?:[._][A-Za-z0-9]+)+|Bert[A-Za-z]+|</?s>|\[[A-Z]+\]")


def _english_left(text: str, also: tuple = ()) -> list[str]:
    """The words of 3+ Latin letters in `text` that are not names, code, examples or `also`."""
    for example in (*EXAMPLES, *also):
        text = text.replace(example, " ")
    return [w for w in re.findall(r"[A-Za-z]{3,}", CODE.sub(" ", text)) if w not in NAMES]


def _labels(item) -> list:
    """(text, is verbatim) of every label a reader reads in a picture, in drawing order."""
    return [(t.get_text(), t.get_gid() == drawing.VERBATIM) for t in drawing._texts_of(diagrams._figure(item))
            if t.get_text().strip()]


def _drawn(make, lang: str, caplog=None):
    """`make()` drawn in `lang`, drawn to pixels with a missing glyph or font an error."""
    with i18n.speaking(lang), warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)": a box instead of a character
        item = make()
        diagrams._figure(item).canvas.draw()
    if caplog is not None:  # "findfont: Failed to find font weight bold for Noto Sans SC" and the like
        assert not [r for r in caplog.records if r.name.startswith("matplotlib") and r.levelno >= logging.WARNING]
    return item


def _check_chinese(make, caplog, also: tuple = ()):
    """Draw `make` in English and in Chinese; the Chinese labels are the English ones put through
    the table (tokens and code names unchanged), leave no English word and stay in their boxes."""
    english = _labels(_drawn(make, "en"))
    plt.close("all")
    item = _drawn(make, "zh", caplog)
    chinese = _labels(item)
    assert [v for _, v in chinese] == [v for _, v in english]  # the same labels, in the same places
    for (zh, verbatim), (en, _) in zip(chinese, english):
        assert zh == (en if verbatim else labels_zh.translate(en))
    left = {zh: _english_left(zh, also) for zh, verbatim in chinese if not verbatim}
    assert not {k: v for k, v in left.items() if v}, "English words the table lacks"
    assert any(re.search("[\u4e00-\u9fff]", zh) for zh, _ in chinese)
    assert drawing.label_overflows(item) == []
    return item


@pytest.mark.parametrize("name", sorted(PICTURES) + sorted(MAPS))
def test_every_picture_speaks_chinese_in_its_boxes_at_the_courses_resolution(name, caplog):
    make = {**PICTURES, **MAPS}[name]
    also = ("embeddings", "encoder.layer", "pooler", "classifier") if name == "checkpoint_to_head" else ()
    fig = diagrams._figure(_check_chinese(make, caplog, also))  # module names of a state dict stay
    assert fig.dpi >= 150 and fig.get_size_inches()[0] >= 4
    sizes = [t.get_fontsize() for a in fig.axes for t in [*a.texts, a.title] if t.get_text().strip()]
    assert min(sizes) >= diagrams.SMALLEST_FONT
    plt.close(fig)


def test_every_kind_of_model_has_a_map_here():
    kinds = {diagrams.lesson_model(n, scale)[1] for n in diagrams.LESSON_PIECES for scale in ("cpu", "gpu")}
    assert kinds == set(diagrams.KINDS) and len(MAPS) >= 2


@pytest.mark.parametrize("name", sorted(MASKING))
def test_masking_pictures_speak_chinese_and_keep_their_tokens(name, tok, caplog):
    ax = _check_chinese(lambda: MASKING[name](tok), caplog)
    tokens = [t.get_text() for t in ax.texts if t.get_gid() == drawing.VERBATIM]
    if name == "masking_strip":  # tokens that are also labels of the table ("input", "original") stay tokens
        assert tokens == ["[CLS]", "[CLS]", "input", "[MASK]", "original", "original", "[SEP]", "[SEP]"]
        assert [t.get_text() for t in ax.texts if t.get_gid() != drawing.VERBATIM] == ["原文", "输入"]
    legend = ax.get_legend()
    if legend is not None:
        assert [t.get_text() for t in legend.get_texts()][:3] == ["选中 → [MASK]", "选中 → 随机词元", "选中 → 保持不变"]
    plt.close("all")


def test_a_legend_on_a_lessons_own_plot_and_its_title_by_translate_labels():
    """Lesson 05 draws one plot itself (three reads of one pair) with `masking_legend`; the legend
    speaks Chinese by itself, the lesson's own title and axis label by `translate_labels`."""
    with i18n.speaking("zh"):
        fig, ax = plt.subplots()
        ax.set_title("pair 3 masked on three reads: which positions are predicted")
        ax.set_xlabel("token position")
        viz.masking_legend(ax)
        assert diagrams.translate_labels(ax) is ax
    assert ax.get_title() == "句对 3 三次读取的掩蔽：要预测哪些位置" and ax.get_xlabel() == "词元位置"
    assert ax.get_legend().get_texts()[-1].get_text() == "特殊词元（从不选中）"
    plt.close(fig)


# ---- English stays as it was -------------------------------------------------------------------

def _snapshot(item) -> list:
    fig = diagrams._figure(item)
    fig.canvas.draw()
    return [(t.get_text(), t.get_fontsize(), t.get_fontfamily(), t.get_fontweight(), t.get_path_effects())
            for t in drawing._texts_of(fig)]


@pytest.mark.parametrize("name", ["you_are_here(8)", "task_heads(None, bert)", "family_differences(roberta)",
                                  "checkpoint_to_head", "multihead_reshape"])
def test_english_pictures_are_the_same_before_and_after_a_chinese_one(name):
    families = list(mpl.rcParams["font.family"])
    before = _snapshot(_drawn(PICTURES[name], "en"))
    _drawn(PICTURES[name], "zh")
    after = _snapshot(_drawn(PICTURES[name], "en"))
    assert before == after and mpl.rcParams["font.family"] == families  # nothing global changed
    assert not re.search("[\u4e00-\u9fff]", str(before))
    plt.close("all")


# ---- the table: the glossary's terms, values kept ------------------------------------------------

def _english_names(english: str) -> list[str]:
    """The terms a glossary row's English cell names, in order: "query, key, value" three; "token /
    segment / position embedding" three, the last word belonging to each; parentheses left out."""
    items = [e.strip() for e in re.split(r",\s*|:\s*|\s/\s", re.sub(r"\s*\([^)]*\)", "", english)) if e.strip()]
    last = items[-1].split()
    if " / " in english and len(last) > 1 and all(len(e.split()) == 1 for e in items[:-1]):
        items = [f"{e} {' '.join(last[1:])}" for e in items[:-1]] + [items[-1]]
    return items


def _glossary_chinese() -> dict[str, tuple[set, str]]:
    """English term -> (the Chinese words the glossary gives it, its Chinese cells), read from
    docs/glossary.md by `bertedu.course.glossary`: the word in the same place when the two cells name
    as many terms, else every word of the cell; an abbreviation ("MLM", "LayerNorm") as its term; a
    term in two rows ("head": of attention, of a task) takes both; special tokens ("[CLS]") none."""
    from bertedu.course import glossary

    allowed: dict[str, tuple[set, str]] = {}
    for term in glossary.terms():
        names, words = _english_names(term.english), glossary.chinese_words(term.chinese)
        pairs = list(zip(names, [{w} for w in words])) if len(names) == len(words) else [(n, set(words)) for n in names]
        pairs += [(a, set(words)) for a in re.findall(r"\(([A-Z]\w*)\)", term.english)]  # (MLM), not (layer)
        for name, chosen in pairs:
            if not name.startswith("["):
                known, cells = allowed.get(name, (set(), ""))
                allowed[name] = (known | chosen, cells + " " + term.chinese)
    return allowed


def test_the_glossary_is_read():
    allowed = {term: words for term, (words, _) in _glossary_chinese().items()}
    assert allowed["token"] == {"词元"} and allowed["position embedding"] == {"位置嵌入"}
    assert allowed["MLM"] == allowed["masked language model"] == {"掩蔽语言模型"}
    assert allowed["LayerNorm"] == {"层规范化"} and allowed["key"] == {"键"} and allowed["fine-tuning"] == {"微调"}
    assert allowed["static masking"] == {"静态掩蔽"} and allowed["pooled [CLS]"] == {"[CLS] 池化向量"}
    assert allowed["head"] == {"头", "输出层"} and "[CLS]" not in allowed and len(allowed) > 80


def test_every_glossary_term_in_a_label_has_the_glossarys_chinese():
    """Where an English label says a glossary term ("token", "segment", "MLM", "fine-tuning",
    "attention", "position embedding", "LayerNorm", ...), its Chinese says the glossary's Chinese
    (a name the glossary keeps, like WordPiece, GELU or logits, may stay as it is)."""
    wrong, checked = [], 0
    for term, (words, cells) in _glossary_chinese().items():
        flags = 0 if term != term.lower() else re.I
        for english, chinese in labels_zh.LABELS:
            if re.search(rf"(?<!\w){re.escape(term)}(s|es)?(?!\w)", english, flags):
                checked += 1
                if not any(w in chinese for w in words) and not (term in cells and term in chinese):
                    wrong.append(f"{english!r} -> {chinese!r}: {term} is {' / '.join(sorted(words))}")
    assert wrong == [] and checked > 100


def test_the_table_keeps_values_and_translates_them_in_turn():
    title = "you are here: 08 · single-sentence classification\nall-MiniLM-L6-v2: 6 layers (H = 384)"
    assert labels_zh.translate(title) == "当前位置：08 · 单句分类\nall-MiniLM-L6-v2：6 层 (H = 384)"
    assert labels_zh.translate("embeddings (1 tensor)") == "embeddings（1 个张量）"  # a module's name stays
    assert labels_zh.translate("V = 30,522 logits at each masked position;\nthe decoder is the word-embedding "
                               "matrix, transposed (tied)").startswith("每个被掩蔽的位置输出 V = 30,522 个 logits")
    assert labels_zh.translate("head 11") == "头 11" and labels_zh.translate("head x") == "head x"  # {n}: a number
    assert labels_zh.translate("a label nobody wrote") == "a label nobody wrote"
    for english, _ in labels_zh.LABELS:  # Chinese is never translated again: translate_labels may run twice
        example = re.sub(r"\{[=n]?\}", "7", english)
        assert labels_zh.translate(labels_zh.translate(example)) == labels_zh.translate(example), english
    assert len({english for english, _ in labels_zh.LABELS}) == len(labels_zh.LABELS)  # one row per label


def test_a_chinese_lesson_cell_draws_chinese(monkeypatch):
    """What notebooks/zh/ run: `i18n.use("zh")` in the first cell, or BERTEDU_LANG=zh from the
    learner's command; then the English lesson's own calls."""
    monkeypatch.setattr(i18n, "_chosen", None)
    i18n.use("zh")
    assert diagrams.you_are_here(8).get_title().startswith("当前位置：08 · 单句分类")
    monkeypatch.setattr(i18n, "_chosen", None)
    monkeypatch.setenv(i18n.ENVIRONMENT, "zh")
    axes = diagrams.task_heads(None, BertConfig.minilm(), "minilm")
    assert [a.get_title() for a in axes.flat][0] == "单句 → 一个标签"
    monkeypatch.delenv(i18n.ENVIRONMENT)
    assert diagrams.you_are_here(8).get_title().startswith("you are here: 08")
    plt.close("all")


def test_without_a_chinese_font_the_picture_keeps_english_labels(monkeypatch):
    monkeypatch.setattr(drawing, "cjk_font", lambda sample: None)
    with i18n.speaking("zh"), pytest.warns(UserWarning, match="pylopdf-fonts-zh-cn"):
        ax = diagrams.you_are_here(3)
    assert ax.get_title().startswith("you are here: 03") and drawing.label_overflows(ax) == []
    plt.close("all")
