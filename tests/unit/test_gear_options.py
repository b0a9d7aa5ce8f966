"""Gear options (frontend/gears.py): ATC's syntax and rules, and errors that say what to do."""
import pytest

from om2gen.advice import cli_words
from om2gen.errors import ShapeError
from om2gen.frontend import gears
from om2gen.frontend.gears import DynamicType

IMAGE = [("x", (None, 3, None, None))]


def resolve(declared, input_shapes=None, **kw):
    return gears.resolve(input_shapes=input_shapes or {}, declared=declared, **kw)


def test_batch_gears_fill_dim_0_of_every_marked_input():
    spec = resolve([("x", (None, 3, 8, 8)), ("y", (None, 5))], {"x": (-1, 3, 8, 8), "y": (-1, 5)},
                   dynamic_batch_size="1,2,4,8,")
    assert spec.dynamic_type is DynamicType.DYNAMIC_BATCH
    assert spec.gears == ((1,), (2,), (4,), (8,)) and spec.shape_data_size == 1
    assert spec.shapes(2) == {"x": (4, 3, 8, 8), "y": (4, 5)}
    assert spec.find({"x": (8, 3, 8, 8), "y": (8, 5)}) == 3
    assert spec.find({"x": (3, 3, 8, 8), "y": (3, 5)}) is None
    assert "gear 1: x[2,3,8,8], y[2,5]" in spec.listing()


def test_unshaped_inputs_take_their_symbolic_dims_as_dynamic():
    spec = resolve([("x", (None, 3, 8, 8))], dynamic_batch_size=[1, 4])
    assert spec.templates == {"x": (-1, 3, 8, 8)} and spec.shapes(1) == {"x": (4, 3, 8, 8)}


def test_image_size_by_input_format():
    spec = resolve(IMAGE, {"x": (1, 3, -1, -1)}, dynamic_image_size="224,224;448,320")
    assert spec.shapes(1) == {"x": (1, 3, 448, 320)} and spec.shape_data_size == 2
    nhwc = resolve([("x", (1, None, None, 3))], {"x": (1, -1, -1, 3)}, dynamic_image_size=[(8, 8), (16, 8)],
                   input_format="NHWC")
    assert nhwc.shapes(1) == {"x": (1, 16, 8, 3)}
    with pytest.raises(ShapeError, match="H and W"):
        resolve(IMAGE, {"x": (-1, 3, 8, 8)}, dynamic_image_size="8,8;16,16")
    with pytest.raises(ShapeError, match="each gear gives 2"):
        resolve(IMAGE, {"x": (1, 3, -1, -1)}, dynamic_image_size="8,8,8;16,16,16")


def test_dims_gears_give_every_marked_dim_in_input_order():
    declared = [("ids", (1, None)), ("mask", (1, None))]
    spec = resolve(declared, {"mask": (1, -1), "ids": (1, -1)}, dynamic_dims="16,17;32,33")
    assert spec.order == ("mask", "ids")        # user_designate_shape_order: the user's order
    assert spec.shapes(1) == {"mask": (1, 32), "ids": (1, 33)}
    one = resolve([("ids", (1, None))], {"ids": (1, -1)}, dynamic_dims="128;256")
    assert one.gears == ((128,), (256,))
    with pytest.raises(ShapeError, match="has 2 value"):
        resolve([("ids", (1, None))], {"ids": (1, -1)}, dynamic_dims="1,2;3")


@pytest.mark.parametrize("value, message", [
    ("4", "1 gear"), (",".join(map(str, range(1, 102))), "101 gear"), ("1,2,x", "only digits"),
    ("1,0", "<= 0"), ("2,4,2", "twice")])
def test_bad_batch_values(value, message):
    with pytest.raises(ShapeError, match=message):
        resolve([("x", (None, 3))], dynamic_batch_size=value)


def test_batch_only_varies_dim_0():
    with pytest.raises(ShapeError, match="only dim 0") as e:
        resolve([("x", (None, None))], dynamic_batch_size="1,2")
    assert "dynamic_dims" in str(e.value)


def test_options_exclude_each_other_and_need_a_dynamic_dim():
    with pytest.raises(ShapeError, match="cannot be combined"):
        resolve(IMAGE, {"x": (-1, 3, 8, 8)}, dynamic_batch_size="1,2", dynamic_dims="1;2")
    with pytest.raises(ShapeError, match="no input has one"):
        resolve([("x", (1, 3))], dynamic_batch_size="1,2")


def test_a_minus_one_without_gears_names_the_gear_options():
    """compile-op's error for a -1 without a gear option (a model's -1 without one is dynamic)."""
    with cli_words():
        text = gears.no_gears_for("--input x:float32:-1,3")
    assert "--dynamic-batch-size 1,2,4,8" in text and "--dynamic-dims" in text
    assert resolve([("x", (None, 3))], {"x": (-1, 3)}) is None    # no gear option: no gears


def test_atc_text_is_canonical():
    assert gears.atc_text("dynamic_batch_size", [1, 2, 4]) == gears.atc_text("dynamic_batch_size", " 1, 2,4,") == "1,2,4"
    assert gears.atc_text("dynamic_image_size", [(8, 8), (16, 16)]) == "8,8;16,16"
