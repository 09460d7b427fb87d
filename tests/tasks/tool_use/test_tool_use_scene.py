"""The tool_use scene: camera placement."""

import numpy as np
import pytest
from robotrl.tasks.tool_use.scene import look_at


@pytest.mark.parametrize(("pos", "target"), [([1.05, -0.55, 0.5], [0.6, 0.0, 0.12]),
                                             ([0.0, 0.0, 1.0], [0.3, 0.2, 0.0])])
def test_look_at_points_the_cameras_minus_z_at_the_target_with_x_horizontal(pos, target):
    xyaxes = np.asarray(look_at(pos, target))
    x, y = xyaxes[:3], xyaxes[3:]
    assert np.linalg.norm(x) == pytest.approx(1.0) and np.linalg.norm(y) == pytest.approx(1.0)
    assert x @ y == pytest.approx(0.0, abs=1e-12) and x[2] == pytest.approx(0.0, abs=1e-12)  # no roll
    view = -np.cross(x, y)  # a MuJoCo camera looks along its -z
    direction = np.asarray(target) - np.asarray(pos)
    assert view == pytest.approx(direction / np.linalg.norm(direction))
    assert y[2] > 0  # image up is world up
