"""Every registered PRM convention on a tiny model of its published architecture: the text it writes,
the tokens it reads, and scores equal to the published recipe computed by hand from the raw model
outputs; batched equals one at a time; ORM; checkpoints that plain ``transformers`` loads."""

from __future__ import annotations

import json

import pytest

from prmkit.models import CONVENTIONS, QWEN_PRM_SYSTEM, Convention, RewardModel
from prmkit.trace import Problem, Step, Trace

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def trace(id, problem, *steps):
    return Trace(id=id, problem=Problem(problem), steps=[Step(s) for s in steps])


T = trace("a", "What is 2 + 3?", "2 + 3 = 5.", "The answer is 5.")
TRACES = [
    T,
    trace("b", "Tom has 3 apples and buys 4 more. How many?", "3 + 4 = 7", "So he has 7 apples.",
          "The answer is 7."),
    trace("c", "12 - 4?", "12 - 4 = 8"),
]

#: Convention -> the tiny model (conftest.TINY) it runs on; ``trl`` is TRL's PRMTrainer on a Qwen2
#: token classifier, as in TRL's own example.
MODEL_OF = {"qwen2.5-math-prm": "qwen2.5-math-prm", "skywork-prm": "skywork-prm",
            "math-shepherd": "math-shepherd", "rlhflow": "rlhflow", "prmkit": "prmkit",
            "trl": "qwen2.5-math-prm"}


def test_every_convention_is_covered():
    assert set(MODEL_OF) == set(CONVENTIONS)


def forward(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def scores(rm, t=T):
    return rm.score([t])[0]


# -- each published recipe, by hand ------------------------------------------------------------------
def test_qwen_math_prm(tiny_model):
    model, tok = tiny_model("qwen2.5-math-prm")
    rm = RewardModel(model, tok, convention="qwen2.5-math-prm")
    text = rm.render(T).text
    assert text == (f"<|im_start|>system\n{QWEN_PRM_SYSTEM}<|im_end|>\n"
                    "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n"
                    "<|im_start|>assistant\n2 + 3 = 5.<extra_0>The answer is 5.<extra_0><|im_end|>\n")
    # The model card: encode the conversation, read softmax(logits)[:, 1] wherever the id is <extra_0>.
    ids = tok.encode(text)
    sep = tok.encode("<extra_0>")[0]
    at = [i for i, x in enumerate(ids) if x == sep]
    assert len(at) == 2 and rm.encode(T).positions == at
    expect = torch.softmax(forward(model, ids)[at], -1)[:, 1]
    assert scores(rm) == pytest.approx(expect.tolist(), abs=1e-5)


def test_math_shepherd(tiny_model):
    model, tok = tiny_model("math-shepherd")
    rm = RewardModel(model, tok, convention="math-shepherd")
    text = rm.render(T).text
    assert text == "What is 2 + 3? 2 + 3 = 5. ки\nThe answer is 5. ки"
    # The model card: candidate_tokens = encode("+ -")[1:], positions where the id is encode("ки")[-1],
    # score = softmax over the two candidates' logits, the '+' one.
    good, bad = tok.encode("+ -")[1:]
    tag = tok.encode("ки")[-1]
    assert rm.verdict_ids == (bad, good)
    ids = tok.encode(text)
    assert ids[0] == tok.bos_token_id
    at = [i for i, x in enumerate(ids) if x == tag]
    assert len(at) == 2 and rm.encode(T).positions == at
    expect = torch.softmax(forward(model, ids)[at][:, [good, bad]], -1)[:, 0]
    assert scores(rm) == pytest.approx(expect.tolist(), abs=1e-5)


def test_rlhflow(tiny_model):
    model, tok = tiny_model("rlhflow")
    rm = RewardModel(model, tok, convention="rlhflow")
    head = "<|start_header_id|>{}<|end_header_id|>\n\n"
    text = rm.render(T).text
    assert text == ("<|begin_of_text|>"
                    + head.format("user") + "What is 2 + 3? 2 + 3 = 5.<|eot_id|>"
                    + head.format("assistant") + "+<|eot_id|>"
                    + head.format("user") + "The answer is 5.<|eot_id|>"
                    + head.format("assistant") + "+<|eot_id|>")
    plus, minus = tok.encode("+")[-1], tok.encode("-")[-1]
    assert rm.verdict_ids == (minus, plus)
    e = rm.encode(T)
    assert [e.input_ids[p + 1] for p in e.positions] == [plus, plus]
    # RLHFlow's script: one conversation per step prefix, logits[-3] (the token before the last '+',
    # then <|eot_id|>), softmax over ['+', '-'], the '+' one.
    conv, expect = [], []
    for k, step in enumerate(["2 + 3 = 5.", "The answer is 5."]):
        conv += [{"role": "user", "content": f"What is 2 + 3? {step}" if k == 0 else step},
                 {"role": "assistant", "content": "+"}]
        ids = tok(tok.apply_chat_template(conv, tokenize=False), add_special_tokens=False)["input_ids"]
        assert ids[-2] == plus and len(ids) - 3 == e.positions[k]
        expect.append(torch.softmax(forward(model, ids)[-3, [plus, minus]], -1)[0].item())
    assert scores(rm) == pytest.approx(expect, abs=1e-5)


def test_rlhflow_template_that_trims(tiny_model):
    # Llama 3's template trims every message: steps with spaces around them render, and score, exactly
    # like the stripped steps (as in RLHFlow's own script), instead of failing to place their labels.
    model, tok = tiny_model("rlhflow")
    rm = RewardModel(model, tok, convention="rlhflow")
    padded = trace("p", "What is 2 + 3?", "2 + 3 = 5.  ", "  The answer is 5.")
    assert rm.render(padded).text == rm.render(T).text
    assert rm.encode(padded).positions == rm.encode(T).positions
    assert scores(rm, padded) == pytest.approx(scores(rm), abs=1e-6)


def test_skywork_prm(tiny_model):
    model, tok = tiny_model("skywork-prm")
    rm = RewardModel(model, tok, convention="skywork-prm")
    assert rm.render(T).text == "<|endoftext|>What is 2 + 3?\n2 + 3 = 5.\nThe answer is 5.\n"
    # Skywork's prepare_input: encode(bos + problem + "\n"), then each step encoded on its own followed
    # by the id of "\n", flagged on that id; score = sigmoid of the one-output head.
    nl = tok.encode("\n")[-1]
    ids = tok.encode(tok.bos_token + "What is 2 + 3?\n")
    at = []
    for step in ["2 + 3 = 5.", "The answer is 5."]:
        ids += tok.encode(step) + [nl]
        at.append(len(ids) - 1)
    e = rm.encode(T)
    assert e.input_ids == ids and e.positions == at
    # Tokenising the whole text would merge each step's "." with its newline (Qwen's ".\n" token).
    assert tok.encode(rm.render(T).text) != ids and tok.convert_tokens_to_ids(".Ċ") in tok.encode(".\n")
    expect = torch.sigmoid(forward(model, ids)[at, 0])
    assert scores(rm) == pytest.approx(expect.tolist(), abs=1e-5)


def test_trl(tiny_model):
    model, tok = tiny_model("qwen2.5-math-prm")
    rm = RewardModel(model, tok, convention="trl")
    assert rm.render(T).text == "What is 2 + 3?2 + 3 = 5.\nThe answer is 5.\n"
    # TRL's tokenize_row: prompt and each completion tokenised alone, each followed by the separator's
    # ids, the label on the separator's last token; BOS first where the tokenizer has one (Qwen: none).
    assert tok.bos_token_id is None
    sep = tok.encode("\n", add_special_tokens=False)
    ids = tok("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    at = []
    for step in ["2 + 3 = 5.", "The answer is 5."]:
        ids += tok(step, add_special_tokens=False)["input_ids"] + sep
        at.append(len(ids) - 1)
    e = rm.encode(T)
    assert e.input_ids == ids and e.positions == at
    assert tok.encode(rm.render(T).text) != ids  # whole-text tokenisation would merge ".\n"
    expect = torch.softmax(forward(model, ids)[at], -1)[:, 1]
    assert scores(rm) == pytest.approx(expect.tolist(), abs=1e-5)


def test_prmkit_on_an_encoder(tiny_model):
    model, tok = tiny_model("prmkit")
    rm = RewardModel(model, tok, convention="prmkit")
    t = trace("e", "What is 2 + 3?", "2 + 3 = 5", "The answer is 5")
    assert rm.render(t).text == "What is 2 + 3?\n2 + 3 = 5\nThe answer is 5\n"
    e = rm.encode(t)
    # WordPiece drops the newlines: each step is read at its own last token, inside [CLS] ... [SEP].
    assert tok.convert_ids_to_tokens(e.input_ids) == [
        "[CLS]", "what", "is", "2", "+", "3", "?", "2", "+", "3", "=", "5", "the", "answer", "is", "5",
        "[SEP]"]
    assert e.positions == [11, 15]
    expect = torch.softmax(forward(model, e.input_ids)[[11, 15]], -1)[:, 1]
    assert scores(rm, t) == pytest.approx(expect.tolist(), abs=1e-5)


# -- invariants over every convention --------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(MODEL_OF))
def test_batched_equals_one_at_a_time(tiny_model, name):
    rm = RewardModel(*tiny_model(MODEL_OF[name]), convention=name)
    together = rm.score(TRACES, batch_size=8)
    pairs = rm.score(TRACES, batch_size=2)
    for t, a, b in zip(TRACES, together, pairs, strict=True):
        alone = rm.score([t])[0]
        assert len(alone) == len(t.steps)
        assert a == pytest.approx(alone, abs=1e-5) and b == pytest.approx(alone, abs=1e-5)
        assert all(0 < p < 1 for p in alone)


@pytest.mark.parametrize("name", sorted(MODEL_OF))
def test_orm_reads_the_last_step(tiny_model, name):
    model, tok = tiny_model(MODEL_OF[name])
    prm = RewardModel(model, tok, convention=name).score(TRACES)
    orm = RewardModel(model, tok, convention=name, kind="orm")
    assert [orm.encode(t).positions for t in TRACES] == [
        RewardModel(model, tok, convention=name).encode(t).positions[-1:] for t in TRACES]
    out = orm.score(TRACES)
    assert [len(s) for s in out] == [1, 1, 1]
    assert [s[0] for s in out] == pytest.approx([s[-1] for s in prm], abs=1e-5)


@pytest.mark.parametrize("name", sorted(MODEL_OF))
def test_saved_checkpoint_loads_in_plain_transformers(tiny_model, tmp_path, name):
    model, tok = tiny_model(MODEL_OF[name])
    rm = RewardModel(model, tok, convention=name)
    rm.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "prmkit_rm.json").read_text())
    assert Convention.from_dict(saved["convention"]) == CONVENTIONS[name] and saved["kind"] == "prm"
    auto = (transformers.AutoModelForCausalLM if CONVENTIONS[name].head == "lm_token"
            else transformers.AutoModelForTokenClassification)
    again = auto.from_pretrained(tmp_path).eval()
    tok2 = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ids = rm.encode(TRACES[1]).input_ids
    assert RewardModel(again, tok2, convention=name).encode(TRACES[1]).input_ids == ids
    assert torch.equal(forward(again, ids), forward(model, ids))
    # And prmkit's own loader gives the same scores.
    loaded = RewardModel.from_pretrained(str(tmp_path), device="cpu", dtype="float32")
    assert loaded.convention == CONVENTIONS[name]
    for a, b in zip(loaded.score(TRACES), rm.score(TRACES), strict=True):
        assert a == pytest.approx(b, abs=1e-6)


@pytest.mark.parametrize("name", sorted(n for n in MODEL_OF if n != "prmkit"))
def test_max_length_drops_trailing_steps_of_a_decoder(tiny_model, name):
    # Cut just before the last step's label position (and its verdict token): that step scores None,
    # and a decoder's scores of the kept steps do not change.
    model, tok = tiny_model(MODEL_OF[name])
    full = RewardModel(model, tok, convention=name)
    t = TRACES[1]
    e = full.encode(t)
    cut = RewardModel(model, tok, convention=name, max_length=e.positions[-1], long="truncate")
    assert cut.encode(t).positions == e.positions[:-1]
    got, want = cut.score([t])[0], full.score([t])[0]
    assert got[-1] is None and got[:-1] == pytest.approx(want[:-1], abs=1e-5)
