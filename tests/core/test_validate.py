"""xfmr.core.validate: one rule for every kernel (TypeError for a type, ValueError for a value)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xfmr.core.validate import (check_array, check_choice, check_dtype_enabled, check_finite, check_int, check_real,
                                check_shape)


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3), np.uint8(3)])
def test_check_int_accepts_python_and_numpy_integers(value):
    out = check_int(value, "n", minimum=1)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [True, 3.0, "3", None, np.float64(3.0), jnp.array(3)])
def test_check_int_refuses_other_types_with_type_error(value):
    with pytest.raises(TypeError, match="^n must be an integer"):
        check_int(value, "n")


@pytest.mark.parametrize("value,lo,hi", [(0, 1, None), (5, None, 4), (-1, 0, 10)])
def test_check_int_range_is_a_value_error(value, lo, hi):
    with pytest.raises(ValueError, match="^k must be an integer"):
        check_int(value, "k", minimum=lo, maximum=hi)


def test_check_real():
    assert check_real(2, "s", minimum=0) == 2.0
    assert check_real(np.float32(0.5), "s", minimum=0, maximum=1) == 0.5
    with pytest.raises(TypeError, match="^s must be a real number"):
        check_real(True, "s")
    with pytest.raises(TypeError, match="^s must be a real number"):
        check_real("1", "s")
    with pytest.raises(ValueError, match=r"^s must be a real number \(> 0\)"):
        check_real(0.0, "s", minimum=0, strict_minimum=True)
    with pytest.raises(ValueError, match=r"^s must be a real number \(>= 0 and <= 1\)"):
        check_real(1.5, "s", minimum=0, maximum=1)
    with pytest.raises(ValueError, match="^s must be finite"):
        check_real(float("nan"), "s")


def test_check_choice():
    assert check_choice("pre", "layer_norm", ("none", "pre", "post")) == "pre"
    with pytest.raises(ValueError, match="^layer_norm must be one of 'none', 'pre', 'post'; got 'mid'"):
        check_choice("mid", "layer_norm", ("none", "pre", "post"))


def test_check_array_kind_ndim_and_dtype():
    x = check_array([[1.0, 2.0]], "X", ndim=2, kind="float")
    assert x.shape == (1, 2)
    assert check_array(np.arange(3), "t", ndim=(1, 2), kind="int").dtype.kind == "i"
    assert check_array([1, 2], "y", kind="number", dtype=jnp.float32).dtype == jnp.float32
    with pytest.raises(TypeError, match="^X must be a floating-point array, got dtype int"):
        check_array(np.arange(3), "X", kind="float")
    with pytest.raises(TypeError, match="^t must be an integer array"):
        check_array(np.ones(3), "t", kind="int")
    with pytest.raises(TypeError, match="^m must be a numeric array"):
        check_array(np.ones(3, bool), "m", kind="number")
    with pytest.raises(ValueError, match=r"^X must be 2-D, got shape \(3,\)"):
        check_array(np.ones(3), "X", ndim=2)
    with pytest.raises(ValueError, match=r"^X must be 1-D or 2-D"):
        check_array(np.ones((1, 1, 1)), "X", ndim=(1, 2))
    with pytest.raises(TypeError, match="^X must be an array"):
        check_array("abc", "X")
    with pytest.raises(TypeError, match="^X must be an array"):
        check_array(None, "X")


def test_check_array_passes_tracers_and_checks_their_shape():
    def f(x):
        return check_array(x, "x", ndim=1, kind="float").sum()

    assert float(jax.jit(f)(jnp.ones(3))) == 3.0
    with pytest.raises(ValueError, match="^x must be 1-D"):
        jax.jit(f)(jnp.ones((2, 2)))


def test_check_finite_and_shape():
    check_finite(jnp.ones(3), "y")
    with pytest.raises(ValueError, match="^y must be finite, got 1 non-finite entry"):
        check_finite(jnp.array([1.0, jnp.nan]), "y")
    with pytest.raises(ValueError, match="^y must be finite, got 2 non-finite entries"):
        check_finite(jnp.array([jnp.inf, jnp.nan]), "y")
    jax.jit(lambda v: check_finite(v, "y"))(jnp.array([jnp.nan]))  # traced: not checked
    check_shape(jnp.ones((2, 3)), "K", (2, None))
    with pytest.raises(ValueError, match=r"^K must have shape \(2, \*\), got \(3, 3\)"):
        check_shape(jnp.ones((3, 3)), "K", (2, None))
    with pytest.raises(ValueError, match=r"^y must have shape \(4,\), got \(2, 2\)"):
        check_shape(jnp.ones((2, 2)), "y", (4,))


def test_callable_instance_and_float_dtype_checks():
    import jax.numpy as jnp
    import pytest

    from xfmr.core.validate import check_callable, check_float_dtype, check_instance

    assert check_callable(len, "f") is len
    with pytest.raises(TypeError, match="f must be callable, got int"):
        check_callable(3, "f")
    assert check_instance(3, "n", (int, float)) == 3
    with pytest.raises(TypeError, match="config must be a dict, got list"):
        check_instance([], "config", dict)
    assert check_float_dtype(jnp.float32) == jnp.dtype("float32")
    with pytest.raises(ValueError, match="dtype must be a floating dtype, got int32"):
        check_float_dtype(jnp.int32)
    with pytest.raises(TypeError, match="dtype must be a floating dtype"):
        check_float_dtype("not a dtype")


def test_check_dtype_enabled_refuses_what_jax_would_narrow():
    assert check_dtype_enabled(jnp.float64) == np.float64   # the tests run with jax_enable_x64
    with jax.enable_x64(False):
        assert check_dtype_enabled("float32") == np.float32
        assert check_dtype_enabled(jnp.int32, "digits") == np.int32
        for wide in (jnp.float64, jnp.int64):
            with pytest.raises(ValueError, match="^dtype .*64 needs jax.config.update"):
                check_dtype_enabled(wide)
    with pytest.raises(TypeError, match="^dtype must be a dtype"):
        check_dtype_enabled("float99")
