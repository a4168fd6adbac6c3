"""``shardwise.from_torch`` (issue 29, first part): PyTorch modules nobody here wrote
(``torch.nn`` layers), captured by ``torch.export`` and translated to StableHLO. The translated
program computes what the module computes (our interpreter against torch, float32), its
arguments carry the parameters' fully qualified names, DTensor placements become user
shardings, propagation from them equals jaxlib's Shardy on the translated text, and what cannot
be translated is refused in one line naming the op and the module it came from."""

from __future__ import annotations

import numpy as np
import pytest
import shardwise as sw
from shardwise.errors import ProgramError
from shardwise.execute.interpreter import run
from shardwise.importers.pytorch import supported_ops, torch_arguments

torch = pytest.importorskip("torch")
nn = torch.nn


def _encoder(**kw: object) -> object:
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, **kw)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


class _Heads(nn.Module):  # type: ignore[misc]
    # Every elementwise family, compares, where, reductions and log-softmax in one forward.
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 12)
        self.norm = nn.LayerNorm(12)

    def forward(self, x: object) -> object:
        h = self.norm(nn.functional.gelu(self.proj(x), approximate="tanh"))
        g = torch.where(h > 0.1, torch.sigmoid(h) * 2.0 - 1.0, torch.exp(-h.abs()) / 3.0)
        s = nn.functional.silu(g).sum(dim=-1, keepdim=True) + h.mean(dim=0) - h.amax(dim=-1, keepdim=True)
        return torch.log_softmax(s + torch.rsqrt(h * h + 1.0), dim=-1), torch.cat([h, g], dim=1)[:, 3:20:2]


# (name, module, example inputs): an MLP, post-norm ReLU and pre-norm GELU encoders (attention
# with its head reshapes, batched products, softmax, layer norm), and _Heads.
CASES = [
    ("mlp", lambda: nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval(), (4, 16)),
    ("encoder", lambda: _encoder(), (2, 8, 32)),
    ("encoder-gelu-pre-norm", lambda: _encoder(activation="gelu", norm_first=True), (2, 8, 32)),
    ("heads", lambda: _Heads().eval(), (5, 16)),
]


@pytest.mark.parametrize("name,make,shape", CASES, ids=[c[0] for c in CASES])
def test_the_translated_program_computes_what_the_module_computes(
    name: str, make: object, shape: tuple[int, ...]
) -> None:
    torch.manual_seed(0)
    module = make()  # type: ignore[operator]
    x = torch.randn(*shape)
    program = sw.from_torch(module, (x,))
    got = run(program, torch_arguments(module, (x,)))
    want = module(x)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        # float32 both sides; only the order of the reductions' sums differs (layer norm and
        # softmax over 32 terms, two layers deep): a few ulps of values of order 1.
        np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_arguments_are_named_by_their_fully_qualified_names() -> None:
    module = _encoder()
    program = sw.from_torch(module, (torch.randn(2, 8, 32),))
    names = [a["jax.arg_info"].strip('"') for a in program.func().arg_attrs]
    assert names == [n for n, _ in module.named_parameters()] + ["src"]


def test_placements_become_user_shardings_and_propagation_equals_shardy() -> None:
    pytest.importorskip("jax")
    from jaxlib.mlir import passmanager
    from shardwise._jaxlib import context, ir
    from torch.distributed.tensor import Replicate, Shard

    module = _encoder()
    placements = {
        "src": (Shard(0), Replicate()),
        "layers.0.linear1.weight": (Replicate(), Shard(0)),
        "layers.1.linear2.weight": (("replicate",), ("shard", 1)),
    }
    program = sw.from_torch(module, (torch.randn(2, 8, 32),), mesh={"data": 2, "model": 4}, in_placements=placements)
    text = program.to_mlir()
    assert '{jax.arg_info = "src", sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}, {}]>}' in text
    with context():
        m = ir().Module.parse(text)
        assert str(m) == text  # printed as jaxlib prints it
        passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)").run(m.operation)
        shardy = str(m)
    assert sw.propagate(sw.load_mlir(text)).to_mlir() == shardy


def test_what_cannot_be_translated_is_refused_in_one_line() -> None:
    class Cumulative(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4))

        def forward(self, x: object) -> object:
            return torch.cumsum(self.inner(x), dim=0)

    assert "aten.cumsum.default" not in supported_ops()
    with pytest.raises(
        ProgramError, match=r"^from_torch: no translation for ATen op aten\.cumsum\.default \(FX node cumsum"
    ):
        sw.from_torch(Cumulative().eval(), (torch.randn(3, 4),))
    module = nn.Sequential(nn.Linear(4, 4)).eval()
    with pytest.raises(
        ProgramError, match=r"in_placements: no input named 'weight'; the inputs are 0\.weight, 0\.bias, input"
    ):
        sw.from_torch(module, (torch.randn(3, 4),), mesh={"x": 2}, in_placements={"weight": (("replicate",),)})
    with pytest.raises(ProgramError, match=r"in_placements: expected a mesh"):
        sw.from_torch(module, (torch.randn(3, 4),), in_placements={"input": (("replicate",),)})
    with pytest.raises(ProgramError, match=r"the program mutates .*running_mean.*module\.eval\(\)"):
        sw.from_torch(nn.BatchNorm1d(4).train(), (torch.randn(3, 4),))
