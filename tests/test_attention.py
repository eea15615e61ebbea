import pytest
import torch

from bertedu import BertConfig
from bertedu.model.attention import (
    ATTENTION_KERNELS,
    MultiHeadSelfAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)


def test_scaled_dot_product_attention_by_hand():
    # One query, two keys: scores [1, 0] / sqrt(1) -> softmax [e/(e+1), 1/(e+1)]
    q = torch.tensor([[[1.0]]])
    k = torch.tensor([[[1.0], [0.0]]])
    v = torch.tensor([[[10.0], [20.0]]])
    out, probs = scaled_dot_product_attention(q, k, v)
    e = torch.e
    torch.testing.assert_close(probs, torch.tensor([[[e / (e + 1), 1 / (e + 1)]]]))
    torch.testing.assert_close(out, torch.tensor([[[10 * e / (e + 1) + 20 / (e + 1)]]]))


def test_padding_mask_hides_padded_keys_and_causal_mask_hides_the_future():
    am = torch.tensor([[1, 1, 1, 0]])
    x = torch.randn(1, 1, 4, 8)
    _, probs = scaled_dot_product_attention(x, x, x, padding_mask(am))
    assert torch.all(probs[..., 3] == 0)
    torch.testing.assert_close(probs.sum(-1), torch.ones(1, 1, 4))
    _, probs = scaled_dot_product_attention(x, x, x, causal=True)
    assert torch.equal(probs[0, 0] > 0, causal_mask(4))


def test_kernels_share_parameters():
    cfg = BertConfig.tiny()
    a = MultiHeadSelfAttention(cfg)
    b = MultiHeadSelfAttention(cfg.replace(attn_implementation="reference"))
    assert a.state_dict().keys() == b.state_dict().keys()
    assert set(ATTENTION_KERNELS) == {"reference", "sdpa"}


@pytest.mark.parametrize("heads,hidden", [(1, 16), (2, 128), (3, 45)])
def test_reference_and_sdpa_agree_on_outputs_and_gradients_with_ragged_padding(heads, hidden):
    cfg = BertConfig.tiny(hidden_size=hidden, num_attention_heads=heads, attention_probs_dropout_prob=0.0)
    attn = MultiHeadSelfAttention(cfg).eval()
    lengths = torch.tensor([7, 3, 5, 1])
    am = (torch.arange(7)[None, :] < lengths[:, None]).long()  # (B, T)
    x = torch.randn(4, 7, hidden)
    results = {}
    for name in ATTENTION_KERNELS:
        attn.kernel = name
        attn.zero_grad()
        xi = x.clone().requires_grad_(True)
        out, _ = attn(xi, padding_mask(am))
        # Only real tokens' outputs feed the loss, as in training.
        loss = (out * am[..., None]).pow(2).sum()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in attn.named_parameters()}
        results[name] = (out.detach(), xi.grad.clone(), grads)
    ref, fast = results["reference"], results["sdpa"]
    real = am.bool()
    torch.testing.assert_close(fast[0][real], ref[0][real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast[1], ref[1], atol=1e-5, rtol=1e-5)
    for n in ref[2]:
        torch.testing.assert_close(fast[2][n], ref[2][n], atol=1e-5, rtol=1e-5, msg=n)


def test_probabilities_come_back_from_either_kernel_when_asked():
    cfg = BertConfig.tiny()
    attn = MultiHeadSelfAttention(cfg).eval()
    x = torch.randn(2, 5, cfg.hidden_size)
    for name in ATTENTION_KERNELS:
        attn.kernel = name
        out, probs = attn(x, need_probs=True)
        assert probs.shape == (2, cfg.num_attention_heads, 5, 5)
        torch.testing.assert_close(probs.sum(-1), torch.ones(2, cfg.num_attention_heads, 5))
        _, none = attn(x)
        assert none is None or name == "reference"
