"""Argument checks shared by every kernel module.

One rule everywhere:

- a value of the wrong *type* raises ``TypeError``; a value of the right type but out of
  range, of the wrong shape, or non-finite raises ``ValueError``;
- every message names the argument (``name``) and says what was expected and what came;
- integers: Python ``int`` and NumPy integer scalars are accepted, ``bool`` is not;
- real numbers: ``int``, ``float`` and NumPy scalars are accepted, ``bool`` is not;
- array checks leave traced values alone where a check would need concrete data
  (``is_concrete``), so that jitted callers still get the shape and dtype checks.

Each helper returns the checked value (converted to a plain Python number or a JAX array),
so a caller writes ``n = check_int(n, "n", minimum=1)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "is_concrete",
    "check_int",
    "check_real",
    "check_choice",
    "check_array",
    "check_finite",
    "check_shape",
    "check_tokens",
    "check_logits",
    "check_labels",
    "check_callable",
    "check_instance",
    "check_float_dtype",
    "check_dtype_enabled",
]


def is_concrete(x: Any) -> bool:
    """``True`` unless ``x`` is a JAX tracer (inside ``jit``, ``grad``, ``vmap``, ...)."""
    return not isinstance(x, jax.core.Tracer)


def check_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (``int`` or NumPy integer scalar, not ``bool``) in ``[minimum, maximum]``."""
    span = _span(minimum, maximum)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer{span}, got {value!r} of type {type(value).__name__}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{span}, got {int(value)}")
    return int(value)


def check_real(value: Any, name: str, *, minimum: float | None = None, maximum: float | None = None,
               strict_minimum: bool = False) -> float:
    """A finite real number (``int``, ``float`` or NumPy scalar, not ``bool``) in range.

    ``strict_minimum=True`` makes the lower bound exclusive (``value > minimum``).
    """
    bounds = ([f"> {minimum}" if strict_minimum else f">= {minimum}"] if minimum is not None else []) + \
        ([f"<= {maximum}"] if maximum is not None else [])
    span = f" ({' and '.join(bounds)})" if bounds else ""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number{span}, got {value!r} of type {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    too_low = minimum is not None and (v <= minimum if strict_minimum else v < minimum)
    if too_low or (maximum is not None and v > maximum):
        raise ValueError(f"{name} must be a real number{span}, got {v}")
    return v


def check_choice(value: Any, name: str, choices: Sequence[Any]) -> Any:
    """One of ``choices`` (compared with ``==``); a ``ValueError`` lists them."""
    if value not in tuple(choices):
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value


def check_array(x: Any, name: str, *, ndim: int | Sequence[int] | None = None, kind: str | None = None,
                dtype: Any = None) -> jax.Array:
    """Convert ``x`` to a JAX array and check its number of dimensions and dtype kind.

    Args:
        x: array-like (a tracer passes through unconverted).
        name: the argument's name, for the message.
        ndim: the allowed number(s) of dimensions, or ``None`` for any.
        kind: ``"float"`` (floating point), ``"int"`` (integer), ``"number"`` (either), or ``None``.
            A bool array is neither. A wrong kind is a ``TypeError``.
        dtype: if given, cast a ``"number"``/``"float"`` array to it after the checks.
    """
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    try:
        arr = x if not is_concrete(x) else jnp.asarray(x)
    except TypeError as err:
        raise TypeError(f"{name} must be an array, got {type(x).__name__}") from err
    if kind is not None:
        check_choice(kind, "kind", ("float", "int", "number"))
        is_float = jnp.issubdtype(arr.dtype, jnp.floating)
        is_int = jnp.issubdtype(arr.dtype, jnp.integer)
        ok = {"float": is_float, "int": is_int, "number": is_float or is_int}[kind]
        if not ok:
            want = {"float": "a floating-point", "int": "an integer", "number": "a numeric"}[kind]
            raise TypeError(f"{name} must be {want} array, got dtype {arr.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(f"{n}-D" for n in allowed)
            raise ValueError(f"{name} must be {want}, got shape {tuple(arr.shape)}")
    if dtype is not None:
        arr = arr.astype(dtype)
    return arr


def check_finite(x: jax.Array, name: str) -> jax.Array:
    """``ValueError`` if a concrete array has a NaN or infinite entry (tracers pass)."""
    if is_concrete(x) and not np.all(np.isfinite(np.asarray(x))):  # numpy: concrete under jit
        n_bad = int(np.sum(~np.isfinite(np.asarray(x))))
        raise ValueError(f"{name} must be finite, got {n_bad} non-finite entr{'y' if n_bad == 1 else 'ies'}")
    return x


def check_shape(x: jax.Array, name: str, shape: Sequence[int | None]) -> jax.Array:
    """``ValueError`` unless ``x.shape`` matches ``shape`` (``None`` matches any length)."""
    want = tuple(shape)
    got = tuple(jnp.shape(x))
    if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
        pretty = "(" + ", ".join("*" if w is None else str(w) for w in want) + ("," if len(want) == 1 else "") + ")"
        raise ValueError(f"{name} must have shape {pretty}, got {got}")
    return x


def check_tokens(x: Any, name: str, *, ndim: int | Sequence[int] | None = None,
                 n_states: int | None = None) -> jax.Array:
    """An integer array of tokens ``(..., T)`` with ``T >= 1``, each in ``[0, n_states)``.

    A non-integer dtype is a ``TypeError``; a wrong number of dimensions, an empty last axis
    or (for a concrete array) a token outside ``[0, n_states)`` (``>= 0`` when ``n_states``
    is ``None``) is a ``ValueError``. A tracer passes the value check.
    """
    arr = check_array(x, name, ndim=ndim, kind="int")
    if arr.ndim < 1 or arr.shape[-1] < 1:
        raise ValueError(f"{name} must have shape (..., T) with T >= 1 tokens, got {tuple(arr.shape)}")
    if is_concrete(arr) and arr.size:
        values = np.asarray(arr)  # numpy: also concrete inside a jit trace
        lo, hi = int(values.min()), int(values.max())
        if lo < 0 or (n_states is not None and hi >= n_states):
            want = f"in [0, {n_states})" if n_states is not None else ">= 0"
            raise ValueError(f"{name} must hold tokens {want}, got range [{lo}, {hi}]")
    return arr


def check_logits(x: Any, name: str) -> jax.Array:
    """A float array of scores ``(..., K)``: ``TypeError`` for another dtype, ``ValueError`` for a scalar."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{name} must be a float array (..., K), got dtype {x.dtype}")
    if x.ndim < 1:
        raise ValueError(f"{name} must have at least 1 dimension (..., K), got shape {x.shape}")
    return x


def check_labels(labels: Any, batch_shape: tuple[int, ...], n_classes: int, scores_name: str) -> jax.Array:
    """Integer class indices of shape ``batch_shape`` (``scores_name.shape[:-1]``), each in ``[0, n_classes)``
    (the range is checked on concrete arrays)."""
    labels = jnp.asarray(labels)
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise TypeError(f"labels must be an integer array of class indices, got dtype {labels.dtype}")
    if labels.shape != batch_shape:
        raise ValueError(
            f"labels must have shape {scores_name}.shape[:-1] = {batch_shape}, got {labels.shape}"
        )
    if is_concrete(labels) and labels.size:
        a = np.asarray(labels)
        if a.min() < 0 or a.max() >= n_classes:
            raise ValueError(
                f"labels must lie in [0, {n_classes}) (K = {n_classes} classes), got range "
                f"[{a.min()}, {a.max()}]"
            )
    return labels


def check_callable(value: Any, name: str) -> Any:
    """``TypeError`` unless ``value`` is callable (a function, a jitted function, a class)."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")
    return value


def check_instance(value: Any, name: str, cls: type | tuple[type, ...]) -> Any:
    """``TypeError`` unless ``value`` is an instance of ``cls`` (a type or a tuple of types)."""
    if not isinstance(value, cls):
        want = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise TypeError(f"{name} must be a {want}, got {type(value).__name__}")
    return value


def check_float_dtype(dtype: Any, name: str = "dtype") -> jnp.dtype:
    """A floating-point dtype (``float32``, ``float64``, ...), returned as a NumPy dtype.

    ``TypeError`` for something that is not a dtype, ``ValueError`` for a non-float dtype.
    (float64 arrays are only float64 when ``jax_enable_x64`` is on; the caller asks for it.)
    """
    try:
        dt = jnp.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"{name} must be a floating dtype, got {dtype!r}") from err
    if not jnp.issubdtype(dt, jnp.floating):
        raise ValueError(f"{name} must be a floating dtype, got {dt}")
    return dt


def check_dtype_enabled(dtype: Any, name: str = "dtype") -> jnp.dtype:
    """``dtype`` as a NumPy dtype; ``ValueError`` if JAX would silently make its arrays narrower.

    A 64-bit type (``float64``, ``int64``) is only honoured with ``jax_enable_x64`` on; without
    it JAX builds 32-bit arrays (and draws other random numbers), so asking for one is an error
    here instead of a result that depends on a process flag.
    """
    try:
        dt = jnp.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"{name} must be a dtype, got {dtype!r}") from err
    if jax.dtypes.canonicalize_dtype(dt) != dt:
        raise ValueError(f"{name} {dt} needs jax.config.update('jax_enable_x64', True)")
    return dt


def _span(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""
