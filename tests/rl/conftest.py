"""Two policy tokenizers that split text differently (characters; a byte-level BPE trained on a few
lines, as in tests/policies), and a private prmkit cache for the ``tiny`` PRM backbone."""

from __future__ import annotations

import pytest

CORPUS = [
    "Tom has 3 apples and buys 5 more. 3 + 5 = 8. The answer is 8.",
    "She gives away 4: 12 - 4 = 8.\nThe answer is 8.",
    "Step 1: 2 * 3 = 6\nStep 2: 6 + 1 = 7\nThe answer is 7.",
] * 20


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def char_tokenizer():
    from prmkit.models import build_char_tokenizer

    return build_char_tokenizer()


@pytest.fixture(scope="session")
def bpe_tokenizer():
    transformers = pytest.importorskip("transformers")
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=320, min_frequency=1,
                            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, bos_token="<|im_start|>", eos_token="<|im_end|>",
        pad_token="<|endoftext|>", unk_token="<|endoftext|>")


@pytest.fixture(scope="session")
def tiny_prm(tmp_path_factory):
    """A PRM on the ``tiny`` backbone (character tokenizer) with a fresh, zeroed head: every step
    scores exactly 0.5. Built in a private cache, never the user's."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PRMKIT_CACHE", str(tmp_path_factory.mktemp("prmkit-cache")))
    from prmkit.models import RewardModel

    yield RewardModel.from_backbone("tiny", head_init="zero")
    mp.undo()
