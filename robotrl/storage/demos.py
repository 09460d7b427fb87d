"""Demonstrations on disk: robomimic-style HDF5, read and written with plain h5py.

Layout (every array float32 unless noted; ``T`` steps in the demo)::

    data/                         attrs: total (int, steps in all demos), env_args (JSON str)
    data/demo_0/                  attrs: num_samples (int T), success (bool)
    data/demo_0/obs/policy        (T, P)  observation the action was taken in
    data/demo_0/obs/<key>         (T, ...) optional extra observations (``image`` uint8
                                  (T, H, W, 3), gzip; ``instruction`` int64 (T,)), VLA demos
    data/demo_0/next_obs/policy   (T, P)  observation after the action (pre-reset)
    data/demo_0/actions           (T, A)  in [-1, 1]
    data/demo_0/teacher_actions   (T, A)  optional: the teacher's action before collection
                                  noise (``actions`` is what was applied); DART labels
    data/demo_0/rewards           (T,)    the env's reward as collected
    data/demo_0/dones             (T,)    int64, 1 on the last step
    data/demo_0/terminated        (T,)    bool, the task ended the episode (success or failure)
    data/demo_1/...

This is robomimic's ``data/demo_i/{obs,next_obs,actions,rewards,dones}`` structure; the
``terminated`` flag keeps time-outs apart from real episode ends for bootstrapping.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from robotrl.storage.replay import ReplayBuffer

Episode = dict[str, Any]


def _h5py() -> Any:
    try:
        import h5py
    except ImportError as err:
        raise ImportError("Demonstrations need h5py: pip install 'robotrl[offpolicy]'.") from err
    return h5py


def write_demos(path: str | os.PathLike, episodes: list[Episode], env_args: dict[str, Any]) -> None:
    """Write ``episodes`` to a robomimic-style HDF5 file (see module docstring).

    Args:
        path: output ``.hdf5`` file (overwritten).
        episodes: each a dict of ``obs`` ``(T, P)``, ``next_obs`` ``(T, P)``, ``actions``
            ``(T, A)``, ``rewards`` ``(T,)``, ``terminated`` ``(T,)`` tensors or arrays,
            ``success`` (bool) and optionally ``teacher_actions`` ``(T, A)`` and ``extra_obs``
            (key -> ``(T, ...)`` tensor).
        env_args: JSON-safe description of the env and the teacher.

    """
    h5py = _h5py()
    total = 0
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        for i, ep in enumerate(episodes):
            g = data.create_group(f"demo_{i}")
            actions = torch.as_tensor(ep["actions"]).float().cpu().numpy()
            T = actions.shape[0]
            g.create_dataset("obs/policy", data=torch.as_tensor(ep["obs"]).float().cpu().numpy())
            for key, value in ep.get("extra_obs", {}).items():
                arr = torch.as_tensor(value).cpu().numpy()
                g.create_dataset(f"obs/{key}", data=arr, compression="gzip" if arr.ndim >= 3 else None)
            g.create_dataset("next_obs/policy", data=torch.as_tensor(ep["next_obs"]).float().cpu().numpy())
            g.create_dataset("actions", data=actions)
            if "teacher_actions" in ep:
                g.create_dataset("teacher_actions", data=torch.as_tensor(ep["teacher_actions"]).float().cpu().numpy())
            g.create_dataset("rewards", data=torch.as_tensor(ep["rewards"]).float().cpu().numpy())
            dones = torch.zeros(T, dtype=torch.int64)
            dones[-1] = 1
            g.create_dataset("dones", data=dones.numpy())
            g.create_dataset("terminated", data=torch.as_tensor(ep["terminated"]).bool().cpu().numpy())
            g.attrs["num_samples"] = T
            g.attrs["success"] = bool(ep["success"])
            total += T
        data.attrs["total"] = total
        data.attrs["env_args"] = json.dumps(env_args)


def read_demos(path: str | os.PathLike, success_only: bool = False) -> tuple[list[Episode], dict[str, Any]]:
    """Read ``(episodes, env_args)`` written by ``write_demos`` (tensors on CPU, demo order kept).

    Raises:
        FileNotFoundError: no such file.
        KeyError: the file is not in the layout above, naming the missing key.

    """
    h5py = _h5py()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No demonstration file at {path!r}; record one with `robotrl collect`.")
    episodes: list[Episode] = []
    with h5py.File(path, "r") as f:
        if "data" not in f:
            raise KeyError(f"{path!r} has no 'data' group: not a robomimic-style demonstration file.")
        data = f["data"]
        env_args = json.loads(data.attrs.get("env_args", "{}"))
        names = sorted(data.keys(), key=lambda k: int(k.split("_")[-1]))
        for name in names:
            g = data[name]
            ep = {
                "obs": torch.from_numpy(g["obs/policy"][()]),
                "next_obs": torch.from_numpy(g["next_obs/policy"][()]),
                "actions": torch.from_numpy(g["actions"][()]),
                "rewards": torch.from_numpy(g["rewards"][()]),
                "terminated": torch.from_numpy(g["terminated"][()]).bool(),
                "success": bool(g.attrs["success"]),
            }
            if "teacher_actions" in g:
                ep["teacher_actions"] = torch.from_numpy(g["teacher_actions"][()])
            extra = {k: torch.from_numpy(g["obs"][k][()]) for k in g["obs"] if k != "policy"}
            if extra:
                ep["extra_obs"] = extra
            if ep["success"] or not success_only:
                episodes.append(ep)
    return episodes, env_args


def demos_to_buffer(
    episodes: list[Episode],
    device: torch.device | str,
    sparse_reward: bool = True,
    base_actions: list[torch.Tensor] | None = None,
    next_base_actions: list[torch.Tensor] | None = None,
) -> ReplayBuffer:
    """A one-world ``ReplayBuffer`` holding ``episodes`` back to back (for ``MixedSampler``).

    Args:
        episodes: from ``read_demos``.
        device: buffer device.
        sparse_reward: ResFiT labels: reward 1 on the last step of a successful demo, else 0;
            False keeps the recorded rewards.
        base_actions: per episode ``(T, A)`` base actions to append to ``obs`` (relabelling,
            see ``robotrl.algos.residual.relabel_base_actions``); None stores plain obs.
        next_base_actions: per episode ``(T, A)`` base actions of ``next_obs``.

    Returns:
        The filled buffer; the last step of each episode is ``terminated`` if the task ended
        it, else ``truncated``.

    """
    if not episodes:
        raise ValueError("demos_to_buffer got no episodes; check the file or success_only.")
    fields: dict[str, list[torch.Tensor]] = {
        k: [] for k in ("obs", "next_obs", "action", "reward", "term", "trunc")
    }
    for i, ep in enumerate(episodes):
        T = ep["actions"].shape[0]
        obs, next_obs = ep["obs"].float(), ep["next_obs"].float()
        if base_actions is not None:
            assert next_base_actions is not None
            obs = torch.cat([obs, base_actions[i].float().cpu()], dim=1)
            next_obs = torch.cat([next_obs, next_base_actions[i].float().cpu()], dim=1)
        reward = ep["rewards"].float()
        if sparse_reward:
            reward = torch.zeros(T)
            reward[-1] = float(ep["success"])
        term = ep["terminated"].clone()
        trunc = torch.zeros(T, dtype=torch.bool)
        trunc[-1] = not bool(term[-1])
        for key, value in (
            ("obs", obs),
            ("next_obs", next_obs),
            ("action", ep["actions"].float()),
            ("reward", reward),
            ("term", term),
            ("trunc", trunc),
        ):
            fields[key].append(value)
    cat = {k: torch.cat(v).unsqueeze(1) for k, v in fields.items()}
    total = cat["obs"].shape[0]
    buf = ReplayBuffer(total, 1, cat["obs"].shape[-1], cat["action"].shape[-1], device)
    buf.add_sequence(cat["obs"], cat["action"], cat["reward"], cat["next_obs"], cat["term"], cat["trunc"])
    return buf
