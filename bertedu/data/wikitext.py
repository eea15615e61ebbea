"""WikiText (Merity et al. 2016) read as articles of sentences.

Introduced with the GPU route (notebook 07 prints its commands on a local WikiText-103).
WikiText is Wikipedia text already tokenised into one paragraph per line:

     = Valkyria Chronicles III =            an article's title (level 1): a new document
     = = Gameplay = =                       a section heading inside the article
     Senjō no Valkyria 3 is a 2011 ...      a paragraph, tokens separated by spaces

and numbers keep their separators as marked tokens: `1 @,@ 000`, `3 @.@ 5`, `two @-@ year`.
Read line by line (each line or each Hugging Face row a "document") a 512-token example
rarely fills (most paragraphs are short); read here, an article is one document, its
paragraphs cut into sentences, and the marks are undone (`1,000`, `3.5`, `two-year`).
Headings are dropped: they are not sentences. Both the published files
(`wiki.train.tokens`, `wiki.train.raw`) and the `wikitext` data set on the Hugging Face Hub
(one row per line) go through `wikitext_articles`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from .sentences import split_sentences

Document = list[str]

_MARKS = re.compile(r" @([-,.])@ ")  # ` @-@ ` -> `-`, ` @,@ ` -> `,`, ` @.@ ` -> `.`
_HEADING = re.compile(r"^(=+) (.*) \1$")  # `= Title =` (level 1), `= = Section = =` (level 2) ...


def heading_level(line: str) -> int:
    """0 for a paragraph, 1 for an article title `= T =`, 2 for `= = S = =`, and so on."""
    match = _HEADING.match(line.strip())
    if match is None:
        return 0
    level, inner = 1, match.group(2)
    while inner.startswith("= ") and inner.endswith(" ="):  # ` = = S = = `: one `=` per level
        level, inner = level + 1, inner[2:-2]
    return level


def undo_marks(text: str) -> str:
    """WikiText's number and hyphen marks back to plain text: `3 @.@ 5` -> `3.5`."""
    return _MARKS.sub(r"\1", text)


def wikitext_articles(lines: Iterable[str], lang: str = "en") -> Iterator[Document]:
    """WikiText lines (a file's lines or the data set's rows) -> one document per article.

    A level-1 heading starts an article; deeper headings and blank lines only separate
    paragraphs; each paragraph is cut into sentences once its marks are undone.
    """
    article: Document = []
    for line in lines:
        level = heading_level(line)
        if level == 1:
            if article:
                yield article
            article = []
        elif level == 0 and line.strip():
            article.extend(split_sentences(undo_marks(line.strip()), lang))
    if article:
        yield article


def is_wikitext_file(name: str) -> bool:
    """The published WikiText file names: wiki.train.tokens, wiki.valid.raw, ..."""
    return re.fullmatch(r"wiki\.(train|valid|test)\.(tokens|raw)(\.gz|\.bz2)?", name) is not None


def is_wikitext_dataset(name: str) -> bool:
    """`hf:wikitext:...` (or a copy of it under a user's name: `.../wikitext`)."""
    return name.rsplit("/", 1)[-1] == "wikitext"
