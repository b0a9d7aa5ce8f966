"""passes/views.py: strided views agree with numpy's views (pure Python, no compiler)."""
import numpy as np
import pytest

from om2gen.passes import views


def numpy_view(base: np.ndarray, v: views.View) -> np.ndarray:
    item = base.itemsize
    return np.lib.stride_tricks.as_strided(base[v.offset:], v.shape, [s * item for s in v.strides])


def as_view(arr: np.ndarray, base: np.ndarray) -> views.View:
    item = base.itemsize
    offset = (arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    return views.View("b", arr.shape, tuple(s // item for s in arr.strides), offset)


@pytest.mark.parametrize("seed", range(40))
def test_reshape_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    base = np.arange(720, dtype=np.float32)
    a = base.reshape(2, 3, 4, 5, 6)
    a = a.transpose(rng.permutation(5))
    a = a[tuple(slice(None, None, int(rng.choice([1, -1]))) for _ in range(5))]
    a = a[:, :, :, :, ::2] if rng.random() < 0.5 else a
    v = as_view(a, base)
    assert np.array_equal(numpy_view(base, v), a)
    for shape in ([a.size], [a.shape[0] * a.shape[1], -1], [1, a.shape[0], 1, -1], list(a.shape) + [1],
                  [a.shape[0], a.shape[1] * a.shape[2], a.shape[3], a.shape[4]]):
        target = a.reshape(shape)
        r = views.reshape(v, target.shape)
        nocopy = np.shares_memory(target, base)
        if nocopy:
            assert r is not None and np.array_equal(numpy_view(base, r), target), shape
        elif r is not None:   # not numpy's choice, but whatever it gives must be right
            assert np.array_equal(numpy_view(base, r), target), shape


def test_broadcast_strides():
    v = views.whole("x", (3, 1, 5))
    assert views.broadcast(v, (2, 3, 4, 5)) == (0, 5, 0, 1)
    assert views.broadcast(v, (3, 5)) is None
    assert views.broadcast(views.whole("s", ()), (2, 2)) == (0, 0)


def test_gather_of_a_transposed_view_is_refused():
    t = views.View("x", (4, 3), (1, 4))   # x[3, 4] transposed: not one run
    assert views.gather(t, [2], [1], 0) is None
    flat = views.whole("x", (12,))
    assert views.gather(flat, [3, 2], [4, 1], 1) == views.View("x", (3, 2), (4, 1), 1)
