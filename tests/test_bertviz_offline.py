"""bertedu.course.bertviz_offline: bertviz's views with no CDN; the drawing itself is checked in a
real browser by test_browser.py."""

import json
import re

import pytest
import torch

pytest.importorskip("bertviz")
from bertedu.course import bertviz_offline  # noqa: E402

TOKENS = ["[CLS]", "the", "cat", "[SEP]", "it", "</script>", "[SEP]"]


def _attention(layers=2, heads=3, T=len(TOKENS)):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, heads, T, T, generator=g).softmax(-1) for _ in range(layers))


def _params(html: str) -> dict:
    start = html.index("const params = ") + len("const params = ")
    return json.loads(html[start : html.index(";\n", start)].replace("<\\/", "</"))


def test_scripts_come_from_installed_packages_with_the_expected_versions():
    d3, jquery = bertviz_offline.script_source("d3"), bertviz_offline.script_source("jquery")
    assert "v5.7.0" in d3.splitlines()[0]  # the d3 bertviz was written for
    assert jquery.startswith("/*! jQuery v3.")
    script = bertviz_offline.libraries_script()
    assert d3 in script and jquery in script
    with pytest.raises(ValueError, match="unknown script"):
        bertviz_offline.script_source("react")


@pytest.mark.parametrize("kind", bertviz_offline.VIEWS)
def test_view_html_names_no_network_address_and_stores_the_data_once(kind):
    html = bertviz_offline.view_html(kind, _attention(), TOKENS, 4)
    assert "cdnjs" not in html and "require.min.js" not in html and "<script src" not in html
    assert html.count('"attn"') == 5  # All, A->A, B->B, A->B, B->A: and not a second copy in a comment
    assert "PYTHON_PARAMS" not in html and html.count("const params") == 1
    # a token that reads "</script>" must not close the script tag early
    assert html.count("</script>") == 1 and html.rstrip().endswith("</script>")
    params = _params(html)
    weights = params["attention"][0]["attn"]
    flat = [w for layer in weights for head in layer for row in head for w in row]
    assert len(flat) == 2 * 3 * 7 * 7
    assert all(round(w, 2) == w for w in flat)  # stored rounded: 0.07, not 0.07000000029802322
    assert params["attention"][0]["left_text"] == TOKENS


def test_view_html_ids_are_reproducible_within_a_run_and_distinct_per_view():
    a = bertviz_offline.view_html("head", _attention(), TOKENS)
    b = bertviz_offline.view_html("head", _attention(), TOKENS)
    id_a = re.search(r'id="(bertviz-[0-9a-f]{12})-(\d+)"', a)
    id_b = re.search(r'id="(bertviz-[0-9a-f]{12})-(\d+)"', b)
    assert id_a.group(1) == id_b.group(1)  # same content, same id stem: re-executing stores the same HTML
    assert id_a.group(2) != id_b.group(2)  # two views in one page never share an element id
    assert a.count(id_a.group(0)[4:-1]) >= 2  # the markup and the script agree on the id


def test_the_view_says_what_to_run_until_it_draws():
    html = bertviz_offline.view_html("model", _attention(), TOKENS)
    assert "draws when you run this cell" in html
    assert "<div id='vis'><p" in html  # bertviz empties #vis when it draws, which removes the note


def test_unknown_view_is_refused():
    with pytest.raises(ValueError, match="unknown view"):
        bertviz_offline.view_html("neuron", _attention(), TOKENS)


def test_standalone_page_carries_libraries_before_the_view():
    page = bertviz_offline.standalone_html("head", _attention(), TOKENS)
    assert page.index("state.libs = libs") < page.index("const params")
    assert "<script src" not in page and "cdnjs" not in page


def test_head_view_figure_draws_one_panel_per_layer_and_a_line_per_strong_weight():
    import matplotlib

    matplotlib.use("Agg")
    attention = _attention()
    fig = bertviz_offline.head_view_figure(attention, TOKENS, [(0, [1]), (1, None)], min_weight=0.2)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["layer 0, head 1", "layer 1, all heads"]
    n_lines = [sum(len(c.get_segments()) for c in ax.collections) for ax in axes]
    assert n_lines[0] == int((attention[0][0, 1] >= 0.2).sum())
    assert n_lines[1] == int((attention[1][0] >= 0.2).sum())
