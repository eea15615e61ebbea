"""The course as a static web book (issue 59): every lesson, appendix and page of the docs as one site.

    python -m bertedu.course.book [--out build/book]

Built with Sphinx, MyST-NB and sphinx-book-theme (the `book` extra, docs/book.md says why) from the
notebooks' stored outputs: no notebook is executed (``nb_execution_mode = "off"``). The build reads a
checkout as it is and writes a staged copy of what the book shows into ``<out>/_source`` (never a second
copy to edit: it is remade on every build):

- README.md as the landing page, its course map followed by the twenty lessons in order, each lesson's
  appendices nested under it (the lesson that links an appendix, else the one with its number);
- docs/, TEACHING.md, and the records the pages link to (benchmarks/RESULTS.md, notes/, COMMAND.md files);
- on each lesson, a link to download its notebook and the one command that opens the learner's copy;
- the interactive views keep their stored rendering, with one line saying they are live in JupyterLab.

Offline: math by the MathJax that `jupyter-server-mathjax` installs, copied into the site; the theme's
fonts, the search index and the scripts are the site's own files; MyST-NB's widget loader (a CDN) is off.

Editions: English is the site's root; another edition (``EDITIONS``, e.g. Chinese once it lands) is built
from its own notebooks and pages into ``<out>/<code>/``, and every page then links its other editions.

May import: nothing of bertedu above `course`; Sphinx only when building.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "build" / "book"
DOCS_ORDER = ("setup", "library", "command_line", "tokenization", "pretraining", "minilm_mlm", "finetuning",
              "distillation", "speed", "gpu_route", "book", "glossary")
LINK = re.compile(r"(\]\()([^)\s]+)(\))")  # a markdown link or image: ](target)
LEARN = "python -m bertedu.course.exercises learn"
# Chinese (the glossary, 03's 我 是 谁) in the font the course's figures use, served by the site; only
# CJK characters are drawn with it (unicode-range), and a page without them never loads it
CJK_CSS = """@font-face { font-family: "bertedu CJK"; src: url("fonts/NotoSansSC-Regular.otf") format("opentype");
  unicode-range: U+2E80-2FDF, U+3000-303F, U+3100-31BF, U+3400-4DBF, U+4E00-9FFF, U+F900-FAFF, U+FF00-FFEF; }
html { --pst-font-family-base: "bertedu CJK", var(--pst-font-family-base-system);
  --pst-font-family-heading: "bertedu CJK", var(--pst-font-family-base-system);
  --pst-font-family-monospace: var(--pst-font-family-monospace-system), "bertedu CJK"; }
"""
FAVICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" '
           'fill="#2a6f97"/><text x="16" y="23" font-size="20" text-anchor="middle" fill="white" '
           'font-family="sans-serif">B</text></svg>')


@dataclass(frozen=True)
class Edition:
    """One language of the book: its code (the folder under the site's root; "" for the root) and name."""

    code: str
    name: str
    notebooks: str = "notebooks"  # where its lessons live in the checkout
    docs: str = "docs"
    landing: str = "README.md"  # the checkout's pages that become its index and its teacher's guide
    teaching: str = "TEACHING.md"
    learn: str = LEARN  # the command that makes the learner's copies of its lessons
    shared_docs: tuple = ()  # for a translation: the pages of docs/ it shows itself (the others link to English)


EDITIONS = (Edition("", "English"),
            Edition("zh", "中文", notebooks="notebooks/zh", landing="README.zh-CN.md", teaching="TEACHING.zh-CN.md",
                    learn=LEARN + " --lang zh", shared_docs=("glossary",)))


def lessons(root: Path, edition: Edition = EDITIONS[0]) -> list[Path]:
    """The lessons 00-19 in course order."""
    return sorted((root / edition.notebooks).glob("[0-9][0-9]_*.ipynb"))


def appendices_by_lesson(root: Path, edition: Edition = EDITIONS[0]) -> dict[str, list[Path]]:
    """Each appendix under the lesson that links it (the first such lesson), else the lesson with its number."""
    lesson_paths = lessons(root, edition)
    out: dict[str, list[Path]] = {p.stem: [] for p in lesson_paths}
    for appendix in sorted((root / edition.notebooks / "appendix").glob("*.ipynb")):
        linked = [p for p in lesson_paths if f"appendix/{appendix.name}" in p.read_text(encoding="utf-8")]
        same_number = [p for p in lesson_paths if p.name[:2] == appendix.name[:2]]
        owner = (linked or same_number or lesson_paths[-1:])[0]
        out[owner.stem].append(appendix)
    return out


def _local_targets(text: str) -> list[str]:
    """The relative link and image targets of a markdown text, without their #anchors."""
    targets = []
    for _, target, _ in LINK.findall(text):
        path = target.split("#")[0]
        if path and not re.match(r"[a-z]+:", path) and not path.startswith("/"):
            targets.append(path)
    return targets


def _markdown_of(path: Path) -> str:
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def linked_files(root: Path, pages: list[Path]) -> set[Path]:
    """Files of the checkout that the pages link to (followed through linked .md pages), as paths under root."""
    seen: set[Path] = set()
    todo = list(pages)
    while todo:
        page = todo.pop()
        for target in _local_targets(_markdown_of(page)):
            path = (page.parent / target).resolve()
            if not path.is_file() or not path.is_relative_to(root) or path in seen \
                    or path.relative_to(root) in translation_files(root):  # another edition's site shows it
                continue
            seen.add(path)
            if path.suffix == ".md":
                todo.append(path)
    return {p.relative_to(root) for p in seen}


# -- the staged sources -------------------------------------------------------------------------------------

def _stage_path(rel: Path) -> Path:
    """Where a file of the checkout goes in the book's sources: README.md is the landing page."""
    return Path("index.md") if rel == Path("README.md") else rel


def _rewrite_links(text: str, page: Path, root: Path) -> str:
    """Links of a page (its path under root) pointed at the staged pages: README.md -> index.md, folder -> its index;
    a link to a translation's page (README.zh-CN.md, notebooks/zh/...) goes to that edition's site."""
    text = _links_to_translations(text, page, root)

    def fix(m: re.Match) -> str:
        target = m.group(2)
        path, _, anchor = target.partition("#")
        if not path or re.match(r"[a-z]+:", path) or path.startswith("/"):
            return m.group(0)
        full = (root / page.parent / path).resolve()
        if full.is_dir():
            path = path.rstrip("/") + "/index.md"
        elif full == root / "README.md":
            path = path[: -len("README.md")] + "index.md"
        return m.group(1) + path + ("#" + anchor if anchor else "") + m.group(3)

    return LINK.sub(fix, text)


def _header_cell(rel: Path, edition: Edition = EDITIONS[0]) -> dict:
    """The cell a lesson's page opens with: download the notebook, or open the learner's copy."""
    learner = "learner/" + rel.relative_to("notebooks").as_posix()
    download = f"{{download}}`{rel.name} </_notebooks/{rel.as_posix()}>`"
    if edition.code == "zh":
        text = (f"````{{admonition}} 运行本课\n:class: tip\n下载 {download}（含已存储的输出）；或者在课程的副本里，用一条"
                f"命令做出你自己的各课副本（练习的答案已去掉）并在 JupyterLab 中打开，本课是 `{learner}`：\n\n"
                f"```bash\n{edition.learn}\n```\n````")
    else:
        text = (f"````{{admonition}} Run this lesson\n:class: tip\nDownload {download} (with its stored outputs), "
                f"or, in a copy of the course, make your own copies of the lessons (the exercises' solutions removed) "
                f"and open them in JupyterLab with one command; this one is `{learner}`:\n\n"
                f"```bash\n{edition.learn}\n```\n````")
    return {"cell_type": "markdown", "id": "book-header", "metadata": {}, "source": text}


def _note(text: str) -> dict:
    html = f'<p class="bertedu-live-note"><em>{text}</em></p>'
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": html, "text/plain": text}}


WIDGET_NOTE = "Live in JupyterLab: run this cell there to use its widgets, which need a running kernel."
BERTVIZ_NOTE = ("Live in JupyterLab: run this cell there and bertviz draws its view; the page keeps the "
                "stored output below, whose script runs only in a running notebook.")


def _with_live_notes(outputs: list[dict]) -> list[dict]:
    """Widget views replaced by a note (their JavaScript manager would come from a CDN); bertviz noted."""
    out = []
    for output in outputs:
        data = output.get("data", {})
        if "application/vnd.jupyter.widget-view+json" in data:
            out.append(_note(WIDGET_NOTE))
            continue
        if "bertviz-" in "".join(data.get("text/html", "")):
            out.append(_note(BERTVIZ_NOTE))
        out.append(output)
    return out


def _stage_notebook(root: Path, rel: Path, stage: Path, appendices: list[Path]) -> None:
    nb = json.loads((root / rel).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = _rewrite_links("".join(cell["source"]), rel, root)
        if cell["cell_type"] == "code":
            cell["outputs"] = _with_live_notes(cell["outputs"])
    nb["cells"].insert(1, _header_cell(rel))
    if appendices:
        entries = "\n".join(f"appendix/{p.stem}" for p in appendices)
        nb["cells"].append({"cell_type": "markdown", "id": "book-appendices", "metadata": {},
                            "source": f"```{{toctree}}\n:hidden:\n{entries}\n```"})
    (stage / rel).parent.mkdir(parents=True, exist_ok=True)
    (stage / rel).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    (stage / "_notebooks" / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / rel, stage / "_notebooks" / rel)


def _course_map_links(readme: str, lesson_names: list[str]) -> str:
    """The README's course map: each notebook's name a link to its page."""
    for name in lesson_names:
        readme = readme.replace(f"| `{name}` |", f"| [`{name}`](notebooks/{name}) |")
    return readme


def _toctree(caption: str, entries: list[str]) -> str:
    return f"\n```{{toctree}}\n:hidden:\n:caption: {caption}\n" + "\n".join(entries) + "\n```\n"


def _docs_pages(root: Path, edition: Edition) -> list[Path]:
    """docs/*.md in reading order (the glossary last), as paths under root."""
    names = [p.stem for p in sorted((root / edition.docs).glob("*.md"))]
    ordered = [n for n in DOCS_ORDER if n in names] + [n for n in names if n not in DOCS_ORDER]
    return [Path(edition.docs) / f"{n}.md" for n in ordered]


def _docs_index(docs: list[Path], root: Path) -> str:
    """A page listing the docs, each with its title: what the README's link to docs/ opens."""
    lines = ["# The docs\n", "Pages beside the lessons: set-up, the library, the command line, the studies, "
             "the GPU route and the glossary.\n"]
    for page in docs:
        title = (root / page).read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
        lines.append(f"- [{title}]({page.name})")
    return "\n".join(lines) + "\n"


def _stage_pages(root: Path, stage: Path, edition: Edition) -> None:
    """README (as index.md), docs/ and TEACHING.md, the files they link to, and the sidebar's toctrees."""
    lesson_paths = lessons(root, edition)
    docs = _docs_pages(root, edition)
    pages = [root / "README.md", root / "TEACHING.md"] + [root / p for p in docs] + lesson_paths
    pages += [p for group in appendices_by_lesson(root, edition).values() for p in group]
    records = []
    for rel in sorted(linked_files(root, pages) | {Path("README.md"), Path("TEACHING.md"), *docs}):
        if rel.suffix == ".ipynb":
            continue
        target = stage / _stage_path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.suffix == ".md":
            target.write_text(_rewrite_links((root / rel).read_text(encoding="utf-8"), rel, root), encoding="utf-8")
            if rel.parts[0] != edition.docs and rel not in (Path("README.md"), Path("TEACHING.md")):
                records.append(rel.with_suffix("").as_posix())
        else:
            shutil.copy(root / rel, target)
    (stage / edition.docs / "index.md").write_text(_docs_index(docs, root), encoding="utf-8")
    index = stage / "index.md"
    text = _course_map_links(index.read_text(encoding="utf-8"), [p.name for p in lesson_paths])
    text += _toctree("Lessons", [f"{edition.notebooks}/{p.stem}" for p in lesson_paths])
    text += _toctree("Docs", [f"{edition.docs}/index"] + [p.with_suffix("").as_posix() for p in docs] + ["TEACHING"])
    text += _toctree("Records", records)
    index.write_text(text, encoding="utf-8")


def stage_sources(root: Path, stage: Path, edition: Edition = EDITIONS[0]) -> None:
    """Write the book's sources (pages, lessons, pictures) from the checkout at root into stage, emptied first."""
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    _stage_pages(root, stage, edition)
    for lesson, appendices in appendices_by_lesson(root, edition).items():
        rel = Path(edition.notebooks) / f"{lesson}.ipynb"
        _stage_notebook(root, rel, stage, appendices)
        for appendix in appendices:
            _stage_notebook(root, appendix.relative_to(root), stage, [])


# -- the translations (the Chinese edition), each its own site under <out>/<code>/ --------------------------

# [text](target) or ![alt](target); the text may hold one level of brackets ("从 [CLS] 得到", an alt with "[UNK]")
FULL_LINK = re.compile(r"(!?)\[((?:[^\]\[\n]|\[[^\]\n]*\])*)\]\(([^)\s]+)\)")


def edition_files(root: Path, edition: Edition) -> dict[Path, Path]:
    """A translation's pages: path in the checkout -> path in its staged sources (lessons under notebooks/)."""
    files = {Path(edition.landing): Path("index.md"), Path(edition.teaching): Path("TEACHING.md")}
    files.update({Path(edition.docs) / f"{n}.md": Path("docs") / f"{n}.md" for n in edition.shared_docs})
    files.update({p.relative_to(root): Path("notebooks") / p.name for p in lessons(root, edition)})
    return {k: v for k, v in files.items() if (root / k).is_file()}


def in_checkout(root: Path, edition: Edition) -> bool:
    """Whether a translation is built: its lessons and its landing page are in this checkout."""
    return bool(lessons(root, edition)) and (root / edition.landing).is_file()


def translation_files(root: Path) -> dict[Path, str]:
    """The pages only a translation shows (not the docs it shares): checkout path -> URL from the site's root."""
    return {rel: f"{e.code}/{staged.with_suffix('.html').as_posix()}" for e in EDITIONS[1:]
            for rel, staged in edition_files(root, e).items() if rel.parts[0] != e.docs}


def _target(page: Path, target: str) -> tuple[Path | None, str]:
    """(the checkout path a relative link of page names, its #anchor), or (None, "") for a URL or a bare anchor."""
    path, _, anchor = target.partition("#")
    if not path or re.match(r"[a-z]+:", path) or path.startswith("/"):
        return None, ""
    return Path(os.path.normpath(page.parent / path)), ("#" + anchor if anchor else "")


def _links_to_translations(text: str, page: Path, root: Path) -> str:
    """An English page's links to a translation's pages, as plain links into that edition's site."""
    elsewhere = translation_files(root)
    built = {e.code for e in EDITIONS[1:] if in_checkout(root, e)}
    up = "../" * len(_stage_path(page).parent.parts)

    def fix(m: re.Match) -> str:
        rel, anchor = _target(page, m.group(3))
        if rel not in elsewhere or m.group(1):
            return m.group(0)
        if elsewhere[rel].split("/")[0] not in built:  # its site is not built from this checkout: the words only
            return m.group(2)
        return f'<a href="{up}{elsewhere[rel]}{anchor}">{m.group(2)}</a>'

    return FULL_LINK.sub(fix, text)


def _translated_links(text: str, page: Path, staged: Path, files: dict[Path, Path], copies: set[Path]) -> str:
    """A translation's links: to its own pages within its site, to an English page into the English site,
    to a picture or file by a copy of it in its sources (collected in copies)."""
    up = Path(os.path.relpath(".", staged.parent))

    def fix(m: re.Match) -> str:
        rel, anchor = _target(page, m.group(3))
        if rel is None:
            return m.group(0)
        if rel in files:
            new = os.path.relpath(files[rel], staged.parent)
        elif rel.suffix in (".md", ".ipynb") and not m.group(1):
            url = (Path("..") / up / _stage_path(rel).with_suffix(".html")).as_posix()
            return f'<a href="{url}{anchor}">{m.group(2)}</a>'
        else:
            copies.add(rel)
            new = os.path.relpath(rel, staged.parent)
        return f"{m.group(1)}[{m.group(2)}]({Path(new).as_posix()}{anchor})"

    return FULL_LINK.sub(fix, text)


def _stage_translated_lesson(root: Path, rel: Path, stage: Path, staged: Path, files: dict, copies: set,
                             edition: Edition) -> None:
    nb = json.loads((root / rel).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = _translated_links("".join(cell["source"]), rel, staged, files, copies)
        if cell["cell_type"] == "code":
            cell["outputs"] = _with_live_notes(cell["outputs"])
    nb["cells"].insert(1, _header_cell(Path("notebooks") / edition.code / rel.name, edition))
    nb["cells"][1]["source"] = nb["cells"][1]["source"].replace(f"</_notebooks/notebooks/{edition.code}/",
                                                                "</_notebooks/notebooks/")
    (stage / staged).parent.mkdir(parents=True, exist_ok=True)
    (stage / staged).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    (stage / "_notebooks" / staged).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / rel, stage / "_notebooks" / staged)


EDITION_TOC = {"zh": ("课程", "文档")}


def stage_translation(root: Path, stage: Path, edition: Edition) -> None:
    """A translation's sources: its landing page as index.md, its lessons, guide and shared docs, what they show."""
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    files, copies = edition_files(root, edition), set()
    # a link to an English lesson from a page of this edition opens this edition's lesson
    targets = {**{Path("notebooks") / r.name: s for r, s in files.items() if r.suffix == ".ipynb"}, **files}
    for rel, staged in files.items():
        if rel.suffix == ".ipynb":
            _stage_translated_lesson(root, rel, stage, staged, targets, copies, edition)
            continue
        (stage / staged).parent.mkdir(parents=True, exist_ok=True)
        text = _translated_links((root / rel).read_text(encoding="utf-8"), rel, staged, targets, copies)
        (stage / staged).write_text(text, encoding="utf-8")
    for rel in copies:
        if (root / rel).is_file():
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / rel, stage / rel)
    lesson_pages = sorted(s.with_suffix("").as_posix() for r, s in files.items() if r.suffix == ".ipynb")
    docs = [f"docs/{n}" for n in edition.shared_docs] + ["TEACHING"]
    lessons_caption, docs_caption = EDITION_TOC.get(edition.code, ("Lessons", "Docs"))
    with (stage / "index.md").open("a", encoding="utf-8") as index:
        index.write(_toctree(lessons_caption, lesson_pages) + _toctree(docs_caption, docs))


def docnames(stage: Path) -> set[str]:
    """The pages of staged sources, as Sphinx names them (notebooks/08_x, docs/glossary, index)."""
    return {p.relative_to(stage).with_suffix("").as_posix() for p in stage.rglob("*")
            if p.suffix in (".md", ".ipynb") and p.relative_to(stage).parts[0] not in ("_notebooks", "_book_static")}


# -- Sphinx ----------------------------------------------------------------------------------------------

def _mathjax_folder() -> Path:
    """MathJax 2.7 as the `jupyter-server-mathjax` package installs it (the book extra)."""
    try:
        import jupyter_server_mathjax
    except ImportError as error:
        raise ImportError('the web book needs the "book" extra: pip install -e ".[book]"') from error
    return Path(jupyter_server_mathjax.__file__).parent / "static"


def sphinx_config(edition: Edition = EDITIONS[0]) -> dict:
    """conf.py's settings: nothing executes, nothing is fetched from outside the site."""
    return {
        "project": "bertedu: learn BERT by building it",
        "author": "the bertedu authors",
        "language": "zh_CN" if edition.code == "zh" else "en",
        "extensions": ["myst_nb", "sphinx_copybutton", "sphinx.ext.mathjax"],
        "nb_execution_mode": "off",  # the stored outputs, never a run
        "nb_ipywidgets_js": {},  # its loader comes from a CDN; widget views carry a note instead
        "nb_merge_streams": True,
        "myst_enable_extensions": ["dollarmath", "amsmath", "html_image"],
        "myst_heading_anchors": 4,  # README's "#set-up" style links
        "exclude_patterns": ["_notebooks/**", "**/.ipynb_checkpoints"],
        "html_theme": "sphinx_book_theme",
        "html_title": "bertedu — 动手构建 BERT" if edition.code == "zh" else "bertedu — learn BERT by building it",
        "html_theme_options": {"show_toc_level": 2, "home_page_in_toc": True, "use_download_button": False,
                               "use_fullscreen_button": False, "navigation_with_keys": False},
        "html_static_path": ["_book_static"],
        "html_css_files": ["book.css"],
        "html_copy_source": False,
        "html_show_sourcelink": False,
        "html_last_updated_fmt": None,
        "html_use_index": False,  # no index entries in the book; genindex.html would be a page without the switch
        "html_context": {"editions": [{"code": e.code, "name": e.name} for e in EDITIONS]},
        # MathJax 2.7 with its STIX web fonts, set up as Jupyter's classic notebook set it up
        "mathjax_path": "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full",
        "mathjax2_config": {"tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]],
                                        "processEscapes": True,
                                        # MyST-NB marks each notebook tex2jax_ignore: only Sphinx's math spans
                                        "processClass": "math", "ignoreClass": "tex2jax_ignore|document"},
                            "messageStyle": "none",
                            # no hidden MathML copy and no preview: their styles name TeX fonts not shipped
                            "menuSettings": {"assistiveMML": False}, "AssistiveMML": {"disabled": True},
                            "fast-preview": {"disabled": True},
                            "HTML-CSS": {"availableFonts": [], "preferredFont": None, "webFont": "STIX-Web",
                                         "imageFont": None}},
        "html_favicon": "_book_static/favicon.svg",
        # a link to a glossary term names an <a id> that MyST cannot see; tests/test_book.py checks each anchor
        "suppress_warnings": ["myst.header", "myst.xref_missing"],
    }


# Every page links the same page in the other editions (or their landing page): added to the page's body when
# Sphinx renders it. SWITCH: the links, {"name", "pages": {page: URL from the site's root}, "home": URL}.
SWITCH_CODE = '''

def _edition_switch(app, pagename, templatename, context, doctree):
    if "body" not in context:
        return
    up = "../" * pagename.count("/")
    links = " · ".join(f'<a class="bertedu-edition" href="{up}{s["pages"].get(pagename, s["home"])}">{s["name"]}</a>'
                       for s in SWITCH)
    context["body"] = f'<p class="bertedu-editions">{links}</p>' + context["body"]


def setup(app):
    app.connect("html-page-context", _edition_switch)
'''


def switch_links(pages: set[str], others: list[tuple[Edition, str, set[str]]]) -> list[dict]:
    """For a site with these pages, a link per other edition (its name, the URL prefix of its site from this
    site's root, its pages): to the same page where it has one, else to its landing page."""
    return [{"name": e.name, "home": f"{prefix}index.html",
             "pages": {p: f"{prefix}{p}.html" for p in sorted(pages & theirs)}} for e, prefix, theirs in others]


def write_config(stage: Path, edition: Edition = EDITIONS[0], switch: list[dict] | None = None) -> None:
    """conf.py and the site's own copy of MathJax, in the staged sources."""
    settings = sphinx_config(edition)
    if edition.code == "zh":  # the course's terms as words of the Chinese search index (jieba's user dictionary)
        (stage / "_search_words.txt").write_text("\n".join(_chinese_terms(stage)) + "\n", encoding="utf-8")
        settings["html_search_options"] = {"dict": str(stage / "_search_words.txt")}
    lines = ['"""Written by bertedu.course.book; remade on every build."""']
    lines += [f"{name} = {value!r}" for name, value in settings.items()]
    lines += [f"SWITCH = {switch or []!r}", SWITCH_CODE]
    if edition.code == "zh":  # jieba says how it built its dictionary at DEBUG level, on every build
        lines += ["import logging", "import jieba", "jieba.setLogLevel(logging.WARNING)"]
        # Sphinx 9 ends zh's language_data.js with `window.Stemmer = ChineseStemmer`, a stemmer it does not ship
        # (it ships the English one, which its Chinese index uses for Latin words), and the search page stops there
        lines += ["from sphinx.search.zh import SearchChinese", "SearchChinese.language_name = 'English'"]
    (stage / "conf.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    static = stage / "_book_static"
    shutil.copytree(_mathjax_folder(), static / "mathjax", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.py", "__pycache__", "SVG", "localization"))
    (static / "favicon.svg").write_text(FAVICON, encoding="utf-8")
    from pylopdf_fonts_zh_cn import sans_path  # Noto Sans SC, SIL Open Font License

    (static / "fonts").mkdir(exist_ok=True)
    shutil.copy(sans_path(), static / "fonts" / "NotoSansSC-Regular.otf")
    (static / "book.css").write_text(CJK_CSS, encoding="utf-8")


def _chinese_terms(stage: Path) -> list[str]:
    """The glossary's Chinese terms (docs/glossary.md's second column), split where it lists several."""
    glossary = (stage / "docs" / "glossary.md").read_text(encoding="utf-8") if (stage / "docs/glossary.md").exists() else ""
    cells = [row.split("|")[2] for row in glossary.splitlines() if row.startswith("| <a id=")]
    words = {w.strip() for cell in cells for w in re.split(r"[、/（）()，,;；]", cell)}
    return sorted(w for w in words if re.search(r"[\u4e00-\u9fff]", w))


def _sphinx(stage: Path, out: Path, quiet: bool) -> None:
    from sphinx.cmd.build import build_main

    args = ["-b", "html", "-d", str(stage / ".doctrees"), str(stage), str(out)] + (["-q"] if quiet else [])
    if build_main(args) != 0:
        raise RuntimeError(f"sphinx-build failed on the staged sources in {stage}")


def build(out: Path = DEFAULT_OUT, root: Path = ROOT, quiet: bool = True) -> dict:
    """Build the site into out (a folder any static host serves), each translation into out/<code>/; returns
    what was built and how long it took."""
    start = time.perf_counter()
    out = Path(out).resolve()
    stage = out.parent / f"{out.name}-source"
    stage_sources(root, stage)
    sites = [(EDITIONS[0], stage, out, "")]
    for edition in EDITIONS[1:]:
        if in_checkout(root, edition):  # else not in this checkout: left out
            edition_stage = out.parent / f"{out.name}-source-{edition.code}"
            stage_translation(root, edition_stage, edition)
            sites.append((edition, edition_stage, out / edition.code, f"{edition.code}/"))
    pages = {e.code: docnames(s) for e, s, _, _ in sites}
    for edition, edition_stage, _, prefix in sites:
        up = "../" * prefix.count("/")
        others = [(e, up + p, pages[e.code]) for e, _, _, p in sites if e != edition]
        write_config(edition_stage, edition, switch_links(pages[edition.code], others))
    if out.exists():
        shutil.rmtree(out)
    for _, edition_stage, edition_out, _ in sites:
        _sphinx(edition_stage, edition_out, quiet)
    pages = sorted(p.relative_to(out) for p in out.rglob("*.html"))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return {"out": out, "pages": len(pages), "bytes": size, "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bertedu.course.book", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the site's folder (default: {DEFAULT_OUT})")
    parser.add_argument("--verbose", action="store_true", help="Sphinx's own progress and warnings")
    args = parser.parse_args(argv)
    result = build(args.out, quiet=not args.verbose)
    print(f"{result['out']}: {result['pages']} pages, {result['bytes'] / 1e6:.1f} MB, "
          f"built in {result['seconds']:.0f} s; open {result['out'] / 'index.html'}")


if __name__ == "__main__":
    main()
