"""viz.use_cjk_font: Chinese characters in matplotlib figures on any machine (the course's Noto Sans SC)."""

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib as mpl  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from bertedu.course import viz  # noqa: E402


def test_the_course_font_draws_chinese_labels_without_missing_glyphs():
    with mpl.rc_context():
        name = viz.use_cjk_font("我是谁")
        assert name == "Noto Sans SC"  # from pylopdf-fonts-zh-cn, whatever fonts the machine has
        assert viz.use_cjk_font("人民日报") == name
        assert mpl.rcParams["font.family"].count(name) == 1  # appended once, as a fallback after the Latin font
        fig, ax = plt.subplots()
        ax.set_title("我 是 谁: attention")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)" for a box
            fig.canvas.draw()
        plt.close(fig)


def test_characters_no_font_has_give_none():
    with mpl.rc_context():
        assert viz.use_cjk_font("\U000f0000") is None  # a private-use code point: no font draws it


def test_a_bold_label_after_use_cjk_font_prints_no_message_about_the_fonts_one_weight(caplog):
    """Noto Sans SC has one weight: once it is a fallback, every bold label made matplotlib log
    "findfont: Failed to find font weight bold for Noto Sans SC", which landed in lessons' outputs."""
    with mpl.rc_context():
        viz.use_cjk_font("我是谁")
        fig, ax = plt.subplots()
        ax.set_title("BERT 与 GPT", fontweight="bold")
        ax.text(0.5, 0.5, "in bold", fontweight="bold", family=["DejaVu Serif", "Noto Sans SC"])
        fig.canvas.draw()
        plt.close(fig)
    assert not [r for r in caplog.records if "findfont" in r.getMessage()]
