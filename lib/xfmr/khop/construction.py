r"""An explicit transformer with :math:`2 + \lfloor \log_2 k \rfloor` layers that computes the
K-hop map :math:`\mathrm{hop}_k` of :mod:`xfmr.khop.task` exactly (:func:`build_construction`;
Sanford, Hsu, Telgarsky, ICML 2024).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xfmr.khop.task import BOTTOM, NULL
from xfmr.core.validate import check_choice, check_dtype_enabled, check_int, check_real, check_tokens

Array = jax.Array


# ----------------------------------------------------------------------------- construction
def circle_codes(m: np.ndarray, period: int) -> np.ndarray:
    r"""Points on the unit circle, :math:`m \mapsto (\cos 2\pi m / N, \sin 2\pi m / N)`.

    Args:
      m: integer array of any shape; period: N.

    Returns:
      float64 numpy array of shape m.shape + (2,).
    """
    ang = 2.0 * np.pi * np.asarray(m, dtype=np.float64) / period
    return np.stack([np.cos(ang), np.sin(ang)], axis=-1)


# Layout of the residual stream (constant width 19).
LAYOUT: dict[str, slice] = {
    "tok": slice(0, 2),    # circle code of the token t_{x_m} (0 for the start token)
    "bos": slice(2, 3),    # 1 at the start token
    "pos": slice(3, 5),    # circle code p_m of the position (0 for the start token)
    "ramp": slice(5, 6),   # m / N (recency)
    "one": slice(6, 7),    # constant 1
    "D": slice(7, 9),      # pointer: circle code of find^d(m)
    "Dnull": slice(9, 10),   # 1 if that pointer is null
    "T": slice(10, 12),    # circle code of the token x at find^r(m)
    "Tnull": slice(12, 13),  # 1 if that token is bottom
    "sD": slice(13, 15), "sDnull": slice(15, 16),  # scratch: written by attention,
    "sT": slice(16, 18), "sTnull": slice(18, 19),  # moved by the MLP
}
WIDTH: int = 19


@dataclass(frozen=True, eq=False)
class KHopTransformer:
    r"""An explicit transformer for :math:`\mathrm{hop}_k` (see :func:`build_construction`).

    Residual blocks :math:`h \leftarrow h + \mathrm{softmax}(\mathrm{mask}(h W_Q (h W_K)^\top))
    h W_V W_O`, then :math:`h \leftarrow h + \mathrm{ReLU}(h W_1 + b_1) W_2`; one head per layer,
    constant width :data:`WIDTH`; readout ``argmax(h W_U)`` over :math:`\Sigma \cup \{\bot\}`.
    Layer 1 uses the strictly causal mask with the start token as sink (``j < i`` or ``j = 0``);
    the other layers the causal mask ``j <= i``.
    """

    k: int
    alphabet_size: int
    max_len: int
    period: int
    dtype: Any
    token_embedding: np.ndarray      # (S + 1, WIDTH); row S is the start token
    position_embedding: np.ndarray   # (max_len + 1, WIDTH); row 0 is the start position
    layers: tuple = field(repr=False)  # dicts: wq, wk, wv, wo, w1, b1, w2, strict, bit
    unembedding: np.ndarray = field(repr=False)  # (WIDTH, S + 1); column S is bottom
    margins: dict = field(repr=False, default_factory=dict)  # betas, gaps, A, margin

    def __post_init__(self):
        dt = self.dtype
        params = dict(
            token_embedding=jnp.asarray(self.token_embedding, dt),
            position_embedding=jnp.asarray(self.position_embedding, dt),
            unembedding=jnp.asarray(self.unembedding, dt),
            layers=[{name: jnp.asarray(layer[name], dt) for name in _WEIGHTS} for layer in self.layers],
        )
        object.__setattr__(self, "params", params)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def strict(self) -> tuple[bool, ...]:
        """Per layer: True if it uses the strictly causal mask with sink (j < i or j = 0)."""
        return tuple(bool(layer["strict"]) for layer in self.layers)

    # -------------------------------------------------------------------- validation
    def _tokens(self, x: Any) -> Array:
        x = check_tokens(x, "x", ndim=(1, 2), n_states=self.alphabet_size)
        if x.shape[-1] > self.max_len:
            raise ValueError(f"x has length {x.shape[-1]} > max_len={self.max_len} of this construction")
        return x

    # -------------------------------------------------------------------- forward pass
    def forward(self, x: Any, *, return_attention: bool = False, return_states: bool = False):
        r"""Run the transformer on tokens (n,) or (batch, n), n <= max_len.

        Returns:
          logits (..., n + 1, S + 1) including the start position 0 (column S is bottom);
          with ``return_attention`` also the attention matrices (..., n_layers, n + 1, n + 1);
          with ``return_states`` also the residual streams (..., n_layers + 1, n + 1, WIDTH).
        """
        x = self._tokens(x)
        toks = jnp.concatenate([jnp.full(x.shape[:-1] + (1,), self.alphabet_size, x.dtype), x], axis=-1)
        batched = toks if toks.ndim == 2 else toks[None]
        collect = return_attention or return_states
        if collect:
            logits, attn, states = _forward(self.params, batched, self.strict, True)
        else:  # chunks of <= 32 sequences keep the (32, n, n) attention in cache: several times faster
            b = batched.shape[0]
            c = min(b, 32)
            padded = jnp.concatenate([batched, jnp.repeat(batched[:1], (-b) % c, axis=0)])
            logits = jnp.concatenate([_forward(self.params, padded[i:i + c], self.strict, False)[0]
                                      for i in range(0, padded.shape[0], c)])[:b]
            attn = states = None
        if toks.ndim == 1:
            logits = logits[0]
            attn, states = (attn[0], states[0]) if collect else (None, None)
        out = (logits,)
        if return_attention:
            out += (attn,)
        if return_states:
            out += (states,)
        return out[0] if len(out) == 1 else out

    def decode(self, logits: Array) -> Array:
        """Tokens from logits (drops the start position): argmax, bottom -> :data:`BOTTOM`."""
        y = jnp.argmax(logits[..., 1:, :], axis=-1).astype(jnp.int32)
        return jnp.where(y == self.alphabet_size, BOTTOM, y)

    def decode_pointer(self, states: Array) -> Array:
        """Sequence position held in the pointer slot D of residual streams (..., n + 1, WIDTH)
        (start position dropped): the nearest circle point among 1..n, or :data:`NULL`."""
        n = states.shape[-2] - 1
        codes = jnp.asarray(circle_codes(np.arange(1, n + 1), self.period), states.dtype)
        d = states[..., 1:, LAYOUT["D"]]
        m = jnp.argmax(d @ codes.T, axis=-1)  # codes[m] is model position m + 1, i.e. sequence position m
        return jnp.where(states[..., 1:, LAYOUT["Dnull"]][..., 0] > 0.5, NULL, m.astype(jnp.int32))

    def __call__(self, x: Any) -> Array:
        """hop_k(x) computed by the forward pass: int32 array of x's shape."""
        return self.decode(self.forward(x))


_WEIGHTS = ("wq", "wk", "wv", "wo", "w1", "b1", "w2")


@partial(jax.jit, static_argnames=("strict", "collect"))
def _forward(
    params: dict, toks: Array, strict: tuple[bool, ...], collect: bool
):
    """Forward pass on start-prefixed tokens (batch, n + 1); see
    :class:`KHopTransformer`."""
    n1 = toks.shape[-1]
    h = (
        params["token_embedding"][toks]
        + params["position_embedding"][:n1]
    )
    idx = jnp.arange(n1)
    masks = {
        True: (idx[None, :] < idx[:, None])
        | (idx[None, :] == 0),  # strict, with sink
        False: idx[None, :] <= idx[:, None],
    }  # causal
    attns, states = [], [h]
    for w, is_strict in zip(params["layers"], strict):
        scores = jnp.einsum("bik,bjk->bij", h @ w["wq"], h @ w["wk"])
        a = jax.nn.softmax(
            jnp.where(masks[is_strict], scores, -jnp.inf), axis=-1
        )
        h = h + jnp.einsum("bij,bjv->biv", a, h @ w["wv"]) @ w["wo"]
        h = h + jax.nn.relu(h @ w["w1"] + w["b1"]) @ w["w2"]
        if collect:
            attns.append(a)
            states.append(h)
    logits = h @ params["unembedding"]
    b = toks.shape[0]
    attn = (
        jnp.stack(attns, 1)
        if attns
        else jnp.zeros((b, 0, n1, n1), h.dtype)
    )
    st = (
        jnp.stack(states, 1)
        if collect
        else jnp.zeros((b, 0, n1, h.shape[-1]), h.dtype)
    )
    return logits, attn, st


def build_construction(
    k: int,
    alphabet_size: int,
    max_len: int,
    *,
    dtype: Any = jnp.float32,
    margin: float | None = None,
    check_precision: bool = True,
) -> KHopTransformer:
    r"""Write down a transformer with :math:`2 + \lfloor \log_2 k \rfloor` layers (0 for k = 0)
    that computes :math:`\mathrm{hop}_k` on sequences of length <= ``max_len``.

    Codes: positions :math:`m = 1..n` (0 is a start token) as :math:`p_m` on a circle of
    :math:`N = \text{max\_len} + 1` points, tokens as :math:`t_a` on a circle of S points.

    * Layer 1 (strict mask, start token as sink) scores
      :math:`\beta_1 (A \langle t_{x_i}, t_{x_j}\rangle + j / N + (A - \tfrac12)[j = 0])` with
      :math:`A (1 - \cos 2\pi/S) = 2`: matches beat the sink, the sink beats non-matches, and
      among matches the latest wins by :math:`1/N`. The value rotates :math:`p_j` to
      :math:`p_{j+1}`, so the pointer slot gets :math:`p_{\mathrm{find}(i)}` (null at the sink).
    * Layer :math:`\ell \ge 2` looks up :math:`q = D(i)`: score
      :math:`\beta (\langle D_i, p_j\rangle + \mathrm{null}_i [j = 0])`, unique maximum at
      :math:`j = q` with gap :math:`1 - \cos(2\pi/N)`; it copies (D, T) of q. The MLP moves
      the copy into place: D always (pointer doubling), T iff bit :math:`\ell - 2` of k is 1.
      Invariant after layer :math:`\ell`: :math:`D = \mathrm{find}^{2^{\ell-1}}`,
      :math:`T = x_{\mathrm{find}^{k \bmod 2^{\ell-1}}}`.

    Args:
      k: hops, integer >= 0. alphabet_size: S >= 2. max_len: longest input, >= 1.
      dtype: float32 or float64 for the forward pass.
      margin: score gap, in nats, of the attended key over every other key (default
        :math:`\ln N + 30`, so the softmax puts mass <= ``N e^{-margin}`` elsewhere).
      check_precision: raise if ``dtype`` is too coarse (switch off only to watch it fail).

    Raises:
      ValueError if ``dtype`` has too few bits for ``max_len`` and ``alphabet_size``
      (the relative score gaps must exceed 16 machine epsilons).
    """
    k = check_int(k, "k", minimum=0)
    S = check_int(alphabet_size, "alphabet_size", minimum=2)
    max_len = check_int(max_len, "max_len", minimum=1)
    dtype = check_choice(jnp.dtype(dtype), "dtype", (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)))
    check_dtype_enabled(dtype)
    N = max_len + 1
    if margin is None:
        margin = math.log(N) + 30.0
    margin = check_real(margin, "margin", minimum=0.0, strict_minimum=True)

    A = 2.0 / (1.0 - math.cos(2.0 * math.pi / S))
    gap_lookup = 1.0 - math.cos(2.0 * math.pi / N)  # <p_q, p_q> - max_{j != q} <p_q, p_j>
    gap_find = (1.0 / N) / (A + 1.0)                # relative to the largest score A + 1
    eps = float(jnp.finfo(dtype).eps)
    if check_precision and min(gap_lookup, gap_find) < 16 * eps:
        raise ValueError(
            f"max_len={max_len} with alphabet_size={S} needs relative score gaps "
            f"{gap_lookup:.2e} (lookup) and {gap_find:.2e} (find) above 16 eps = {16 * eps:.1e} "
            f"of {dtype.name}: use dtype=float64 or a smaller max_len"
        )
    beta1 = margin / min(1.0 / N, 0.5)
    beta = margin / gap_lookup

    L = LAYOUT
    d = WIDTH
    # ---- embeddings
    tok = np.zeros((S + 1, d))
    tok[:S, L["tok"]] = circle_codes(np.arange(S), S)
    tok[:S, L["T"]] = circle_codes(np.arange(S), S)
    tok[:, L["one"]] = 1.0
    tok[S, L["bos"]] = 1.0
    tok[S, L["Dnull"]] = 1.0
    tok[S, L["Tnull"]] = 1.0
    pos = np.zeros((max_len + 1, d))
    pos[1:, L["pos"]] = circle_codes(np.arange(1, max_len + 1), N)
    pos[1:, L["ramp"]] = np.arange(1, max_len + 1)[:, None] / N

    # ---- the MLP of every layer: move scratch -> slot (x = relu(x) - relu(-x) makes it linear)
    moves = [("sD", "D"), ("sDnull", "Dnull"), ("sT", "T"), ("sTnull", "Tnull")]
    n_hidden = 4 * 6  # for each of the 6 moved coordinates: +-scratch, +-slot

    def mlp(move_T: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w1 = np.zeros((d, n_hidden))
        w2 = np.zeros((n_hidden, d))
        u = 0
        for src, dst in moves:
            for s_idx, d_idx in zip(range(d)[L[src]], range(d)[L[dst]]):
                take = move_T or dst in ("D", "Dnull")
                for sign in (1.0, -1.0):
                    w1[s_idx, u] = sign          # unit u: relu(+-scratch)
                    w2[u, s_idx] = -sign         # always clear the scratch
                    if take:
                        w2[u, d_idx] = sign      # slot += scratch ...
                    u += 1
                    w1[d_idx, u] = sign          # unit u: relu(+-slot)
                    if take:
                        w2[u, d_idx] = -sign     # ... - slot
                    u += 1
        return w1, np.zeros(n_hidden), w2

    layers = []
    if k >= 1:
        # ---- layer 1: find(i), strict mask with sink
        wq = np.zeros((d, 4)); wk = np.zeros((d, 4))
        wq[L["tok"], 0:2] = beta1 * A * np.eye(2)
        wq[L["one"], 2] = beta1
        wq[L["one"], 3] = beta1
        wk[L["tok"], 0:2] = np.eye(2)
        wk[L["ramp"], 2] = 1.0
        wk[L["bos"], 3] = A - 0.5
        c, s = math.cos(2 * math.pi / N), math.sin(2 * math.pi / N)
        rot = np.array([[c, s], [-s, c]])  # row vector p_j @ rot = p_{j+1}
        wv = np.zeros((d, 3)); wo = np.zeros((3, d))
        wv[L["pos"], 0:2] = rot
        wv[L["bos"], 2] = 1.0
        wo[0:2, L["sD"]] = np.eye(2)
        wo[2, L["sDnull"]] = 1.0
        w1, b1, w2 = mlp(move_T=False)
        layers.append(dict(wq=wq, wk=wk, wv=wv, wo=wo, w1=w1, b1=b1, w2=w2, strict=True, bit=None))
        # ---- layers 2 .. 2 + floor(log2 k): pointer doubling, one bit of k each
        for bit in range(k.bit_length()):
            wq = np.zeros((d, 3)); wk = np.zeros((d, 3))
            wq[L["D"], 0:2] = beta * np.eye(2)
            wq[L["Dnull"], 2] = beta
            wk[L["pos"], 0:2] = np.eye(2)
            wk[L["bos"], 2] = 1.0
            wv = np.zeros((d, 6)); wo = np.zeros((6, d))
            wv[L["D"], 0:2] = np.eye(2); wo[0:2, L["sD"]] = np.eye(2)
            wv[L["Dnull"], 2] = 1.0; wo[2, L["sDnull"]] = 1.0
            wv[L["T"], 3:5] = np.eye(2); wo[3:5, L["sT"]] = np.eye(2)
            wv[L["Tnull"], 5] = 1.0; wo[5, L["sTnull"]] = 1.0
            w1, b1, w2 = mlp(move_T=bool((k >> bit) & 1))
            layers.append(dict(wq=wq, wk=wk, wv=wv, wo=wo, w1=w1, b1=b1, w2=w2, strict=False, bit=bit))

    unemb = np.zeros((d, S + 1))
    unemb[L["T"], :S] = circle_codes(np.arange(S), S).T  # logit_a = <T, t_a> <= 1
    unemb[L["Tnull"], S] = 2.0                           # logit_bot = 2 * Tnull

    return KHopTransformer(
        k=k, alphabet_size=S, max_len=max_len, period=N, dtype=dtype,
        token_embedding=tok, position_embedding=pos, layers=tuple(layers), unembedding=unemb,
        margins=dict(beta_find=beta1, beta_lookup=beta, gap_find=gap_find, gap_lookup=gap_lookup,
                     A=A, margin=margin),
    )
