"""Dense step rewards land on the policy token that covers each step's last character, for a
character tokenizer and a byte-level BPE (policy), whatever the PRM's tokenizer.

The text and where its steps end::

    3 + 5 = 8.\\nThe answer is 8.
    0123456789 0123456789012345 6
              ^ step 0 ends at char 9        ^ step 1 ends at char 26

BPE tokens (offsets): '3' (0,1), ' +' (1,3), ' 5' (3,5), ' =' (5,7), ' 8' (7,9), '.' (9,10),
'\\n' (10,11), 'The' (11,14), ' answer' (14,21), ' is' (21,24), ' 8' (24,26), '.' (26,27).
"""

from __future__ import annotations

import pytest

from prmkit.data import get_splitter
from prmkit.errors import PrmkitError
from prmkit.rl import DenseStepReward, place_step_rewards, token_char_ends
from prmkit.search import ScriptedScorer

TEXT = "3 + 5 = 8.\nThe answer is 8."
STEPS = get_splitter("newline").split(TEXT)
SCORES = {"3 + 5 = 8.": 0.75, "The answer is 8.": 0.5}


def test_character_tokenizer_one_token_per_character(char_tokenizer):
    d = place_step_rewards(TEXT, STEPS, [0.75, 0.5], char_tokenizer)
    assert len(d.rewards) == 27 and d.positions == [9, 26]
    assert [(k, r) for k, r in enumerate(d.rewards) if r] == [(9, 0.75), (26, 0.5)]


def test_bpe_tokenizer(bpe_tokenizer):
    d = place_step_rewards(TEXT, STEPS, [0.75, 0.5], bpe_tokenizer)
    assert len(d.rewards) == 12 and d.positions == [5, 11]
    assert [bpe_tokenizer.decode([d.token_ids[k]]) for k in d.positions] == [".", "."]
    assert d.rewards == [0, 0, 0, 0, 0, 0.75, 0, 0, 0, 0, 0, 0.5]


def test_a_step_ending_inside_a_token(bpe_tokenizer):
    # steps "3 + 5" (chars 0-4) and "The answer" (11-20) end inside ' 5' (3,5) and ' answer' (14,21)
    from prmkit.trace import Step

    steps = [Step("3 + 5", span=(0, 5)), Step("The answer", span=(11, 21))]
    d = place_step_rewards(TEXT, steps, [1.0, None], bpe_tokenizer)
    assert d.positions == [2, 8] and d.rewards[2] == 1.0 and sum(d.rewards) == 1.0  # None adds nothing


def test_generated_ids_are_followed_not_retokenized(bpe_tokenizer):
    # the policy wrote the text one byte-level token per character, not as the tokenizer would
    ids = [i for ch in TEXT for i in bpe_tokenizer(ch, add_special_tokens=False)["input_ids"]]
    ids.append(bpe_tokenizer.eos_token_id)  # the end-of-sequence token decodes to nothing
    d = place_step_rewards(TEXT, STEPS, [0.75, 0.5], bpe_tokenizer, token_ids=ids)
    assert len(d.rewards) == 28 and d.positions == [9, 26] and d.rewards[27] == 0.0
    assert token_char_ends(bpe_tokenizer, ids)[:3] == [1, 2, 3]
    with pytest.raises(PrmkitError, match="do not decode"):
        place_step_rewards(TEXT + "!", STEPS, [0.75, 0.5], bpe_tokenizer, token_ids=ids)


def test_dense_reward_function_for_both_tokenizers(char_tokenizer, bpe_tokenizer):
    scorer = ScriptedScorer(SCORES)
    comps = [TEXT, "   "]
    by_char = DenseStepReward(scorer, char_tokenizer)(["3 + 5?"] * 2, comps)
    by_bpe = DenseStepReward(scorer, bpe_tokenizer, shift=-0.5)(["3 + 5?"] * 2, comps)
    assert by_char[1] is None and by_bpe[1] is None
    assert [(k, r) for k, r in enumerate(by_char[0]) if r] == [(9, 0.75), (26, 0.5)]
    assert [(k, r) for k, r in enumerate(by_bpe[0]) if r] == [(5, 0.25)]  # 0.5 - 0.5 = 0 at token 11
    ids = bpe_tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    with_ids = DenseStepReward(scorer, bpe_tokenizer)(["q"], [TEXT], completion_ids=[ids])
    assert [(k, r) for k, r in enumerate(with_ids[0]) if r] == [(5, 0.75), (11, 0.5)]


def test_a_real_prm_with_another_tokenizer(tiny_prm, bpe_tokenizer):
    # PRM: character tokenizer; policy: BPE. Zeroed head: every step scores 0.5.
    out = DenseStepReward(tiny_prm, bpe_tokenizer)(["What is 3 + 5?"], [TEXT])
    assert [(k, r) for k, r in enumerate(out[0]) if r] == [(5, 0.5), (11, 0.5)]


def test_an_orm_cannot_give_step_rewards():
    with pytest.raises(PrmkitError, match="need a PRM"):
        DenseStepReward(ScriptedScorer({}, kind="orm"), None)
