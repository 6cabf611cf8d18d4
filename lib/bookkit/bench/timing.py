"""The one way a benchmark times a computation: wall-clock and CPU seconds, the median of
``repeats`` calls, and a sentence naming that statistic, which every row of the table carries.

Wall time on a shared machine measures the other jobs too, so the CPU time (user + system of
this process, all of its threads) of the same calls is kept beside it. A call's result is
waited for (``jax.block_until_ready``), so asynchronous dispatch does not end the clock early.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

from xfmr.core.validate import check_callable, check_instance, check_int


@dataclass(frozen=True)
class Timing:
    """``seconds`` (wall) and ``cpu_seconds`` of one statistic over timed calls, named by
    ``statistic``; ``first_seconds`` is the wall time of the first call (with JAX's compilation),
    when a first call was made before the timed ones."""

    seconds: float
    cpu_seconds: float
    statistic: str
    first_seconds: float | None = None

    def fields(self) -> dict[str, Any]:
        """The row fields of the table: ``{"seconds", "cpu_seconds", "statistic"}``."""
        return {"seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "statistic": self.statistic}

    def plus(self, other: Timing) -> Timing:
        """Two computations run one after the other (the same statistic for both)."""
        check_instance(other, "other", Timing)
        if other.statistic != self.statistic:
            raise ValueError(f"other: cannot add a {other.statistic!r} timing to a {self.statistic!r} one")
        return Timing(self.seconds + other.seconds, self.cpu_seconds + other.cpu_seconds, self.statistic)


def _timed(call: Callable[[int], Any], index: int) -> tuple[float, float, Any]:
    """Wall and CPU seconds of ``call(index)``, and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = jax.block_until_ready(call(index))
    return time.perf_counter() - wall, time.process_time() - cpu, result


def measure(call: Callable[[int], Any], repeats: int = 5, first_call: bool = True) -> Timing:
    """Time ``call(i)``: with ``first_call``, ``call(0)`` first (JAX compiles there; its wall time is
    ``first_seconds``), then the median of ``call(1)``, ..., ``call(repeats)``; without it, the
    median of ``call(0)``, ..., ``call(repeats - 1)``, compilation included in the first.

    ``call`` takes the call's index, so that a benchmark can give each call new inputs (a new
    key, a new history) where a cache could otherwise answer a repeated call.
    """
    check_callable(call, "call")
    check_int(repeats, "repeats", minimum=1)
    first = _timed(call, 0)[0] if first_call else None
    start = 1 if first_call else 0
    runs = [_timed(call, i) for i in range(start, start + repeats)]
    wall, cpu = (statistics.median(r[k] for r in runs) for k in (0, 1))
    if first_call:
        name = "one call" if repeats == 1 else f"median of {repeats} calls"
        statistic = f"{name} after a first one (compilation excluded)"
    else:
        statistic = "one call (compilation included)" if repeats == 1 else (
            f"median of {repeats} calls, compilation included in the first")
    return Timing(wall, cpu, statistic, first)


def measure_once(call: Callable[[], Any]) -> tuple[Timing, Any]:
    """One call of ``call()``, compilation included, timed; and its result (for a computation too
    long to repeat whose result the benchmark also reports)."""
    check_callable(call, "call")
    wall, cpu, result = _timed(lambda i: call(), 0)
    return Timing(wall, cpu, "one call (compilation included)"), result
