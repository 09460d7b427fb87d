"""robotrl.tasks' registry: the deploy hook of each task is found through it, or is None."""

import pytest
from robotrl.tasks import robot_io


def test_robot_io_finds_each_tasks_deploy_hook_none_where_it_has_none_and_rejects_unknown_tasks():
    assert robot_io("tool_use").sim_inputs is not None  # object and goal poses, object box
    assert robot_io("driving").sim_route is not None
    assert hasattr(robot_io("humanoid"), "obs_terms")
    assert robot_io("tool_use_language") is None  # language variants ship no hook of their own
    with pytest.raises(KeyError, match="Unknown task 'no_such_task'. Valid tasks: .*humanoid"):
        robot_io("no_such_task")
