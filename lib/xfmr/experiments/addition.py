"""The paper's digit-addition task: sequences ``XXXXX+YYYYY=ZZZZZZ`` (18 tokens).

Vocabulary (12 tokens): digits ``0..9`` are tokens ``0..9``, ``'+'`` is ``PLUS = 10`` and
``'='`` is ``EQUALS = 11``. A sequence holds two ``n_digits``-digit operands ``x, y`` (most
significant digit first, leading zeros allowed) and their ``n_digits + 1``-digit sum ``z``
(most significant first, zero-padded)::

    position  0 .. 4 | 5 | 6 .. 10 | 11 | 12 .. 17
    token     x      | + | y       | =  | z = x + y

Operands are uniform. Carry-chain enrichment (as in the paper's code): with probability
``enrich_prob`` a batch is *enriched*: each of its digit positions ``i`` is, with
probability ``enrich_frac``, overwritten so that ``y_i = 9 - x_i`` (the digit pair sums to
9, which propagates a carry). The loss is the cross-entropy of the ``n_digits + 1`` answer
digits, each predicted from the position before it (positions 11..16 predict 12..17).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from xfmr.core.validate import check_choice, check_dtype_enabled, check_int, check_real

__all__ = ["PLUS", "EQUALS", "VOCAB_SIZE", "seq_len", "answer_positions", "make_batch",
           "decode_numbers", "answer_loss"]

PLUS = 10
EQUALS = 11
VOCAB_SIZE = 12


def _check_n_digits(n_digits: int) -> int:
    return check_int(n_digits, "n_digits", minimum=1)


def seq_len(n_digits: int = 5) -> int:
    """Tokens per sequence: ``3 * n_digits + 3`` (18 for 5 digits)."""
    n_digits = _check_n_digits(n_digits)
    return 3 * n_digits + 3


def answer_positions(n_digits: int = 5) -> jax.Array:
    """The positions whose logits predict the answer digits: ``2 n + 1 .. 3 n + 1`` (11..16)."""
    n_digits = _check_n_digits(n_digits)
    return jnp.arange(2 * n_digits + 1, 3 * n_digits + 2)


def _check_dtype(dtype, n_digits: int) -> jnp.dtype:
    """int32 (sums of up to 8 digits) or int64 (needs ``jax_enable_x64``)."""
    dtype = check_choice(jnp.dtype(dtype), "dtype", (jnp.dtype(jnp.int32), jnp.dtype(jnp.int64)))
    check_dtype_enabled(dtype)
    if n_digits > 8 and dtype == jnp.int32:
        raise ValueError(f"n_digits must be <= 8 with dtype int32 (the sums overflow), got {n_digits}")
    return dtype


def _digits_to_int(d: jax.Array, dtype) -> jax.Array:
    """(..., k) digits, most significant first -> (...,) integers of ``dtype``."""
    k = d.shape[-1]
    powers = 10 ** jnp.arange(k - 1, -1, -1, dtype=dtype)
    return jnp.sum(d.astype(dtype) * powers, axis=-1)


def make_batch(key: jax.Array, batch_size: int, n_digits: int = 5, *,
               enrich_prob: float = 0.2, enrich_frac: float = 0.2, dtype=jnp.int32) -> jax.Array:
    """Draw one batch of addition sequences.

    Args:
        key: PRNG key (the batch is a deterministic function of it and ``dtype``).
        batch_size: number of sequences ``B``.
        n_digits: digits per operand (5 in the paper).
        enrich_prob: probability that this batch is carry-chain enriched.
        enrich_frac: fraction of digit positions set to ``y_i = 9 - x_i`` in an enriched batch.
        dtype: width of the random draws: ``int32`` (digits drawn and summed in int32, up to
            8 digits; enrichment uniforms in float32) or ``int64`` (int64 and float64; needs
            ``jax_enable_x64``; the book's pages use it). The two draw different batches from
            the same key.

    Returns:
        int32 tokens ``(B, 3 n + 3)``.
    """
    n_digits = _check_n_digits(n_digits)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    enrich_prob = check_real(enrich_prob, "enrich_prob", minimum=0.0, maximum=1.0)
    enrich_frac = check_real(enrich_frac, "enrich_frac", minimum=0.0, maximum=1.0)
    dtype = _check_dtype(dtype, n_digits)
    kx, ky, kb, kp = jax.random.split(key, 4)
    x = jax.random.randint(kx, (batch_size, n_digits), 0, 10, dtype)
    y = jax.random.randint(ky, (batch_size, n_digits), 0, 10, dtype)
    real = jnp.float64 if dtype == jnp.int64 else jnp.float32
    enriched = jax.random.uniform(kb, (), real) < enrich_prob
    chain = enriched & (jax.random.uniform(kp, (batch_size, n_digits), real) < enrich_frac)
    y = jnp.where(chain, 9 - x, y)
    s = _digits_to_int(x, dtype) + _digits_to_int(y, dtype)
    powers = 10 ** jnp.arange(n_digits, -1, -1, dtype=s.dtype)
    z = (s[:, None] // powers) % 10
    B = batch_size
    return jnp.concatenate([
        x, jnp.full((B, 1), PLUS, dtype), y, jnp.full((B, 1), EQUALS, dtype), z
    ], axis=1).astype(jnp.int32)


def decode_numbers(tokens: jax.Array, n_digits: int = 5, *, dtype=jnp.int32):
    """Split tokens ``(B, 3n+3)`` into the integers ``(x, y, z)``, each ``(B,)`` of ``dtype``
    (``int32``, up to 8 digits, or ``int64``, which needs ``jax_enable_x64``)."""
    n_digits = _check_n_digits(n_digits)
    dtype = _check_dtype(dtype, n_digits)
    tokens = jnp.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] != seq_len(n_digits):
        raise ValueError(f"tokens must have shape (B, {seq_len(n_digits)}), got {tokens.shape}")
    n = n_digits
    return (_digits_to_int(tokens[:, :n], dtype), _digits_to_int(tokens[:, n + 1:2 * n + 1], dtype),
            _digits_to_int(tokens[:, 2 * n + 2:], dtype))


def answer_loss(logits: jax.Array, tokens: jax.Array, n_digits: int = 5) -> jax.Array:
    """Mean cross-entropy of the answer digits.

    ``logits`` is either ``(B, 3n+3, V)`` (all positions) or ``(B, n+1, V)`` (already at
    :func:`answer_positions`); the targets are ``tokens[:, 2n+2:]``:

    .. math:: \\ell = -\\frac{1}{B (n+1)} \\sum_{b, t} \\log \\mathrm{softmax}(z_{b,t})_{y_{b,t}}.
    """
    n_digits = _check_n_digits(n_digits)
    n_ans = n_digits + 1
    if logits.ndim != 3 or logits.shape[1] not in (n_ans, seq_len(n_digits)):
        raise ValueError(f"logits must be (B, {seq_len(n_digits)} or {n_ans}, V), "
                         f"got shape {logits.shape}")
    if logits.shape[1] != n_ans:
        logits = logits[:, answer_positions(n_digits)]
    targets = tokens[:, 2 * n_digits + 2:]
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))
