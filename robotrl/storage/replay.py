"""Device-resident replay for off-policy RL: batched insertion from many worlds, n-step sampling.

Layout: a ring of ``capacity`` time slots, each holding one step of all ``W`` worlds, so
every field is ``[capacity, W, ...]`` on the env's device and a world's consecutive steps
stay in one column. That makes n-step returns a gather along time, stopping at episode
ends (see ``robotrl.algos.functional.nstep_returns``).

Fields per transition: ``obs`` ``(D)``, ``next_obs`` ``(D)`` (the pre-reset observation,
``info["final_obs"]`` for worlds whose episode ended, so time-outs bootstrap from the real
last state), ``action`` ``(A)``, ``reward``, ``terminated``, ``truncated``.

Memory per transition: ``4 * (2 * D + A + 1) + 2`` bytes (float32 observations, actions,
reward; bool flags). Humanoid-sized data (``D = 70``, ``A = 17``) is 634 bytes, so a 1M
transition buffer is about 0.6 GB. ``ReplayBuffer.bytes_per_transition`` reports it.

Demonstrations use the same class with ``W = 1`` and episodes written back to back
(``add_sequence``); ``MixedSampler`` draws a fixed fraction of every batch from them
(RLPD / ResFiT 50/50).
"""

from __future__ import annotations

import logging

import torch

from robotrl.algos.functional import nstep_returns

log = logging.getLogger(__name__)

Batch = dict[str, torch.Tensor]


class ReplayBuffer:
    """Ring buffer of ``[capacity, num_worlds]`` transitions on ``device`` (see module docstring).

    Args:
        capacity: time slots; total transitions held is ``capacity * num_worlds``.
        num_worlds: worlds written per ``add`` (the env's ``num_envs``).
        obs_dim: flat observation size ``D``.
        action_dim: action size ``A``.
        device: where every tensor lives (the env's device).

    """

    def __init__(
        self,
        capacity: int,
        num_worlds: int,
        obs_dim: int,
        action_dim: int,
        device: torch.device | str = "cpu",
    ) -> None:
        if capacity < 1 or num_worlds < 1:
            raise ValueError(
                f"ReplayBuffer needs capacity >= 1 and num_worlds >= 1, got {capacity}, {num_worlds}."
            )
        self.capacity, self.num_worlds = capacity, num_worlds
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.device = torch.device(device)

        def z(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(capacity, num_worlds, *shape, dtype=dtype, device=self.device)

        self.obs, self.next_obs, self.action = z(obs_dim), z(obs_dim), z(action_dim)
        self.reward = z()
        self.terminated, self.truncated = z(dtype=torch.bool), z(dtype=torch.bool)
        self.ptr = 0
        self.size = 0

    @property
    def bytes_per_transition(self) -> int:
        """Bytes of device memory one stored transition takes."""
        return 4 * (2 * self.obs_dim + self.action_dim + 1) + 2

    _FIELDS = ("obs", "next_obs", "action", "reward", "terminated", "truncated")

    @property
    def nbytes(self) -> int:
        """Bytes held by the buffer's tensors (its full capacity)."""
        return sum(getattr(self, f).numel() * getattr(self, f).element_size() for f in self._FIELDS)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The stored slots ``[size, W, ...]`` of every field, plus ``ptr`` and ``size``, for checkpoints."""
        out = {f: getattr(self, f)[: self.size] for f in self._FIELDS}
        return out | {"ptr": torch.tensor(self.ptr), "size": torch.tensor(self.size)}

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Inverse of ``state_tensors``.

        Raises:
            ValueError: the saved buffer has other worlds, dimensions or more slots than this one.

        """
        size = int(tensors["size"])
        for f in self._FIELDS:
            have, want = tuple(tensors[f].shape), (size, *getattr(self, f).shape[1:])
            if have != want or size > self.capacity:
                raise ValueError(
                    f"Saved replay field {f!r} has shape {have}, this buffer needs {want} with at most "
                    f"{self.capacity} slots: resume with the same sim.num_envs, task and algo.buffer_size."
                )
            getattr(self, f)[:size].copy_(tensors[f])
        self.ptr, self.size = int(tensors["ptr"]), size

    def __len__(self) -> int:
        """Transitions stored (``size * num_worlds``)."""
        return self.size * self.num_worlds

    def add(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
    ) -> None:
        """Write one step of every world.

        Args:
            obs: ``(W, D)`` observation the action was taken in.
            action: ``(W, A)`` action applied.
            reward: ``(W,)``.
            next_obs: ``(W, D)`` observation after the step, *before* any autoreset.
            terminated: ``(W,)`` bool, the task ended the episode.
            truncated: ``(W,)`` bool, the episode hit its time limit.

        """
        if obs.shape != (self.num_worlds, self.obs_dim) or action.shape != (self.num_worlds, self.action_dim):
            raise ValueError(
                f"ReplayBuffer.add expects obs ({self.num_worlds}, {self.obs_dim}) and action "
                f"({self.num_worlds}, {self.action_dim}); got {tuple(obs.shape)} and {tuple(action.shape)}."
            )
        i = self.ptr
        self.obs[i].copy_(obs)
        self.action[i].copy_(action)
        self.reward[i].copy_(reward)
        self.next_obs[i].copy_(next_obs)
        self.terminated[i].copy_(terminated)
        self.truncated[i].copy_(truncated & ~terminated)
        self.ptr = (self.ptr + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def add_sequence(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
    ) -> None:
        """Write ``T`` consecutive steps at once (fields ``[T, W, ...]``, same meaning as ``add``).

        Used for demonstrations (``W = 1``, episodes back to back, each ending with
        ``terminated`` or ``truncated`` set on its last step).
        """
        T = obs.shape[0]
        if T > self.capacity:
            raise ValueError(
                f"add_sequence got {T} steps but the buffer holds {self.capacity}; raise capacity."
            )
        idx = (self.ptr + torch.arange(T, device=self.device)) % self.capacity
        for name, value in (
            ("obs", obs),
            ("action", action),
            ("reward", reward),
            ("next_obs", next_obs),
            ("terminated", terminated),
            ("truncated", truncated & ~terminated),
        ):
            getattr(self, name)[idx] = value.to(self.device, getattr(self, name).dtype).reshape(
                T, self.num_worlds, *getattr(self, name).shape[2:]
            )
        self.ptr = (self.ptr + T) % self.capacity
        self.size = min(self.size + T, self.capacity)

    def sample(
        self, batch_size: int, n_step: int = 1, gamma: float = 0.99, gen: torch.Generator | None = None
    ) -> Batch:
        """Uniform batch of n-step transitions.

        Returns:
            ``obs`` ``(B, D)``, ``action`` ``(B, A)``, ``reward`` ``(B,)`` (one-step),
            ``nstep_return`` ``(B,)``, ``discount`` ``(B,)`` (``gamma^m`` or 0 after a
            termination), ``next_obs`` ``(B, D)`` (observation to bootstrap from, ``m`` steps
            on), ``terminated`` ``(B,)`` and ``truncated`` ``(B,)`` of the first step.

        """
        if self.size == 0:
            raise RuntimeError("ReplayBuffer.sample called on an empty buffer; add transitions first.")
        t = torch.randint(0, self.size, (batch_size,), device=self.device, generator=gen)
        w = torch.randint(0, self.num_worlds, (batch_size,), device=self.device, generator=gen)
        if self.size == self.capacity:
            t = (self.ptr + t) % self.capacity
        return self.gather(t, w, n_step, gamma)

    def gather(self, t: torch.Tensor, w: torch.Tensor, n_step: int, gamma: float) -> Batch:
        """n-step transitions starting at time slots ``t`` ``(B,)`` of worlds ``w`` ``(B,)``."""
        newest = (self.ptr - 1) % self.capacity
        written_after = (newest - t) % self.capacity
        k = torch.arange(n_step, device=self.device)
        ts = (t[None, :] + k[:, None]) % self.capacity
        valid = k[:, None] <= written_after[None, :]
        ret, disc, last = nstep_returns(
            self.reward[ts, w], self.terminated[ts, w], self.truncated[ts, w], valid, gamma
        )
        t_last = (t + last) % self.capacity
        return {
            "obs": self.obs[t, w],
            "action": self.action[t, w],
            "reward": self.reward[t, w],
            "nstep_return": ret,
            "discount": disc,
            "next_obs": self.next_obs[t_last, w],
            "terminated": self.terminated[t, w],
            "truncated": self.truncated[t, w],
        }


class MixedSampler:
    """Draws ``round(ratio * B)`` of every batch from ``demos`` and the rest from ``online``.

    With no demonstrations (``demos`` None or empty) every row comes from ``online``.
    The batch gets an ``is_demo`` ``(B,)`` bool column.
    """

    def __init__(self, online: ReplayBuffer, demos: ReplayBuffer | None, ratio: float = 0.5) -> None:
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"MixedSampler ratio must be in [0, 1] (fraction of demo rows), got {ratio}.")
        self.online, self.demos, self.ratio = online, demos, ratio

    def num_demo(self, batch_size: int) -> int:
        """Demo rows in a batch of ``batch_size``."""
        if self.demos is None or len(self.demos) == 0:
            return 0
        if len(self.online) == 0:
            return batch_size
        return int(round(self.ratio * batch_size))

    def sample(
        self, batch_size: int, n_step: int = 1, gamma: float = 0.99, gen: torch.Generator | None = None
    ) -> Batch:
        """A ``batch_size`` batch (see ``ReplayBuffer.sample``) plus ``is_demo``."""
        n_demo = self.num_demo(batch_size)
        parts: list[Batch] = []
        flags: list[torch.Tensor] = []
        if n_demo > 0:
            assert self.demos is not None
            parts.append(self.demos.sample(n_demo, n_step, gamma, gen))
            flags.append(torch.ones(n_demo, dtype=torch.bool, device=self.online.device))
        if batch_size - n_demo > 0:
            parts.append(self.online.sample(batch_size - n_demo, n_step, gamma, gen))
            flags.append(torch.zeros(batch_size - n_demo, dtype=torch.bool, device=self.online.device))
        batch = {k: torch.cat([p[k].to(self.online.device) for p in parts]) for k in parts[0]}
        batch["is_demo"] = torch.cat(flags)
        return batch
