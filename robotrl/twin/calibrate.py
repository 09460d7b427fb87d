"""Calibrate the twin's physics on recorded episodes with ``mujoco.sysid`` (no optimizer of our own).

The pipeline is sysid's: a ``ParameterDict`` of ``Physics`` multipliers (box-bounded) ->
one ``ModelSequences`` per task model holding every episode (initial state, commands at
every physics substep, measured joint q/dq and base pose) -> ``build_residual_fn`` with our
``build_model`` (the task's nominal model with the candidate ``Physics`` applied, see
``robotrl.twin.physics.model_with``) -> ``optimize`` (box-constrained Gauss-Newton) ->
``calculate_intervals`` for confidence intervals, ``save_results`` and ``default_report``.

Finite differences: sysid's Jacobian is a forward difference with step ``diff_step``. MuJoCo's
default (1.5e-8) is below the noise of a contact-rich rollout with a few Newton iterations per
step: on the arm with its hand near the tool and table, the Jacobian it gave at nominal was
100-10000x too large, the Gauss-Newton step was 0 and the fit stopped at nominal ("insufficient
reduction"). A step of 1e-4 (on multipliers near 1) with ``x_scale='jac'`` recovers the arm's
perturbation to about 1% and leaves the humanoid's exact fit exact.

Objects: when every episode records the pose of the object the robot handles (tool_use's
``/object_pose``) and the scene has one free object (``physics.object_joints``), the object starts
where the twin's replay starts it (``robotrl.twin.replay``: the rebuilt scene of a seeded bag, else the
first recorded pose, at rest; windows after the first start at the recorded pose, with velocities
from differences of the recorded poses). With ``observe_object``
(by default when ``object_mass`` is fitted) the object's pose is observed too, so ``object_mass``
and ``geom_friction`` are fitted from how the object moved under the robot's hand. Bags made for
the robot alone should leave it off: random excitation that knocks the tool about makes the
object's residual rough (on the arm's excitation bags, observing the tool took the damping fit
from exact to 30% off).

Contact-rich bags (a grasp, a push that throws the tool): replayed open loop from the first state they
drift apart within a fraction of a second, and the cost over the multipliers is rugged, so Gauss-Newton
from nominal stops in a local minimum. ``segment=k`` fits windows of ``k`` control steps, each from the
recorded state at its start (multiple shooting), and ``starts=n`` runs the optimizer from nominal and
from ``n - 1`` random points in the bounds, keeping the lowest cost. On a trained policy's grasps both
were needed (``robotrl/twin/README.md``: 4 bags, 8 starts, windows of 5-20 steps fit the tool's mass and the
friction within 10%; whole episodes from nominal stay at nominal).

The control delay is an integer, which sysid's least squares cannot fit: it is searched
over a small grid (``delays``), running sysid once per delay and keeping the lowest cost.

Requires ``pip install 'robotrl[twin]'`` (``mujoco[sysid]``). Plain ``mujoco`` ships a
``mujoco.sysid`` package that imports empty (its ``__init__`` hides a missing dependency);
``sysid()`` detects that and raises an ImportError naming the extra.
"""

from __future__ import annotations

import io
import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from robotrl.twin.episode import Episode
from robotrl.twin.physics import Physics, model_with, object_joints, save_physics
from robotrl.twin.record import actuator_ids, make_task_env
from robotrl.twin.replay import _rotate, episode_scene

log = logging.getLogger(__name__)

DEFAULT_PARAMS = ("body_mass", "dof_damping", "actuator_gain")


def sysid() -> Any:
    """``mujoco.sysid``, or an ImportError naming the extra when it is missing or imports empty."""
    import importlib

    try:
        module = importlib.import_module("mujoco.sysid")
    except ImportError as exc:
        raise ImportError("Calibration needs mujoco.sysid: pip install 'robotrl[twin]' "
                          "(mujoco[sysid]==4.0.0).") from exc
    if not hasattr(module, "ParameterDict"):
        missing = ""
        try:
            from mujoco.sysid._src import optimize  # noqa: F401 - imported for its error message
        except ModuleNotFoundError as exc:
            missing = f" (missing module {exc.name!r})"
        raise ImportError("mujoco.sysid imported empty: its optional dependencies are not installed"
                          f"{missing}. Install them with: pip install 'robotrl[twin]' (mujoco[sysid]==4.0.0).")
    return module


@dataclass
class CalibrationResult:
    """What ``calibrate`` found.

    Attributes:
        physics: the fitted physics (delay included).
        intervals: half-width 95% confidence interval of each fitted multiplier.
        cost_by_delay: final sysid cost for each delay tried.
        initial_cost: cost at the nominal physics with the chosen delay.
        params: names of the fitted multipliers.

    """

    physics: Physics
    intervals: dict[str, float]
    cost_by_delay: dict[int, float]
    initial_cost: float
    params: list[str] = field(default_factory=list)

    def save(self, path: str | Path) -> Path:
        """Write the calibrated physics file (``robotrl-sim-robot physics:=``, ``robotrl twin``)."""
        return save_physics(self.physics, path, {"intervals_95": self.intervals,
                                                 "cost_by_delay": {int(k): float(v) for k, v in
                                                                   self.cost_by_delay.items()},
                                                 "initial_cost": self.initial_cost, "fitted": self.params})


class _Problem:
    """The sysid objects for one task model and a list of episodes."""

    def __init__(self, task: str, episodes: list[Episode], overrides: dict[str, Any] | None, delay: int,
                 observe_object: bool = False, segment: int = 0) -> None:

        sid = sysid()
        env = make_task_env(task, overrides)
        self.spec_fn = getattr(env.task, "build_spec", None)
        if self.spec_fn is None:
            raise TypeError(f"task {task!r} has no build_spec(): calibration needs the uncompiled model.")
        self.model = env.sim.model
        self.frame_skip = env.cfg.frame_skip
        self.base: dict[int, Any] = {}  # id(spec) -> the nominal model of that episode's scene
        self.sequences = []
        objects = object_joints(self.model)
        self.object_joint = (self.model.joint(int(objects[0])).name if objects.size == 1 and episodes
                             and all(_object_track(ep) is not None for ep in episodes) else "")
        self.observe_object = observe_object and bool(self.object_joint)
        if observe_object and not self.object_joint:
            raise ValueError(f"observe_object: the {task} scene needs one free object and every episode its pose "
                             f"(/object_pose); the scene has {objects.size} free object(s).")
        # sysid resolves a free joint's qpos by its body's name (by the joint's name it finds width 1, since it
        # looks the joint type up as an enum key): observe "<body>_qpos", as for a floating base
        self.object_body = (self.model.body(int(self.model.jnt_bodyid[objects[0]])).name if self.object_joint
                            else "")
        dt = float(self.model.opt.timestep) * self.frame_skip
        for ep in episodes:
            scene_model, qpos0, qvel0 = episode_scene(task, ep, overrides)
            track = _object_track(ep) if self.object_joint else None
            for start, win in _windows(ep, segment):
                spec = self.spec_fn()
                self.base[id(spec)] = scene_model
                # the object's start: the rebuilt scene's for a seeded bag's first window (exact), else recorded
                recorded = track is not None and (start > 0 or "seed" not in ep.metadata)
                vel0 = _object_velocity(track, start, dt) if recorded and track is not None else None
                init, ctrl, sensor, obs_names = self._sequence(sid, scene_model, qpos0, qvel0, win, delay, vel0,
                                                               recorded)
                name = ep.path.name if segment <= 0 else f"{ep.path.name}@{start}"
                self.sequences.append(sid.ModelSequences(name, spec, [name], [init], [ctrl], [sensor],
                                                         allow_missing_sensors=True))
        self.obs = [(n, sid.SignalType.MjStateQPos if n.endswith("_qpos") else sid.SignalType.MjStateQVel)
                    for n in obs_names]

    def _sequence(self, sid: Any, model: Any, qpos0: np.ndarray, qvel0: np.ndarray, ep: Episode, delay: int,
                  object_vel0: np.ndarray | None = None, object_from_bag: bool = False
                  ) -> tuple[Any, Any, Any, list[str]]:
        """The sysid initial state, control and sensor series of one episode (or window) in its scene ``model``."""
        import mujoco

        episodes = [ep]
        names = ep.joint_names
        act = actuator_ids(model, names)
        floating = int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
        root = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, 1)
        ctrl0 = np.zeros(model.nu)
        obs_names = [f"{j}_qpos" for j in names] + [f"{j}_qvel" for j in names]
        if floating and all(e.floating for e in episodes):
            obs_names = [f"{root}_qpos", *obs_names]
        track = _object_track(ep) if self.object_joint else None
        if self.observe_object:
            obs_names = [*obs_names, f"{self.object_body}_qpos"]
        h = model.opt.timestep
        inits, controls, sensors = [], [], []
        for ep in episodes:
            qpos, qvel = qpos0.copy(), qvel0.copy()
            qpos[[model.jnt_qposadr[model.joint(j).id] for j in names]] = ep.q[0]
            qvel[[model.jnt_dofadr[model.joint(j).id] for j in names]] = ep.dq[0]
            if floating and ep.floating:
                # load_episode sets the four base series together, from one odometry topic
                assert ep.base_pos is not None and ep.base_quat is not None
                assert ep.base_lin_vel is not None and ep.base_ang_vel is not None
                quat = ep.base_quat[0] / np.linalg.norm(ep.base_quat[0])
                qpos[0:3], qpos[3:7] = ep.base_pos[0], quat
                qvel[0:3], qvel[3:6] = _rotate(quat, ep.base_lin_vel[0]), ep.base_ang_vel[0]
            if track is not None and object_from_bag:
                jid = model.joint(self.object_joint).id
                qadr, dadr = model.jnt_qposadr[jid], model.jnt_dofadr[jid]
                qpos[qadr:qadr + 7] = track[0]
                qvel[dadr:dadr + 6] = 0.0 if object_vel0 is None else object_vel0
            inits.append(sid.create_initial_state(model, qpos, qvel))
            steps = ep.num_steps - 1
            idx = np.clip(np.arange(steps) - delay, 0, steps - 1)
            ctrl = np.tile(ctrl0, (steps * self.frame_skip, 1))
            ctrl[:, act] = np.repeat(ep.command[idx], self.frame_skip, axis=0)
            times = np.arange(steps * self.frame_skip) * h
            controls.append(sid.TimeSeries.from_control_names(times, ctrl, model))
            data = [ep.q, ep.dq]
            if floating and ep.floating:
                data = [np.concatenate([ep.base_pos, ep.base_quat], axis=1), *data]
            if self.observe_object and track is not None:
                data = [*data, track]
            t = np.arange(ep.num_steps) * h * self.frame_skip
            sensors.append(sid.TimeSeries.from_names(t, np.concatenate(data, axis=1), model, obs_names))
        return inits[0], controls[0], sensors[0], obs_names

    def build_model(self, params: Any, spec: Any = None) -> Any:
        """The sysid ``BuildModelFn``: the episode's scene model (by ``spec``) with the candidate multipliers."""
        # Physics field -> multiplier (Any: the names are sysid parameter names, known only at run time)
        values: dict[str, Any] = {name: float(params[name].value[0]) for name in params.keys()}
        return model_with(self.base.get(id(spec), self.model), Physics(**values))


def _object_track(ep: Episode) -> np.ndarray | None:
    """``(T, 7)`` the recorded object pose with unit quaternions, or None when it is absent or has gaps."""
    if ep.object_pose is None or not np.all(np.isfinite(ep.object_pose)):
        return None
    track = np.asarray(ep.object_pose, dtype=np.float64).copy()
    track[:, 3:] /= np.linalg.norm(track[:, 3:], axis=1, keepdims=True)
    return track


def _windows(ep: Episode, segment: int) -> list[tuple[int, Episode]]:
    """``[(start, window)]``: the whole episode (``segment`` <= 0), or windows of ``segment`` control steps.

    Consecutive windows share their boundary state; a last piece shorter than 2 states is dropped.
    """
    if segment <= 0 or ep.num_steps <= segment + 1:
        return [(0, ep)]
    starts = range(0, ep.num_steps - 1, segment)
    return [(s, ep.window(s, min(segment + 1, ep.num_steps - s))) for s in starts if ep.num_steps - s >= 2]


def _object_velocity(track: np.ndarray, k: int, dt: float) -> np.ndarray:
    """``(6,)`` the object's free-joint velocity at recorded state ``k``, from its poses ``track`` ``(T, 7)``.

    Central differences (forward or backward at the ends), linear in the world frame and angular in the
    body frame, as MuJoCo's free joint has them; 0 at an episode's first state (the object at rest).
    """
    if k == 0:
        return np.zeros(6)
    a, b = max(k - 1, 0), min(k + 1, len(track) - 1)
    span = (b - a) * dt
    lin = (track[b, :3] - track[a, :3]) / span
    import torch

    from robotrl.rotations import quat_conjugate, quat_mul

    q = torch.as_tensor(track[[a, b], 3:], dtype=torch.float64)
    rel = quat_mul(quat_conjugate(q[:1]), q[1:])[0].numpy()  # the turn from a to b in a's body frame
    rel_w, rel_v = float(rel[0]), rel[1:]
    if rel_w < 0:
        rel_w, rel_v = -rel_w, -rel_v
    norm = float(np.linalg.norm(rel_v))
    angle = 2.0 * np.arctan2(norm, rel_w)
    ang = rel_v / norm * angle / span if norm > 1e-12 else np.zeros(3)
    return np.concatenate([lin, ang])


def calibrate(task: str, episodes: list[Episode], params: tuple[str, ...] = DEFAULT_PARAMS,
              bounds: tuple[float, float] = (0.5, 2.0), delays: tuple[int, ...] = (0,),
              overrides: dict[str, Any] | None = None, max_iters: int = 30, out_dir: str | Path | None = None,
              report: bool = False, diff_step: float = 1e-4, x_scale: str | float | None = "jac",
              observe_object: bool | None = None, segment: int = 0, starts: int = 1) -> CalibrationResult:
    """Fit ``params`` (``Physics`` multipliers) and the delay to ``episodes`` with mujoco.sysid.

    Args:
        task: the twin's task (its nominal model is the starting point).
        episodes: recorded episodes (same robot).
        params: multipliers to fit; the others stay nominal.
        bounds: box bounds of every multiplier.
        delays: integer control delays to try (sysid runs once per delay).
        overrides: task config fields.
        max_iters: optimizer iterations per delay.
        out_dir: if given, sysid's ``save_results`` (identified XML, parameters, confidence) go here.
        report: also write sysid's ``default_report`` HTML into ``out_dir``.
        diff_step: finite-difference step of the Jacobian (module docstring).
        x_scale: parameter scaling of ``mujoco.minimize.least_squares`` (``'jac'``: by Jacobian columns).
        observe_object: also fit the recorded pose of the scene's object (module docstring); None: when
            ``object_mass`` is in ``params``.
        starts: optimizer runs per delay: from nominal (all 1.0), then from ``starts - 1`` points drawn
            log-uniformly in ``bounds`` (seeded); the lowest final cost wins. Contact-rich bags have a rugged
            cost, where Gauss-Newton from nominal can stop in a local minimum (module docstring).
        segment: 0 fits each episode open loop from its first state (single shooting). ``k > 0`` cuts each
            episode into windows of ``k`` control steps, each started from the recorded state at its start
            (multiple shooting): for contact-rich episodes (a grasp, a push) whose open-loop replay drifts
            apart within a fraction of a second, the cost stays smooth. A window's first ``delay`` steps hold
            its first command (the commands before it are not replayed).

    Returns:
        The fitted physics with 95% confidence intervals and the cost per delay.

    """
    if starts < 1:
        raise ValueError(f"calibrate starts={starts}: give 1 (from nominal only) or more.")
    valid = [f for f in Physics.__dataclass_fields__ if f != "delay_steps"]
    unknown = [p for p in params if p not in valid]
    if unknown or not params:
        raise ValueError(f"calibrate params={list(params)}: unknown {unknown or '(none given)'}; valid: {valid} "
                         "(the delay is searched over delays=).")
    sid = sysid()
    best: tuple[float, int, Any, Any, Any] | None = None
    costs: dict[int, float] = {}
    initial_cost = float("nan")
    rng = np.random.default_rng(0)
    log_lo, log_hi = np.log(bounds[0]), np.log(bounds[1])
    points = [dict.fromkeys(params, 1.0)] + [dict(zip(params, np.exp(rng.uniform(log_lo, log_hi, len(params))).tolist(),
                                                      strict=True)) for _ in range(starts - 1)]
    for delay in delays:
        problem = _Problem(task, episodes, overrides, delay,
                           "object_mass" in params if observe_object is None else observe_object, segment)
        residual_fn = sid.build_residual_fn(models_sequences=problem.sequences, build_model=problem.build_model,
                                            enabled_observations=problem.obs, n_threads=1)
        nominal = sid.ParameterDict({n: sid.Parameter(n, 1.0, bounds[0], bounds[1]) for n in params})
        start_cost = float(np.sum(np.concatenate(residual_fn(nominal.as_vector(), nominal.copy())[0]) ** 2))
        for i, point in enumerate(points):
            pdict = sid.ParameterDict({n: sid.Parameter(n, point[n], bounds[0], bounds[1]) for n in params})
            trace = io.StringIO()  # mujoco.minimize's per-iteration lines go to the log, not stdout
            opt, result = sid.optimize(pdict, residual_fn, optimizer="mujoco", verbose=False, max_iters=max_iters,
                                       eps=diff_step, x_scale=x_scale, output=trace)
            log.debug("sysid delay=%d start %d iterations:\n%s", delay, i, trace.getvalue())
            cost = float(np.sum(np.concatenate(residual_fn(opt.as_vector(), opt.copy())[0]) ** 2))
            costs[delay] = min(cost, costs.get(delay, np.inf))
            log.info("sysid delay=%d start %d %s: cost %.4g -> %.4g, x=%s", delay, i,
                     [round(v, 3) for v in point.values()], start_cost, cost, opt.as_vector().round(4).tolist())
            if best is None or cost < best[0]:
                best, initial_cost = (cost, delay, opt, result, (problem, pdict, residual_fn)), start_cost
    assert best is not None
    _, delay, opt, result, (problem, pdict, residual_fn) = best
    residuals = residual_fn(opt.as_vector(), opt.copy())[0]
    _, half = sid.calculate_intervals(residuals, result.jac)
    fitted = {n: float(opt[n].value[0]) for n in params}
    physics = replace(Physics(), **fitted, delay_steps=int(delay))
    if out_dir is not None:
        out = Path(out_dir)
        sid.save_results(str(out / "sysid"), problem.sequences, pdict, opt, result, residual_fn)
        if report:
            rb = sid.default_report(problem.sequences, pdict, opt, residual_fn, result, title=f"robotrl twin: {task}",
                                    save_path=str(out / "sysid"), build_model=problem.build_model,
                                    generate_videos=False)
            rb.build(str(out / "sysid" / "report.html")) if hasattr(rb, "build") else rb.save(
                str(out / "sysid" / "report.html"))
    return CalibrationResult(physics=physics, intervals=dict(zip(params, np.asarray(half, float).tolist(),
                                                                 strict=True)),
                             cost_by_delay=costs, initial_cost=initial_cost, params=list(params))


__all__ = ["CalibrationResult", "asdict", "calibrate", "sysid"]
