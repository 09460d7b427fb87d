"""Shared runner-test helpers."""

import pytest
import torch


@pytest.fixture
def thread_spy():
    """Wrap ``algo.update`` and ``algo.act`` to record torch's thread count at each call.

    Returns a function ``spy(algo) -> {"update": [...], "act": [...]}`` whose lists fill as the run goes.
    """

    def spy(algo):
        seen = {"update": [], "act": []}
        for name in seen:
            inner = getattr(algo, name)

            def wrapped(obs, _inner=inner, _name=name):
                seen[_name].append(torch.get_num_threads())
                return _inner(obs)

            setattr(algo, name, wrapped)
        return seen

    return spy
