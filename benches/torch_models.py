"""Models nobody here wrote, from configs (no weights fetched), for ``bench_torch_plans.py``:
each factory seeds torch, so every gloo process builds the same module. ``CASES`` gives each
model's example inputs, loss and target (seeded too). Dropout is 0 (a training step on 8
processes must draw what one process draws); ``*_eval`` factories are for the forward."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def encoder() -> Any:
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def resnet18() -> Any:
    import torch
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10)


def gpt2() -> Any:
    # Eager attention and untied embeddings: the pinned torch 2.15 exports neither SDPA
    # attention of transformers 5.24 nor a tied weight's gradient (docs/torch.md).
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2,
        n_head=4,
        n_embd=64,
        vocab_size=128,
        n_positions=32,
        use_cache=False,
        attn_implementation="eager",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=False,
    )
    return transformers.GPT2LMHeadModel(config)


def bert() -> Any:
    # BERT's default attention (SDPA); the DTensor runs take its math kernel (shardwise.torch.gloo).
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        num_hidden_layers=2,
        num_attention_heads=4,
        hidden_size=64,
        intermediate_size=128,
        vocab_size=128,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return transformers.BertModel(config)


def mlp() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))


def encoder_eval() -> Any:
    return encoder().eval()


def resnet18_eval() -> Any:
    return resnet18().eval()


def gpt2_eval() -> Any:
    return gpt2().eval()


def bert_eval() -> Any:
    return bert().eval()


def mlp_eval() -> Any:
    return mlp().eval()


def mse(output: Any, target: Any) -> Any:
    return ((output - target) ** 2).mean()


def classes(output: Any, target: Any) -> Any:
    import torch

    return torch.nn.functional.cross_entropy(output, target)


def next_token(output: Any, target: Any) -> Any:
    import torch

    return torch.nn.functional.cross_entropy(output.logits.reshape(-1, 128), target.reshape(-1))


def pooled(output: Any, target: Any) -> Any:
    return output.last_hidden_state.mean() + output.pooler_output.mean()


@dataclass(frozen=True)
class Case:
    """A model (``CASES``' key names its factory): forward's inputs by name, the loss's name
    in this module, its target, and the user's placements (``in_placements``; the rest is
    ``auto_shard``'s)."""

    inputs: dict[str, np.ndarray]
    loss: str
    target: np.ndarray
    placements: dict[str, tuple[tuple[Any, ...], ...]] = field(default_factory=dict)


def _cases() -> dict[str, Case]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 128, (2, 16))
    return {
        "mlp": Case(
            {"input": rng.standard_normal((8, 64), np.float32)}, "mse", rng.standard_normal((8, 64), np.float32)
        ),
        "encoder": Case(
            {"src": rng.standard_normal((2, 8, 32), np.float32)}, "mse", rng.standard_normal((2, 8, 32), np.float32)
        ),
        # 32 images of 64x64: the activations weigh enough against the 44.7 MB of weights for a
        # plan that splits the batch to fit under a budget the replicated plan does not fit.
        # The batch placed over data by the user: DTensor's convolution splits only the batch
        # (and its weight stays replicated), and DTensor takes only the arguments' placements
        # from a plan, so a plan that keeps the images replicated and splits the activations
        # inside (as auto_shard may: slicing costs nothing) would run replicated in DTensor.
        "resnet18": Case(
            {"x": rng.standard_normal((32, 3, 64, 64), np.float32)},
            "classes",
            rng.integers(0, 10, (32,)),
            {"x": (("shard", 0), ("replicate",))},
        ),
        "gpt2": Case({"input_ids": ids}, "next_token", ids),
        "bert": Case({"input_ids": ids}, "pooled", ids),
    }


CASES = _cases()
