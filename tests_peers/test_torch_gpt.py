"""The PyTorch decoder with the JAX weights computes the same logits and loss (float64)."""

import pytest

torch = pytest.importorskip("torch")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from helpers import N_ANSWER, small_model  # noqa: E402

from bookkit.peers.torch_gpt import parameter  # noqa: E402
from xfmr.experiments.addition import answer_positions  # noqa: E402
from xfmr.experiments.curvature import cross_entropy_loss  # noqa: E402
from xfmr.experiments.gpt import forward  # noqa: E402

CONFIGS = [
    dict(layer_norm="none"),
    dict(layer_norm="pre"),
    dict(layer_norm="post"),
    dict(layer_norm="pre", n_heads=2, activation="gelu", d_model=8),
    dict(layer_norm="none", softmax=False, attn_residual_scale=0.0, mlp=False),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("all_positions", [False, True])
def test_logits_and_loss_agree(config, all_positions):
    config = dict(config)
    cfg, params, tokens, x, model, X_t, y_t = small_model(n_layers=3, batch_size=4, **config)
    positions = None if all_positions else answer_positions()
    model.positions = None if positions is None else [int(p) for p in positions]
    z_jax = np.asarray(forward(params, tokens, cfg, embed_scale=0.7, positions=positions))
    with torch.no_grad():
        z_torch = model.logits(model.embed(torch.tensor(np.array(tokens), dtype=torch.long), 0.7))
        z_from_x = model.logits(X_t)  # the embedded input the curvature checks use
    scale = np.abs(z_jax).max()
    assert scale > 1.0  # logits far from 0: the check below is relative to a sizeable number
    assert np.abs(z_torch.numpy() - z_jax).max() <= 1e-10 * scale
    assert np.abs(z_from_x.numpy() - z_jax).max() <= 1e-10 * scale
    if not all_positions:
        loss_jax = float(cross_entropy_loss(tokens[:, -N_ANSWER:])(z_jax))
        with torch.no_grad():
            loss_torch = float(torch.nn.CrossEntropyLoss()(model(X_t), y_t))
        assert abs(loss_torch - loss_jax) <= 1e-10 * abs(loss_jax)


@pytest.mark.parametrize("layer_norm", ["none", "pre", "post"])
def test_every_weight_is_loaded_under_its_path(layer_norm):
    _, params, _, _, model, _, _ = small_model(layer_norm)
    leaves = jax.tree_util.tree_leaves_with_path(params)
    assert len(leaves) == len(list(model.parameters()))
    for keypath, leaf in leaves:
        path = tuple(getattr(k, "key", getattr(k, "idx", None)) for k in keypath)
        p = parameter(model, path)
        assert p.dtype == torch.float64 and tuple(p.shape) == leaf.shape
        np.testing.assert_array_equal(p.detach().numpy(), np.asarray(leaf))
