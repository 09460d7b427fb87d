"""Twin replay in BatchSim: open loop, teacher forced and closed loop, many worlds at once.

``Twin(task, episodes, candidates)`` builds one batch of ``E * C`` worlds: every recorded
episode under every candidate ``Physics`` (world ``e * C + c``). Worlds start from the
recorded initial state: joint q/dq by name, and for a floating base the odometry pose and
body-frame twist. The scene's object (one free object: ``physics.object_joints``, tool_use's tool)
starts where the bag's scene put it: rebuilt from the bag's ``seed`` (``episode_scene``, exact for
bags of ``record_episode``, whose ``/object_pose`` is float32), else at its first recorded pose
(``/object_pose``, at rest); its position is in every rollout (``Rollout.object_pos``). Degrees of
freedom a robot does not report keep the twin task's own reset state (its seed).

* ``open_loop()``: the recorded commands, from the recorded initial state.
* ``teacher_forced(k)``: the same, but every ``k`` steps each world is reset to the recorded
  state, which separates one-step model error from accumulated drift (unreported DoFs, such as a
  tool, keep their twin state).
* ``closed_loop(policy)``: the (exported) policy acts on the twin's own observations from the
  recorded initial state; the task's velocity command follows the recorded ``cmd_vel``, and
  the episode's scenario is applied to the twin's world: the bag's metadata (``scenario.<name>``,
  see ``record_episode``), else what the task reads off the recording
  (``Task.scenario_from_episode``: a humanoid's push, a tool's start pose and the goal).
  ``success`` is the task's success at the episode's end.

Commands are actuator inputs (what the robot applied, in the profile's joint order) written
to ``ctrl`` of the actuator of each joint, held for ``frame_skip`` physics steps; a
candidate's ``delay_steps`` shifts them (holding the first command until it has passed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from robotrl.twin.episode import Episode
from robotrl.twin.physics import Physics, apply_physics, object_joints
from robotrl.twin.record import actuator_ids, make_task_env

log = logging.getLogger(__name__)

# closed-loop policy: observations (N, P) float32 numpy -> actions (N, A) in [-1, 1]
PolicyFn = Callable[[np.ndarray], np.ndarray]


@dataclass
class Rollout:
    """Twin trajectories of every world, ``W = E * C`` worlds, ``T`` states (padded to the longest episode).

    Attributes:
        q, dq, tau: ``(W, T, J)`` joint positions, velocities, and the joint torques the actuators applied
            (``qfrc_actuator``, as the recorder's and the sim robot's ``JointState.effort``).
        base_pos: ``(W, T, 3)`` or None.
        object_pos: ``(W, T, 3)`` position of the scene's free object (tool_use's tool), or None without one.
        length: ``(W,)`` valid states per world (its episode's length).
        success: ``(W,)`` bool task success at the episode's last state (closed loop only, else None).
        episode: ``(W,)`` episode index of each world; ``candidate``: ``(W,)`` candidate index.

    """

    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    base_pos: np.ndarray | None
    length: np.ndarray
    episode: np.ndarray
    candidate: np.ndarray
    success: np.ndarray | None = None
    object_pos: np.ndarray | None = None


# Model fields a task may set per world for its scene (tool geometry, inertia, friction).
SCENE_FIELDS = ("geom_size", "geom_pos", "geom_quat", "geom_rbound", "geom_aabb", "body_mass", "body_inertia",
                "body_ipos", "body_iquat", "geom_friction")


def episode_scene(task: str, episode: Episode, overrides: dict[str, Any] | None = None
                  ) -> tuple[Any, np.ndarray, np.ndarray]:
    """``(model, qpos (nq,), qvel (nv,))`` of the world an episode was recorded in (nominal physics).

    Rebuilt as ``record_episode`` builds it: the task with the bag's ``seed`` and its scenario
    (``episode_scenario``: the ``scenario.<name>`` metadata, then what the bag shows) applied to world 0.
    """
    env = make_task_env(task, overrides, seed=int(episode.metadata.get("seed", 0)))
    scenario = episode_scenario(task, episode)[0]
    if scenario:
        values = {k: torch.tensor([v]) for k, v in scenario.items()}
        env.task.apply_scenario(torch.tensor([0]), values, env.gen)
    model, _ = env.sim.get_world(0)
    return model, env.sim.bind("qpos")[0].numpy().copy(), env.sim.bind("qvel")[0].numpy().copy()


def episode_scenario(task: str, episode: Episode) -> tuple[dict[str, float], dict[str, str]]:
    """The scenario of a recorded episode and each value's source: ``({name: value}, {name: source})``.

    The bag's metadata (``scenario.<name>``, source ``metadata``) takes precedence over what the
    task reads off the recorded signals (``Task.scenario_from_episode``, source ``bag``).
    """
    from robotrl.tasks import task_class

    measured = task_class(task).scenario_from_episode(episode)
    written = scenario_values(episode)
    scenario = {**measured, **written}
    source = {name: "metadata" if name in written else "bag" for name in scenario}
    if measured:
        log.info("%s: scenario read off the bag: %s", episode.path.name,
                 ", ".join(f"{k}={v:.3g}" for k, v in measured.items() if k not in written) or "(all in metadata)")
    return scenario, source


def scenario_values(episode: Episode) -> dict[str, float]:
    """The scenario parameters an episode's bag metadata records (``scenario.<name>: value``)."""
    return {k.removeprefix("scenario."): float(v) for k, v in episode.metadata.items() if k.startswith("scenario.")}


def _rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate ``v`` ``(3,)`` by the unit quaternion ``q`` (w, x, y, z)."""
    w, u = q[0], q[1:]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


class Twin:
    """Replays ``episodes`` under each of ``candidates`` as parallel worlds of one BatchSim.

    Args:
        task: task name (the twin's model and, for closed loop, observations).
        episodes: recorded episodes (same robot).
        candidates: physics sets to replay under (default: nominal only).
        overrides: task config fields (e.g. from the policy's spec).
        seed: twin task seed (reset state of unobserved DoFs).
        nthread: BatchSim threads (0: all cores).
        engine: ``mujoco``, or ``pybullet`` for a sim-to-sim check: the same worlds rebuilt in PyBullet
            (``robotrl.twin.bullet``), which steps the physics while MuJoCo mirrors its state.

    """

    def __init__(self, task: str, episodes: list[Episode], candidates: list[Physics] | None = None,
                 overrides: dict[str, Any] | None = None, seed: int = 0, nthread: int = 0,
                 engine: str = "mujoco") -> None:
        import mujoco

        if not episodes:
            raise ValueError("Twin needs at least one episode.")
        names = episodes[0].joint_names
        if any(e.joint_names != names for e in episodes):
            raise ValueError("all episodes of one Twin must come from the same robot (same joint names).")
        self.episodes, self.candidates = episodes, candidates or [Physics()]
        self.E, self.C = len(episodes), len(self.candidates)
        self.W = self.E * self.C
        self.env = make_task_env(task, overrides, num_envs=self.W, seed=seed, nthread=nthread)
        self.sim, self.task, self.task_name = self.env.sim, self.env.task, task
        model = self.sim.model
        jid = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
        missing = [n for n, j in zip(names, jid, strict=True) if j < 0]
        if missing:
            raise KeyError(f"the {task} twin model has no joints {missing} (the episode's robot profile names them).")
        self.qadr = np.asarray([model.jnt_qposadr[j] for j in jid])
        self.vadr = np.asarray([model.jnt_dofadr[j] for j in jid])
        self.act = actuator_ids(model, names)
        self.floating = int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
        objects = object_joints(model)
        self.object_qadr = int(model.jnt_qposadr[objects[0]]) if objects.size == 1 else -1
        self.object_dadr = int(model.jnt_dofadr[objects[0]]) if objects.size == 1 else -1
        self.episode_of = np.repeat(np.arange(self.E), self.C)
        self.candidate_of = np.tile(np.arange(self.C), self.E)
        self.T = max(e.num_steps for e in episodes)
        self.length = np.asarray([episodes[e].num_steps for e in self.episode_of])
        self._qpos0 = self.sim.bind("qpos").clone()
        self._qvel0 = self.sim.bind("qvel").clone()
        self._source_scenes(task, overrides)
        if any(not p.is_nominal() for p in self.candidates):
            apply_physics(self.sim, list(range(self.W)), [self.candidates[c] for c in self.candidate_of])
        if engine == "pybullet":
            from robotrl.twin.bullet import use_pybullet

            self.sim = use_pybullet(self.env)
        elif engine != "mujoco":
            raise ValueError(f"engine={engine!r}; valid: mujoco, pybullet.")
        self.dt = float(self.env.step_dt)
        rec_dt = episodes[0].dt
        if rec_dt and abs(rec_dt - self.dt) > 1e-6:
            log.warning("episodes were recorded at %.4f s per step; the twin steps %.4f s", rec_dt, self.dt)

    def _source_scenes(self, task: str, overrides: dict[str, Any] | None) -> None:
        """Give each world the scene its episode was recorded in (``episode_scene``).

        What a robot does not report (a tool's identity, size and initial pose) comes from the
        recorder's own world: the bag's ``seed`` and ``scenario.<name>`` metadata rebuild it
        (a one-world env, as the recorder's: the same seed with more worlds draws differently).
        Bags without a ``seed`` keep the twin's own reset state for those DoFs.
        """
        for e, ep in enumerate(self.episodes):
            if "seed" not in ep.metadata:
                continue
            model, qpos, qvel = episode_scene(task, ep, overrides)
            worlds = torch.as_tensor(np.flatnonzero(self.episode_of == e))
            self._qpos0[worlds], self._qvel0[worlds] = torch.as_tensor(qpos), torch.as_tensor(qvel)
            for name in SCENE_FIELDS:
                arr = np.asarray(getattr(model, name))
                self.sim.set_model_field(name, worlds, torch.as_tensor(np.broadcast_to(arr, (len(worlds), *arr.shape))
                                                                       .copy()))

    # --- state -------------------------------------------------------------------------
    def recorded_state(self, worlds: np.ndarray, k: int, keep_unobserved: bool = False
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """Full ``(qpos (w, nq), qvel (w, nv))`` of worlds at recorded state ``k`` (clamped to each episode).

        DoFs the robot does not report (a tool) come from the episode's initial scene, or with
        ``keep_unobserved`` from the worlds' current state (teacher forcing: the tool stays where the twin has it).
        """
        ids = torch.as_tensor(worlds)
        source_q, source_v = (self.sim.bind("qpos"), self.sim.bind("qvel")) if keep_unobserved else (self._qpos0,
                                                                                                      self._qvel0)
        qpos, qvel = source_q[ids].clone().numpy(), source_v[ids].clone().numpy()
        for i, w in enumerate(worlds):
            ep = self.episodes[self.episode_of[w]]
            kk = min(k, ep.num_steps - 1)
            qpos[i, self.qadr], qvel[i, self.vadr] = ep.q[kk], ep.dq[kk]
            if self.floating and ep.floating:
                quat = ep.base_quat[kk] / np.linalg.norm(ep.base_quat[kk])
                qpos[i, 0:3], qpos[i, 3:7] = ep.base_pos[kk], quat
                qvel[i, 0:3] = _rotate(quat, ep.base_lin_vel[kk])
                qvel[i, 3:6] = ep.base_ang_vel[kk]
            pose = (ep.object_pose[0] if (k == 0 and self.object_qadr >= 0 and ep.object_pose is not None
                                          and "seed" not in ep.metadata) else None)
            if pose is not None and np.all(np.isfinite(pose)):
                qpos[i, self.object_qadr:self.object_qadr + 7] = np.concatenate([pose[:3],
                                                                                 pose[3:] / np.linalg.norm(pose[3:])])
                qvel[i, self.object_dadr:self.object_dadr + 6] = 0.0
        return torch.from_numpy(qpos), torch.from_numpy(qvel)

    def _reset_to(self, worlds: np.ndarray, k: int) -> None:
        qpos, qvel = self.recorded_state(worlds, k, keep_unobserved=k > 0)
        self.sim.reset(torch.as_tensor(worlds, dtype=torch.long), qpos, qvel)

    def _commands(self) -> np.ndarray:
        """``(W, T - 1, J)`` command per world and step, delayed per candidate, padded with the last one."""
        out = np.zeros((self.W, self.T - 1, len(self.act)))
        for w in range(self.W):
            cmd = self.episodes[self.episode_of[w]].command
            d = self.candidates[self.candidate_of[w]].delay_steps
            idx = np.clip(np.arange(self.T - 1) - d, 0, len(cmd) - 1)
            out[w] = cmd[idx]
        return out

    def _record(self, out: dict[str, np.ndarray], k: int) -> None:
        qpos, qvel = self.sim.bind("qpos").numpy(), self.sim.bind("qvel").numpy()
        torque = self.sim.bind("qfrc_actuator").numpy()
        out["q"][:, k], out["dq"][:, k], out["tau"][:, k] = qpos[:, self.qadr], qvel[:, self.vadr], torque[:, self.vadr]
        if out.get("base_pos") is not None:
            out["base_pos"][:, k] = qpos[:, 0:3]
        if out.get("object_pos") is not None:
            out["object_pos"][:, k] = qpos[:, self.object_qadr:self.object_qadr + 3]

    def _buffers(self) -> dict[str, Any]:
        J = len(self.act)
        return {"q": np.zeros((self.W, self.T, J)), "dq": np.zeros((self.W, self.T, J)),
                "tau": np.zeros((self.W, self.T, J)),
                "base_pos": np.zeros((self.W, self.T, 3)) if self.floating else None,
                "object_pos": np.zeros((self.W, self.T, 3)) if self.object_qadr >= 0 else None}

    def _rollout(self, out: dict[str, Any], success: np.ndarray | None = None) -> Rollout:
        return Rollout(q=out["q"], dq=out["dq"], tau=out["tau"], base_pos=out["base_pos"], length=self.length.copy(),
                       episode=self.episode_of.copy(), candidate=self.candidate_of.copy(), success=success,
                       object_pos=out["object_pos"])

    # --- modes ---------------------------------------------------------------------------
    def open_loop(self) -> Rollout:
        """The recorded commands from the recorded initial state."""
        return self.teacher_forced(0)

    def teacher_forced(self, every: int) -> Rollout:
        """Open loop, reset to the recorded state every ``every`` steps (0: never, i.e. open loop)."""
        worlds = np.arange(self.W)
        self._reset_to(worlds, 0)
        cmds = self._commands()
        ctrl = self.sim.bind("ctrl")
        out = self._buffers()
        self._record(out, 0)
        with torch.no_grad():
            for k in range(self.T - 1):
                if every and k and k % every == 0:
                    self._reset_to(worlds, k)
                ctrl[:, self.act] = torch.from_numpy(cmds[:, k])
                self.sim.step(self.env.cfg.frame_skip)
                self._record(out, k + 1)
        return self._rollout(out)

    def closed_loop(self, policy: PolicyFn) -> Rollout:
        """The policy acts on the twin's observations from the recorded initial state (module docstring)."""
        worlds = np.arange(self.W)
        ids = torch.as_tensor(worlds)
        self._task_reset_to_recorded(ids)
        task, ctrl = self.task, self.sim.bind("ctrl")
        recorded = [self.episodes[e].cmd_vel for e in self.episode_of]
        cmd_vel = [c for c in recorded if c is not None]
        has_cmd = hasattr(task, "command") and len(cmd_vel) == len(recorded)  # every world's episode has one
        delays = np.asarray([self.candidates[c].delay_steps for c in self.candidate_of])
        history: list[torch.Tensor] = []
        out = self._buffers()
        alive = np.ones(self.W, dtype=bool)
        success = np.zeros(self.W, dtype=bool)
        length = np.full(self.W, self.T)

        def set_command(k: int) -> None:
            if has_cmd:
                task.command[ids] = torch.as_tensor(np.stack([c[min(k, len(c) - 1)] for c in cmd_vel]),
                                                    dtype=task.command.dtype)

        set_command(0)
        self._record(out, 0)
        with torch.no_grad():
            for k in range(self.T - 1):
                obs = task.observe()["policy"].numpy().astype(np.float32)
                action = torch.as_tensor(np.asarray(policy(obs), dtype=np.float32)).clamp(-1.0, 1.0)
                task.apply_action(action)
                history.append(ctrl[:, self.act].clone())
                idx = np.clip(len(history) - 1 - delays, 0, None)
                ctrl[:, self.act] = torch.stack([history[i][w] for w, i in enumerate(idx)])
                self.sim.step(self.env.cfg.frame_skip)
                task.update(self.env.gen)
                set_command(k + 1)
                self._record(out, k + 1)
                now = task.success().numpy()
                success[alive] = now[alive]
                ended = alive & task.terminated().numpy()
                length[ended] = k + 2
                alive &= ~ended
                if not alive.any():
                    break
        roll = self._rollout(out, success)
        roll.length = np.minimum(length, self.length)
        return roll

    def _task_reset_to_recorded(self, ids: torch.Tensor) -> None:
        """Run the task's own ``reset`` (task buffers, cached signals) with the sim put at the recorded state.

        The task's call to ``sim.reset`` is answered with the recorded ``qpos``/``qvel`` of
        each world, so whatever the task derives from the state at reset sees the real one.
        """
        qpos, qvel = self.recorded_state(ids.numpy(), 0)
        original = self.sim.reset

        def recorded_reset(rid: torch.Tensor, _qpos: Any = None, _qvel: Any = None) -> None:
            original(rid, qpos[rid], qvel[rid])

        scenarios = [episode_scenario(self.task_name, self.episodes[e])[0] for e in self.episode_of[ids.numpy()]]
        names = sorted({n for s in scenarios for n in s})

        def recorded_scenarios(rid: torch.Tensor, _gen: torch.Generator) -> tuple[torch.Tensor, dict]:
            rows = rid.numpy()
            return rid, {n: torch.tensor([scenarios[r].get(n, float("nan")) for r in rows], dtype=torch.float32)
                         for n in names}

        self.sim.reset = recorded_reset  # type: ignore[method-assign]
        if names:
            self.task.scenario_draws = recorded_scenarios  # type: ignore[method-assign]
        try:
            self.task.reset(ids, self.env.gen)
        finally:
            del self.sim.reset
            if names:
                del self.task.scenario_draws
