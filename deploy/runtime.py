"""The robot-side policy: an ONNX model run by onnxruntime, described by its JSON spec.

Loads exactly two files, ``policy.json`` and the ``policy.onnx`` it names (hash-checked),
never a pickle, and needs only numpy and onnxruntime (no torch, no mujoco).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from robotrl.deploy.spec import load_spec


class OnnxPolicy:
    """``(P,)`` float32 observation -> ``(A,)`` float32 action in ``[-1, 1]``.

    Attributes:
        spec: the validated JSON spec (``robotrl.deploy.spec``).

    """

    def __init__(self, spec_path: str | os.PathLike, threads: int = 1) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ImportError("robotrl.deploy runs policies with onnxruntime: pip install robotrl[deploy]") from exc
        self.spec: dict[str, Any] = load_spec(spec_path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(self.spec["onnx_path"], options, providers=["CPUExecutionProvider"])
        self._input = self.spec.get("input", "obs")
        shape = self._session.get_inputs()[0].shape
        if shape[-1] != self.spec["obs_dim"]:
            raise ValueError(f"{self.spec['onnx_path']} takes {shape[-1]} observations, its spec says "
                             f"{self.spec['obs_dim']}; re-export the policy.")

        self(np.zeros(self.spec["obs_dim"], dtype=np.float32))  # the first run is slow: not in the loop

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Run one observation ``(P,)`` (or a batch ``(B, P)``)."""
        x = np.asarray(obs, dtype=np.float32)
        batched = x.ndim == 2
        out = self._session.run(None, {self._input: x if batched else x[None]})[0]
        return out if batched else out[0]
