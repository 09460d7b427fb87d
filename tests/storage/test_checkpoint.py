import json

import pytest
import torch

from robotrl.policies.io import load_policy
from robotrl.policies.mlp import ActorCritic, PolicyConfig
from robotrl.storage.checkpoint import (
    load_checkpoint,
    load_meta,
    optimizer_tensors,
    prefixed,
    resolve,
    restore_optimizer,
    save_checkpoint,
)


def _meta(policy):
    return {"policy": {"obs_dim": 4, "critic_dim": 4, "action_dim": 2,
                       "config": {"actor_hidden": [8], "critic_hidden": [8], "activation": "elu",
                                  "init_std": 0.5, "distribution": "gaussian", "normalize_obs": True}},
            "task": {"name": "humanoid", "config": {}}, "env_steps": 7}


def test_round_trip_policy_and_optimizer(tmp_path):
    policy = ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[8], critic_hidden=[8], init_std=0.5))
    policy.obs_norm.update(torch.randn(100, 4) * 3 + 1)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    policy.act(torch.randn(5, 4))[1].sum().backward()
    opt.step()
    optim_t, optim_meta = optimizer_tensors(opt)
    save_checkpoint(tmp_path, 3, {**prefixed(policy.state_dict(), "policy"), **prefixed(optim_t, "optim")},
                    {**_meta(policy), "optim": optim_meta})
    loaded, meta = load_policy(tmp_path)
    obs = torch.randn(10, 4)
    assert torch.equal(loaded.act_inference(obs), policy.act_inference(obs))
    assert meta["iteration"] == 3 and meta["env_steps"] == 7
    tensors, meta = load_checkpoint(tmp_path / "ckpt_000003.safetensors")
    opt2 = torch.optim.Adam(ActorCritic(4, 4, 2, PolicyConfig(actor_hidden=[8], critic_hidden=[8])).parameters())
    restore_optimizer(opt2, {k[6:]: v for k, v in tensors.items() if k.startswith("optim.")}, meta["optim"])
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])


def test_latest_pointer_and_retention(tmp_path):
    for it in range(1, 8):
        save_checkpoint(tmp_path, it, {"x": torch.tensor([float(it)])}, {}, keep=3)
    assert resolve(tmp_path).name == "ckpt_000007.safetensors"
    assert len(list(tmp_path.glob("ckpt_*.safetensors"))) == 3
    assert not list(tmp_path.glob(".*tmp"))
    assert json.loads((tmp_path / "latest.json").read_text()) == {"name": "ckpt_000007"}


def test_keep_zero_retains_every_checkpoint_and_negative_keep_is_an_error(tmp_path):
    for it in range(1, 8):
        save_checkpoint(tmp_path, it, {"x": torch.tensor([float(it)])}, {}, keep=0)
    assert len(list(tmp_path.glob("ckpt_*.safetensors"))) == 7
    with pytest.raises(ValueError, match="keep must be >= 0"):
        save_checkpoint(tmp_path, 8, {"x": torch.tensor([8.0])}, {}, keep=-1)
    assert len(list(tmp_path.glob("ckpt_*.safetensors"))) == 7  # nothing written or deleted


def test_loading_never_unpickles(tmp_path):
    # A pickle disguised as a checkpoint is rejected by safetensors, not executed.
    import pickle

    class Boom:
        def __reduce__(self):
            return (exec, ("open('/tmp/robotrl_pwned','w').write('x')",))

    (tmp_path / "ckpt_000001.safetensors").write_bytes(pickle.dumps(Boom()))
    (tmp_path / "ckpt_000001.json").write_text("{}")
    from safetensors import SafetensorError

    with pytest.raises(SafetensorError):
        load_checkpoint(tmp_path / "ckpt_000001.safetensors")
    import os
    assert not os.path.exists("/tmp/robotrl_pwned")


def test_missing_checkpoint_names_what_it_expected(tmp_path):
    with pytest.raises(FileNotFoundError, match="run directory"):
        resolve(tmp_path / "nope")


def test_load_meta_reads_the_metadata_alone_and_names_a_missing_file(tmp_path):
    path = save_checkpoint(tmp_path, 3, {"x": torch.tensor([1.0])}, {"elapsed_s": 12.5}, keep=0)
    meta = load_meta(tmp_path)  # the run's checkpoints dir, resolved through latest.json
    assert meta["elapsed_s"] == 12.5 and meta["iteration"] == 3
    assert load_meta(path) == load_checkpoint(path)[1]
    path.with_suffix(".json").unlink()
    with pytest.raises(FileNotFoundError, match="no metadata file ckpt_000003.json"):
        load_meta(path)
