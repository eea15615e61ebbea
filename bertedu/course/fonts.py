"""A font for Chinese characters in matplotlib pictures, on any machine: the course's Noto Sans SC.

    cjk_font(sample)       the name of a font that draws every character of `sample` (registered), or None
    use_cjk_font(sample)   the same, and that font appended to matplotlib's font.family as a fallback

The Chinese edition's pictures (`drawing.translate_labels`) set the font on the labels they change
and leave the rest of matplotlib as it was; a lesson that labels its own plots in Chinese calls
`use_cjk_font` (re-exported by `viz`). Introduced in notebook 03.
"""

from __future__ import annotations

import logging
from typing import Optional


def cjk_font(sample: str = "我是谁") -> Optional[str]:
    """The name of a font that has every character of `sample`, or None when no font has them.

    Registers Noto Sans SC (Google/Adobe, SIL Open Font License 1.1), which the course installs
    with the `pylopdf-fonts-zh-cn` package, and looks at that one first, then at the fonts of the
    machine whose names hint at Chinese, then at the rest (a machine with hundreds of fonts is still
    quick). Changes no setting of matplotlib's."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    wanted = {ord(c) for c in sample if not c.isspace()}
    try:
        from pylopdf_fonts_zh_cn import sans_path

        packaged = str(sans_path())
        if not any(e.fname == packaged for e in font_manager.fontManager.ttflist):
            font_manager.fontManager.addfont(packaged)
    except ImportError:  # a course install has it; without it, look at the fonts of the machine
        packaged = None
    hints = ("CJK", "Hei", "Song", "Ming", "Kai", "WenQuanYi", "Han", "SC", "TC", "Gothic", "PingFang")
    entries = sorted(
        font_manager.fontManager.ttflist,
        key=lambda e: (e.fname != packaged, not any(h in e.name for h in hints)),
    )
    for entry in entries:
        if entry.name.startswith("Last Resort"):  # a placeholder box for every code point
            continue
        try:
            charmap = FT2Font(entry.fname).get_charmap()
        except (OSError, RuntimeError, ValueError):
            continue
        if wanted <= charmap.keys():
            _quiet_about_weights(entry.name)
            return entry.name
    return None


class _OneWeight(logging.Filter):
    """Drops matplotlib's "findfont: Failed to find font weight bold for Noto Sans SC, now using
    400." A CJK font with one weight serves as the fallback for bold labels too (their Chinese
    glyphs drawn regular, as intended); the message would otherwise land in a lesson's outputs."""

    def __init__(self, name: str):
        super().__init__()
        self.font = name

    def filter(self, record: logging.LogRecord) -> bool:
        return not (str(record.msg).startswith("findfont: Failed to find font weight")
                    and len(record.args or ()) > 1 and record.args[1] == self.font)


def _quiet_about_weights(name: str) -> None:
    logger = logging.getLogger("matplotlib.font_manager")
    if not any(isinstance(f, _OneWeight) and f.font == name for f in logger.filters):
        logger.addFilter(_OneWeight(name))


def use_cjk_font(sample: str = "我是谁") -> Optional[str]:
    """Let matplotlib draw Chinese characters, on any machine.

    Finds a font that has every character of `sample` (`cjk_font`: the course's Noto Sans SC
    first), appends it to matplotlib's font.family as a fallback (Latin text keeps the current
    font; matplotlib takes each glyph it lacks from the next family) and returns its name.
    Returns None when no font has the characters (label with pinyin then). Introduced in notebook 03.
    """
    import matplotlib as mpl

    name = cjk_font(sample)
    if name is not None:
        families = list(mpl.rcParams["font.family"])
        if name not in families:
            mpl.rcParams["font.family"] = families + [name]
    return name
