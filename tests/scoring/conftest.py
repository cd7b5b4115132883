"""Tiny seeded reward models for every decoder convention (and one encoder), built in memory.

The tokenizer builders are copied from ``tests/models/conftest.py`` (pytest's importlib mode does not
let one conftest import another): byte-level BPE with Qwen's pre-tokenizer (``qwen2.5-math-prm``,
``skywork-prm``), Llama-3 style BPE with its chat template (``rlhflow``), SentencePiece-style BPE
(``math-shepherd``), WordPiece (the BERT encoder) and prmkit's character tokenizer (``prmkit`` on a
Llama token classifier, where one character is one token, so token counts can be derived by hand).

Weights are drawn wide (``initializer_range=0.3``, heads 0.2) so that step probabilities spread over
(0, 1): with the default init they cluster within 0.01 of each other and a 1e-4 comparison would
prove little.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tiny_tokenizers import (  # noqa: E402
    SEED,
    llama3_tokenizer,
    qwen_tokenizer,
    sentencepiece_tokenizer,
    wordpiece_tokenizer,
)

from prmkit.models import RewardModel, build_char_tokenizer  # noqa: E402
from prmkit.trace import Problem, Step, Trace  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """The models are tiny: one thread is fastest, and several fight over a shared machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# -- tiny models --------------------------------------------------------------------------------------
def _small(**kw):
    return dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=512, initializer_range=0.3, **kw)


#: Decoder conventions under test -> head kind.
DECODERS = {"qwen2.5-math-prm": "classifier", "skywork-prm": "classifier", "prmkit": "classifier",
            "math-shepherd": "lm_token", "rlhflow": "lm_token"}


def build(name: str, *, sliding_window: int | None = None):
    """(model, tokenizer) of a tiny stand-in for convention ``name`` (``bert``: an encoder)."""
    T = transformers
    if name in ("qwen2.5-math-prm", "skywork-prm"):
        tok = qwen_tokenizer()
        if name == "skywork-prm":
            tok.bos_token = "<|endoftext|>"
        cfg = T.Qwen2Config(vocab_size=len(tok), num_key_value_heads=2, pad_token_id=tok.pad_token_id,
                            num_labels=2 if name == "qwen2.5-math-prm" else 1, **_small())
        return T.Qwen2ForTokenClassification(cfg), tok
    if name == "math-shepherd":
        tok = sentencepiece_tokenizer()
        cfg = T.MistralConfig(vocab_size=len(tok), num_key_value_heads=2, bos_token_id=tok.bos_token_id,
                              eos_token_id=tok.eos_token_id, tie_word_embeddings=False,
                              sliding_window=sliding_window or 4096, **_small())
        return T.MistralForCausalLM(cfg), tok
    if name == "rlhflow":
        tok = llama3_tokenizer()
        cfg = T.LlamaConfig(vocab_size=len(tok), num_key_value_heads=2, bos_token_id=tok.bos_token_id,
                            eos_token_id=tok.eos_token_id, tie_word_embeddings=False, **_small())
        return T.LlamaForCausalLM(cfg), tok
    if name == "prmkit":  # a decoder classifier with one token per character
        tok = build_char_tokenizer()
        cfg = T.LlamaConfig(vocab_size=len(tok), num_key_value_heads=2, pad_token_id=tok.pad_token_id,
                            num_labels=2, **_small())
        return T.LlamaForTokenClassification(cfg), tok
    if name == "bert":
        tok = wordpiece_tokenizer()
        cfg = T.BertConfig(vocab_size=len(tok), num_labels=2, pad_token_id=tok.pad_token_id, **_small())
        return T.BertForTokenClassification(cfg), tok
    raise KeyError(name)


def _spread_head(model) -> None:
    head = getattr(model, "score", None) or getattr(model, "classifier", None) or model.get_output_embeddings()
    with torch.no_grad():
        head.weight.normal_(0.0, 0.2)


@pytest.fixture(scope="session")
def make_rm():
    """``make_rm(name, kind="prm", max_length=None, long="window")`` -> a :class:`RewardModel` on a tiny
    seeded model (built once per name and reused; tests must not change the weights)."""
    built: dict = {}

    def make(name: str, *, kind: str = "prm", max_length: int | None = None, sliding_window=None,
             long: str = "window"):
        key = (name, sliding_window)
        if key not in built:
            torch.manual_seed(SEED)
            model, tok = build(name, sliding_window=sliding_window)
            _spread_head(model)
            built[key] = (model.eval(), tok)
        model, tok = built[key]
        conv = "prmkit" if name == "bert" else name
        return RewardModel(model, tok, convention=conv, kind=kind, max_length=max_length, name=f"tiny-{name}",
                           long=long)

    return make


# -- traces -------------------------------------------------------------------------------------------
def trace(tid: str, problem: str, steps: list[str]) -> Trace:
    return Trace(id=tid, problem=Problem(problem), steps=[Step(s) for s in steps])


PROBLEMS = ["Tom has 3 apples and buys 5 more. How many apples does he have?",
            "What is 12 + 30? Let us add the tens first."]

STEPS = [
    ["3 + 5 = 8.", "The answer is 8."],
    ["3 + 5 = 8.", "So Tom has 8 apples.", "The answer is 8."],
    ["3 + 5 = 9.", "The answer is 9."],
    ["Step 1: 3 + 5 = 8", "Step 2: 8 - 0 = 8", "The answer is 8."],
    ["Step 1: 3 + 5 = 7", "The answer is 7."],
    ["3 + 5 = 8."],
]


@pytest.fixture()
def mixed_traces() -> list[Trace]:
    """Candidates of two problems: different lengths, shared whole problems, shared first steps,
    candidates diverging inside a step, a trace that is a prefix of another, and an exact duplicate."""
    out = []
    for p, problem in enumerate(PROBLEMS):
        for i, steps in enumerate(STEPS):
            out.append(trace(f"p{p}-{i}", problem, steps))
    out.append(trace("dup", PROBLEMS[0], STEPS[1]))
    out.append(trace("lone", "Sam has 2 eggs.", ["2 * 2 = 4.", "The answer is 4."]))
    return out


@pytest.fixture()
def make_trace():
    """``make_trace(id, problem, steps)`` -> a :class:`Trace`."""
    return trace
