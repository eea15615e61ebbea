"""The course as a web book (issue 59; bertedu.course.book): built once from the stored notebooks, then read.

Over the whole built site, by parsing its HTML: every lesson 00-19 and every appendix has a page, every
lesson is in the sidebar in course order, every internal link and anchor resolves, and no page names a
script, style, font or picture outside the site. In headless Chromium (as tests/test_browser.py drives
it), with the site served on 127.0.0.1: every page loads with no failed request and no request that
leaves the site, every picture shows, the math is typeset, and the search finds "masked language model".

Screenshots (a lesson with math and a picture, the glossary) go to $BERTEDU_BOOK_SCREENSHOTS when it is
set, else to this test's temporary folder. The browser tests are skipped, saying why, only where Chromium
or chromedriver is not installed (`apt-get install chromium chromium-driver`; .ci/run installs them).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

pytest.importorskip("sphinx", reason='the web book needs the "book" extra: pip install -e ".[book]"')

from bertedu.course import book  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                    reason="needs Chromium and chromedriver on PATH: apt-get install -y chromium chromium-driver")
pytestmark = pytest.mark.slow
MATH_LESSON = "notebooks/03_self_attention.html"  # attention derived in formulas, and heat maps
CHINESE_LESSON = "zh/notebooks/05_pretraining_data.html"  # the Chinese edition: prose, map and masking pictures


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The book built once into a temporary folder: bertedu.course.book.build's summary."""
    result = book.build(tmp_path_factory.mktemp("book") / "site")
    print(f"\nbook: {result['pages']} pages, {result['bytes'] / 1e6:.1f} MB, built in {result['seconds']:.1f} s")
    return result


class _Page(HTMLParser):
    """A page's ids, its links (a href) and what it loads (img, script, link, iframe, source)."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.loads = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        for key in ("src", "href"):
            if tag in ("img", "script", "link", "iframe", "source") and attrs.get(key):
                self.loads.append(attrs[key])


@functools.lru_cache(maxsize=None)
def _parsed(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _pages(site) -> list[Path]:
    """The site's pages (not the theme's template fragments that Sphinx copies into _static/)."""
    return sorted(p for p in site["out"].rglob("*.html") if "_static" not in p.relative_to(site["out"]).parts)


def test_every_lesson_and_appendix_has_a_page_and_the_sidebar_lists_the_lessons_in_order(site):
    out = site["out"]
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "appendix").glob("*.ipynb"))
    missing = [p.name for p in notebooks if not (out / p.relative_to(ROOT).with_suffix(".html")).is_file()]
    assert not missing, f"no page for {missing}"
    sidebar = [link for link in _parsed(out / "index.html").links if re.match(r"notebooks/\d\d_\w+\.html$", link)]
    numbers = list(dict.fromkeys(link[len("notebooks/"):][:2] for link in sidebar))
    assert numbers == [f"{n:02d}" for n in range(20)], f"the lessons linked from the landing page: {numbers}"
    lesson = _parsed(out / "notebooks/05_pretraining_data.html")
    assert any(link.endswith("05_pretraining_data.ipynb") for link in lesson.links), "no download link"
    text = re.sub(r"<[^>]+>", "", (out / "notebooks/05_pretraining_data.html").read_text(encoding="utf-8"))
    assert book.LEARN in text and "learner/05_pretraining_data.ipynb" in text


def test_the_chinese_edition_has_every_lesson_in_order_and_every_page_links_the_other_edition(site):
    out = site["out"]
    chinese = sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))
    assert len(chinese) == 20, "the Chinese edition's lessons (notebooks/zh/)"
    missing = [p.name for p in chinese if not (out / "zh" / "notebooks" / p.with_suffix(".html").name).is_file()]
    assert not missing, f"no Chinese page for {missing}"
    sidebar = [link for link in _parsed(out / "zh" / "index.html").links if re.match(r"notebooks/\d\d_\w+\.html$", link)]
    assert list(dict.fromkeys(link[len("notebooks/"):][:2] for link in sidebar)) == [f"{n:02d}" for n in range(20)]
    text = re.sub(r"<[^>]+>", "", (out / CHINESE_LESSON).read_text(encoding="utf-8"))
    assert "--lang zh" in text and "learner/zh/05_pretraining_data.ipynb" in text
    without = []
    for page in _pages(site):
        html = page.read_text(encoding="utf-8")
        if 'class="bd-article"' in html and 'class="bertedu-editions"' not in html:
            without.append(page.relative_to(out).as_posix())
    assert not without, f"pages without the language switch: {without[:10]}"
    switch = [link for link in _parsed(out / CHINESE_LESSON).links if link.endswith("05_pretraining_data.html")]
    assert "../../notebooks/05_pretraining_data.html" in switch, "a Chinese lesson links its English lesson"
    assert "../zh/notebooks/05_pretraining_data.html" in _parsed(out / "notebooks/05_pretraining_data.html").links


def test_a_link_to_a_translation_opens_its_site_only_when_it_is_built(tmp_path):
    """README.md links README.zh-CN.md from its first lines; while the checkout holds no Chinese lessons the
    Chinese site is not built, and the English page keeps the link's words, not a link to nothing."""
    (tmp_path / "README.zh-CN.md").write_text("# 中文\n", encoding="utf-8")
    text = "中文版：[README.zh-CN.md](README.zh-CN.md) · [TEACHING.md](TEACHING.md)"
    assert book._links_to_translations(text, Path("README.md"), tmp_path) == \
        "中文版：README.zh-CN.md · [TEACHING.md](TEACHING.md)"
    (tmp_path / "notebooks" / "zh").mkdir(parents=True)
    (tmp_path / "notebooks" / "zh" / "00_course_map.ipynb").write_text("{}", encoding="utf-8")
    assert book.in_checkout(tmp_path, book.EDITIONS[1])
    assert book._links_to_translations(text, Path("README.md"), tmp_path) == \
        '中文版：<a href="zh/index.html">README.zh-CN.md</a> · [TEACHING.md](TEACHING.md)'


def _internal(base: Path, page: Path, ref: str) -> tuple[Path, str] | None:
    """(file, fragment) that a link of page names inside the site, or None for a link that leaves it."""
    url = urlparse(ref)
    if url.scheme or ref.startswith("//"):
        return None
    target = page if not url.path else (page.parent / unquote(url.path)).resolve()
    if target.is_dir():
        target = target / "index.html"
    return target, unquote(url.fragment)


def test_every_internal_link_and_anchor_resolves(site):
    out, broken = site["out"], []
    for page in _pages(site):
        parsed = _parsed(page)
        for ref in parsed.links + parsed.loads:
            found = _internal(out, page, ref)
            if found is None:
                continue
            target, fragment = found
            if not target.is_file() or not target.is_relative_to(out):
                broken.append(f"{page.relative_to(out)} -> {ref} (no such file)")
            elif fragment and target.suffix == ".html" and fragment not in _parsed(target).ids:
                broken.append(f"{page.relative_to(out)} -> {ref} (no id {fragment!r})")
    assert not broken, f"{len(broken)} broken links, the first 20: {broken[:20]}"


def test_no_page_loads_anything_from_outside_the_site(site):
    outside = [(p.name, ref) for p in _pages(site) for ref in _parsed(p).loads if urlparse(ref).scheme or ref.startswith("//")]
    assert not outside, f"loaded from outside the site: {outside[:10]}"


# -- in the browser ------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def served(site):
    """The site on http://127.0.0.1:<port>/, as a static host serves it."""
    handler = functools.partial(_QuietHandler, directory=str(site["out"]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def chromium(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)  # no Selenium Manager download
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    folder = os.environ.get("BERTEDU_BOOK_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("book-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _network(driver) -> tuple[list[str], list[str]]:
    """The URLs requested since the last call, and those that failed (with the reason)."""
    requested, failed, ids = [], [], {}
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            ids[params["requestId"]] = params["request"]["url"]
            requested.append(params["request"]["url"])
        elif message["method"] == "Network.responseReceived" and params["response"]["status"] >= 400:
            failed.append(f"{params['response']['url']} ({params['response']['status']})")
        # MathJax's HTML-CSS output probes font loading with a font at about:blank, which never loads
        elif message["method"] == "Network.loadingFailed" and not params.get("canceled") \
                and ids.get(params["requestId"]) != "about:blank":
            failed.append(f"{ids.get(params['requestId'], params['requestId'])} ({params.get('errorText')})")
    return requested, failed


_TYPESET_JS = """
    const math = [...document.querySelectorAll('.math.notranslate')];  // Sphinx's, not MathJax's own
    return math.every(m => m.querySelector('.MathJax, .MathJax_Display'));
"""


def _load(driver, url: str) -> None:
    driver.get(url)
    deadline = time.monotonic() + 30
    while driver.execute_script("return document.readyState") != "complete" and time.monotonic() < deadline:
        time.sleep(0.1)
    # MathJax typesets after the load event: wait until every formula holds its drawing
    while not driver.execute_script(_TYPESET_JS) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)  # what a page asks for after its load event (fonts, the search index)


_IMAGES_JS = """
    return [...document.images].map(img => {img.scrollIntoView(); return img;})
        .filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.getAttribute('src'));
"""


@needs_chromium
def test_every_page_loads_with_no_failed_or_outside_request_and_every_picture_shows(site, served, chromium):
    out, problems, pictures = site["out"], [], 0
    _load(chromium, served)  # once, so the new-tab page's own requests are behind us
    chromium.get_log("performance")
    for page in _pages(site):
        rel = page.relative_to(out).as_posix()
        _load(chromium, served + rel)
        broken_images = chromium.execute_script(_IMAGES_JS)
        pictures += chromium.execute_script("return document.images.length")
        requested, failed = _network(chromium)
        # chrome:// is the browser's own pages (its new-tab page), never the network
        local = (served, "data:", "blob:", "about:", "chrome://")
        outside = [u for u in requested if not u.startswith(local)]
        problems += [f"{rel}: outside request {u}" for u in outside] + [f"{rel}: failed {f}" for f in failed]
        problems += [f"{rel}: picture not shown {src}" for src in broken_images]
    assert pictures > 80, f"only {pictures} pictures over the site"
    assert not problems, f"{len(problems)} problems, the first 20: {problems[:20]}"


@needs_chromium
def test_math_is_typeset_on_a_lesson_with_math_and_pictures(site, served, chromium, screenshots):
    _load(chromium, served + MATH_LESSON)
    counts = chromium.execute_script("""
        const math = [...document.querySelectorAll('.math.notranslate')];  // Sphinx's, not MathJax's own
        return {sources: math.length, typeset: math.filter(m => m.querySelector('.MathJax, .MathJax_Display')).length,
                errors: document.querySelectorAll('.MathJax_Error').length,
                pictures: [...document.images].filter(i => i.naturalWidth > 200).length};
    """)
    formula = chromium.execute_script("""
        const math = document.querySelector('div.math .MathJax_Display') || document.querySelector('.MathJax');
        math.scrollIntoView({block: 'center'}); return math.getBoundingClientRect().width;
    """)
    chromium.save_screenshot(str(screenshots / "book_lesson_03_math.png"))
    chromium.execute_script("[...document.images].find(i => i.naturalWidth > 200).scrollIntoView({block: 'center'})")
    chromium.save_screenshot(str(screenshots / "book_lesson_03_picture.png"))
    print(f"\nscreenshots: {screenshots}")
    assert counts["sources"] > 20 and counts["typeset"] == counts["sources"], f"math not typeset: {counts}"
    assert counts["errors"] == 0, f"MathJax errors: {counts}"
    assert formula > 10 and counts["pictures"] >= 2, (formula, counts)


@needs_chromium
def test_the_glossary_page_shows_its_terms(site, served, chromium, screenshots):
    _load(chromium, served + "docs/glossary.html#mlm")
    text = chromium.execute_script("return document.body.innerText")
    cjk = chromium.execute_async_script("""
        const done = arguments[arguments.length - 1];
        document.fonts.ready.then(() => done(document.fonts.check('16px "bertedu CJK"', '掩蔽语言模型')));
    """)
    chromium.save_screenshot(str(screenshots / "book_glossary.png"))
    assert "masked language model" in text and "掩蔽语言模型" in text
    assert cjk, "the site's Chinese font did not load"


def _search(chromium, url: str) -> list[str]:
    _load(chromium, url)
    found = "return [...document.querySelectorAll('#search-results li a')].map(a => a.getAttribute('href'))"
    deadline = time.monotonic() + 30
    while not (hits := chromium.execute_script(found)) and time.monotonic() < deadline:
        time.sleep(0.3)
    return hits


@needs_chromium
def test_search_finds_masked_language_model(site, served, chromium):
    hits = _search(chromium, served + "search.html?q=masked+language+model")
    assert any("glossary" in h for h in hits), f"search results: {hits}"
    assert any(re.search(r"notebooks/0[56]_", h) for h in hits), f"search results: {hits}"


@needs_chromium
def test_search_finds_the_chinese_term_in_both_editions(site, served, chromium):
    """掩蔽语言模型 (masked language model, the glossary's term): the Chinese edition's index splits its prose into
    words with jieba, the glossary's terms among them; the English index keeps a run of Chinese as one word."""
    hits = _search(chromium, served + "zh/search.html?q=掩蔽语言模型")
    assert any("glossary" in h for h in hits), f"Chinese edition's search results: {hits}"
    assert any(re.search(r"notebooks/0[56]_", h) for h in hits), f"Chinese edition's search results: {hits}"
    hits = _search(chromium, served + "search.html?q=掩蔽语言模型")
    assert any("glossary" in h for h in hits), f"English edition's search results: {hits}"


@needs_chromium
def test_a_chinese_lesson_shows_its_prose_pictures_and_switch(site, served, chromium, screenshots):
    _load(chromium, served + CHINESE_LESSON)
    shown = chromium.execute_script("""
        const text = document.querySelector('article').innerText;
        return {cjk: (text.match(/[\u4e00-\u9fff]/g) || []).length,
                pictures: [...document.images].filter(i => i.naturalWidth > 200).length,
                font: document.fonts.check('16px "bertedu CJK"', '掩蔽语言模型'),
                english: [...document.querySelectorAll('a.bertedu-edition')].map(a => a.textContent)};
    """)
    chromium.save_screenshot(str(screenshots / "book_zh_lesson_05.png"))
    assert shown["cjk"] > 1000 and shown["pictures"] >= 2 and shown["font"], shown
    assert shown["english"] == ["English"], shown
