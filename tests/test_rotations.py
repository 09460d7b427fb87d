"""robotrl.rotations: the parts form of the quaternion rotation."""

import torch

from robotrl.rotations import quat_rotate_parts_wxyz, quat_rotate_wxyz, random_quat


def test_rotate_parts_gives_the_same_bits_as_rotate_and_fills_out():
    gen = torch.Generator().manual_seed(0)
    q = random_quat(64, gen, torch.device("cpu")).unsqueeze(1)  # (64, 1, 4), broadcast over two vectors
    v = torch.randn(64, 2, 3, generator=gen)
    out = torch.full((64, 2, 3), float("nan"))
    result = quat_rotate_parts_wxyz(q[..., :1], q[..., 1:], v, out=out)
    assert result.data_ptr() == out.data_ptr()
    assert torch.equal(out, quat_rotate_wxyz(q, v))
    assert torch.allclose(out.norm(dim=-1), v.norm(dim=-1), atol=1e-5)  # a rotation keeps lengths
