"""`DropoutByPasses`: P_drop from the passes a run makes, checked against
the interpolation written out by hand."""

import pytest

from keras_transformer.training import DropoutByPasses


def test_rate_is_linear_between_the_points_and_flat_outside():
    plan = DropoutByPasses(updates_per_pass=400)  # 9 passes: 3,600 updates, 14: 5,600
    expected = {0: 0.1, 2000: 0.1, 3600: 0.1, 4600: 0.15, 5100: 0.175, 5600: 0.2, 40_000: 0.2}
    for updates, rate in expected.items():
        assert plan.rate(updates) == pytest.approx(rate), updates
    assert plan.passes(3000) == 7.5


def test_points_of_your_own():
    plan = DropoutByPasses(100, rates=[(2, 0.3), (4, 0.1), (8, 0.0)])
    assert plan.rates == ((2.0, 0.3), (4.0, 0.1), (8.0, 0.0))
    assert [plan.rate(u) for u in (100, 300, 600, 900)] == [0.3, 0.2, 0.05, 0.0]


@pytest.mark.parametrize(
    "arguments, name",
    [
        (dict(updates_per_pass=0), "updates_per_pass"),
        (dict(updates_per_pass=True), "updates_per_pass"),
        (dict(updates_per_pass="400"), "updates_per_pass"),
        (dict(updates_per_pass=400, rates=()), "rates"),
        (dict(updates_per_pass=400, rates=((16, 0.2), (10, 0.1))), "rates"),
        (dict(updates_per_pass=400, rates=((-1, 0.2),)), "rates"),
        (dict(updates_per_pass=400, rates=(0.1, 0.2)), "rates"),
        (dict(updates_per_pass=400, rates=((10, 1.0),)), r"rates\[0\]"),
    ],
)
def test_bad_arguments(arguments, name):
    with pytest.raises(ValueError, match=f"`{name}` must .* Received: {name}="):
        DropoutByPasses(**arguments)
