"""The QA pictures of notebook 11: span score heat map and sliding windows."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from bertedu.pretrained import minilm_vocab_path
from bertedu.data.qa import qa_features
from bertedu.data.tokenizer import load_vocab_tokenizer
from bertedu.course.viz import sliding_windows, span_score_map


def test_span_score_map_masks_backwards_and_too_long_spans():
    T = 6
    start, end = torch.arange(T, dtype=torch.float), torch.zeros(T)
    ax = span_score_map(start, end, [f"t{i}" for i in range(T)], max_answer_length=2,
                        context_mask=[False, True, True, True, True, False], best=(1, 2), gold=(1, 1))
    shown = ax.images[0].get_array()  # scores, masked where invalid
    valid = ~np.ma.getmaskarray(shown) & ~np.isnan(np.ma.getdata(shown))
    expected = np.zeros((T, T), bool)
    for i in range(1, 5):
        for j in range(i, min(i + 2, 5)):  # start <= end, length <= 2, inside the context
            expected[i, j] = True
    assert (valid == expected).all()
    assert len(ax.patches) == 1  # the best span's box
    plt.close(ax.figure)

    # the max-context rule: no span may start at token 2
    ax = span_score_map(start, end, [f"t{i}" for i in range(T)], max_answer_length=2,
                        start_mask=[True, True, False, True, True, True])
    shown = ax.images[0].get_array()
    valid = ~np.ma.getmaskarray(shown) & ~np.isnan(np.ma.getdata(shown))
    assert not valid[2].any() and valid[3, 3] and valid[3, 4]
    plt.close(ax.figure)


def test_sliding_windows_draws_one_bar_per_window_with_strides():
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    context = " ".join(f"word{i}" for i in range(40))
    features = qa_features(tokenizer, "which word?", context, max_seq_length=24, doc_stride=6)
    assert len(features) > 2
    ax = sliding_windows(features, answer=(3, 4))
    labels = [t.get_text() for t in ax.texts]
    assert sum(label.startswith("stride ") for label in labels) == len(features) - 1
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"window {w}" for w in range(len(features))]
    plt.close(ax.figure)
