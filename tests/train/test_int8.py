"""int8 training products (``precision=int8``): exact where the quantization is exact, close to float32
elsewhere, rows independent of their batch, float32 without gradients, the layers restored after the
context, and a run that cannot use them falling back to fp32 and saying so. (A run in int8 against one
in fp32: tests/train/test_precision.py.)"""

from __future__ import annotations

import pytest
import torch

from prmkit.policies import int8_problem
from prmkit.train import load_config, train
from prmkit.train._int8 import _function, _grad_input, int8_products

NO_INT8 = int8_problem(torch.device("cpu"))
needs_int8 = pytest.mark.skipif(NO_INT8 is not None, reason=f"no int8 products here: {NO_INT8}")


def test_int8_problem_names_the_device():
    assert int8_problem("cuda:0") == "int8 products are implemented for CPUs only, not 'cuda' devices"


@needs_int8
def test_a_product_is_exact_where_quantizing_is():
    # Every row's largest magnitude is 127 and every value an integer: the scales are 1, the int8
    # values the inputs themselves, so the product is the exact integer product.
    a = torch.tensor([[127.0, -3.0, 5.0], [1.0, -127.0, 0.0]])
    b = torch.tensor([[2.0, 127.0, -1.0], [127.0, 0.0, 127.0], [-127.0, 4.0, 9.0]])
    assert torch.equal(_grad_input(a, b.T), a @ b.T)
    # Scaling a row scales its output exactly by a power of two.
    assert torch.equal(_grad_input(a * 0.5, b.T), (a @ b.T) * 0.5)
    # A zero row stays zero (its scale is clamped, not divided by).
    assert torch.equal(_grad_input(torch.zeros(1, 3), b.T), torch.zeros(1, 3))


@needs_int8
def test_products_and_gradients_are_close_to_float32_and_rows_independent():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 40, 64, generator=g, requires_grad=True)
    w = torch.randn(48, 64, generator=g, requires_grad=True)
    bias = torch.randn(48, generator=g, requires_grad=True)
    dy = torch.randn(2, 40, 48, generator=g)
    y = _function().apply(x, w, bias, False)
    y.backward(dy)
    grads = [t.grad.clone() for t in (x, w, bias)]
    for t in (x, w, bias):
        t.grad = None
    ref = torch.nn.functional.linear(x, w, bias)
    ref.backward(dy)

    def rel(a, b):
        return float((a - b).detach().norm() / b.detach().norm())

    assert rel(y, ref) < 0.02
    assert rel(grads[0], x.grad) < 0.02 and rel(grads[1], w.grad) < 0.02
    assert torch.allclose(grads[2], bias.grad, atol=1e-5)  # the bias gradient is a plain sum
    # One scale per row (token): a row's output does not depend on the rows beside it.
    alone = _function().apply(x[1:2, 7:8], w, bias, False)
    assert torch.equal(alone[0, 0], y[1, 7])


@needs_int8
def test_the_context_switches_linear_layers_only_while_recording_gradients():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.SiLU(), torch.nn.Linear(64, 8))
    x = torch.randn(16, 32)
    plain = model(x)
    with int8_products(model, compiled=False) as n:
        assert n == 2
        with torch.no_grad():
            assert torch.equal(model(x), plain.detach())  # no gradients: float32, bit for bit
        y = model(x)
        assert not torch.equal(y, plain) and float((y - plain).abs().max()) < 0.05
        assert y.grad_fn is not None
    assert all("forward" not in vars(m) for m in model.modules())
    assert torch.equal(model(x), plain)
    with pytest.raises(RuntimeError, match="boom"), int8_products(model, compiled=False):
        raise RuntimeError("boom")
    assert all("forward" not in vars(m) for m in model.modules())
    with int8_products(model, enabled=False) as n:
        assert n == 0 and torch.equal(model(x), plain)


@needs_int8
@pytest.mark.slow
def test_compiled_products_equal_the_eager_ones():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(37, 64, generator=g)
    w = torch.randn(24, 64, generator=g)
    from prmkit.train._int8 import _product

    dy = torch.randn(37, 24, generator=g)
    for kind, a, b in (("forward", x, w), ("grad_input", dy, w), ("grad_weight", dy, x)):
        eager = _product(kind, a, b, False)
        compiled = _product(kind, a, b, True)
        # the same quantization up to the rounding of values at exactly .5 after inductor's division
        assert float((compiled - eager).abs().max()) <= 1e-3 * float(eager.abs().max()), kind


def test_int8_where_it_cannot_run_falls_back_to_fp32_and_says_so(marker_files, tmp_path, monkeypatch):
    from prmkit.train import _trainer

    monkeypatch.setattr(_trainer, "int8_problem", lambda device: "no int8 on this test CPU")
    logs: list[str] = []
    cfg = load_config("tiny", ["progress=false", "eval_fraction=0", "max_steps=1", f"train=[{marker_files['train']}]",
                               "precision=int8"], output_dir=str(tmp_path / "run"))
    result = train(cfg, log=logs.append)
    assert result.precision == {"requested": "int8", "used": "fp32", "note": "no int8 on this test CPU"}
    assert "precision: fp32 (int8 requested: no int8 on this test CPU)" in logs
    assert not any(s.startswith("int8 products") for s in logs)


def test_a_wrong_precision_lists_int8():
    from prmkit.train import ConfigError

    with pytest.raises(ConfigError, match="precision: must be auto, fp32, int8 or bf16, got 'fp16'"):
        load_config("tiny", ["precision=fp16", "train=[x.jsonl]"])


@needs_int8
def test_an_input_quantized_once_is_reused_only_while_unchanged():
    from prmkit.train._int8 import _MEMOS, _product

    g = torch.Generator().manual_seed(2)
    x = torch.randn(20, 16, generator=g)
    w1, w2 = torch.randn(8, 16, generator=g), torch.randn(4, 16, generator=g)
    first = _product("forward", x, w1, False)
    held = _MEMOS["rows"].val
    second = _product("forward", x.view(20, 16), w2, False)  # another view of the same tensor: reused
    assert _MEMOS["rows"].val is held
    assert torch.equal(second, _product("forward", x.clone(), w2, False))
    x.mul_(2)  # changed in place: quantized again, and the product follows
    assert torch.equal(_product("forward", x, w1, False), first * 2)
    assert _MEMOS["rows"].val is not held
