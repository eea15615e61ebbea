"""The language the course speaks to the learner: English (``"en"``) or Chinese (``"zh"``).

The two editions of a lesson run the same code (notebooks/ and notebooks/zh/, kept in step by
``bertedu.course.editions``); what the code *says* follows this setting: the labels of the teaching
pictures (``bertedu.course.drawing``) and the messages of the exercises' checks
(``bertedu.course.exercises``). A Chinese lesson's first cell calls ``use("zh")``;
``python -m bertedu.course.exercises learn --lang zh`` also starts JupyterLab with
``BERTEDU_LANG=zh``, so every kernel it opens speaks Chinese from the start.

    >>> from bertedu.course import i18n
    >>> i18n.use("zh"); i18n.current()
    'zh'

Introduced for the Chinese edition (notebooks/zh/00_course_map.ipynb).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator, Optional

LANGUAGES = ("en", "zh")
ENVIRONMENT = "BERTEDU_LANG"
_chosen: Optional[str] = None


def _checked(lang: str) -> str:
    if lang not in LANGUAGES:
        raise ValueError(f"language {lang!r}: the course speaks {' or '.join(map(repr, LANGUAGES))}")
    return lang


def current() -> str:
    """The language chosen by ``use``, else ``$BERTEDU_LANG``, else English."""
    if _chosen is not None:
        return _chosen
    return _checked(os.environ.get(ENVIRONMENT, "en") or "en")


def use(lang: str) -> None:
    """Speak ``lang`` from now on in this process (a notebook's kernel)."""
    global _chosen
    _chosen = _checked(lang)


@contextmanager
def speaking(lang: str) -> Iterator[None]:
    """Speak ``lang`` inside the ``with`` block only (tests, and one picture in the other language)."""
    global _chosen
    before, _chosen = _chosen, _checked(lang)
    try:
        yield
    finally:
        _chosen = before
