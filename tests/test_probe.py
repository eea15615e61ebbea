"""bertedu.training.probe (a logistic-regression head fitted to convergence on frozen features) and the
--no-segment-ids option of pair classification (notebook 10)."""

import torch

from bertedu.data.task_data import load_task
from bertedu.data.tokenizer import load_vocab_tokenizer
from bertedu.pretrained import minilm_vocab_path
from bertedu.training.finetune import FinetuneConfig, task_io
from bertedu.training.probe import fit_logistic, pick_l2


def _blobs(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3  # (N,) three classes
    centres = torch.tensor([[4.0, 0.0], [0.0, 4.0], [-4.0, -4.0]])
    return centres[y] + torch.randn(n, 2, generator=g), y  # (N, 2), (N,)


def test_fit_logistic_converges_to_the_stationary_point():
    X, y = _blobs(60, 0)
    predict = fit_logistic(X, y, 3, l2=0.1)
    assert (predict(X).argmax(-1) == y).float().mean() > 0.95
    probs = predict(X)
    assert probs.shape == (60, 3) and torch.allclose(probs.sum(-1), torch.ones(60))
    # at the optimum the penalised loss has no gradient: refit from that point and check it
    mu, sd = X.double().mean(0), X.double().std(0) + 1e-6
    Z = (X.double() - mu) / sd
    logits = torch.log(predict(X).double())  # equal to Z @ W + b up to a per-row constant
    W = torch.linalg.lstsq(torch.cat([Z, torch.ones(60, 1, dtype=torch.float64)], 1),
                           logits - logits.mean(-1, keepdim=True)).solution[:2].requires_grad_()
    b = (logits - logits.mean(-1, keepdim=True) - Z @ W.detach()).mean(0).requires_grad_()
    loss = torch.nn.functional.cross_entropy(Z @ W + b, y) + 0.1 * W.pow(2).sum()
    loss.backward()
    assert W.grad.abs().max() < 1e-3


def test_pick_l2_chooses_on_dev_and_breaks_ties_towards_the_smallest():
    train, dev = _blobs(60, 0), _blobs(30, 1)
    best, scores = pick_l2(train, dev, 3, grid=(1e-3, 1e-2))
    assert set(scores) == {1e-3, 1e-2} and best == 1e-3 and scores[1e-3] == scores[1e-2] == 1.0
    X, y = _blobs(30, 2)
    scrambled = (X, y[torch.randperm(30, generator=torch.Generator().manual_seed(0))])  # dev labels at random
    best, scores = pick_l2(train, scrambled, 3, grid=(1e-3, 1e-1, 1e1))
    assert scores[best] == max(scores.values()) and best == min(l2 for l2 in scores if scores[l2] == scores[best])


def test_no_segment_ids_puts_every_token_of_a_pair_in_segment_zero():
    task = load_task("paraphrase-en").subsample(4, 4)
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    common = dict(task="paraphrase-en", max_seq_length=64, out="unused")
    with_ids = task_io(task, tokenizer, FinetuneConfig(**common)).encode(task.train)
    without = task_io(task, tokenizer, FinetuneConfig(**common, segment_ids=False)).encode(task.train)
    assert all(1 in it["token_type_ids"] for it in with_ids)  # BERT: B is segment 1
    assert all(set(it["token_type_ids"]) == {0} for it in without)
    assert [it["input_ids"] for it in with_ids] == [it["input_ids"] for it in without]  # [SEP] still there
