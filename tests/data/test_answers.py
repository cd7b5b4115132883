"""Answer extraction and equivalence: hand-derived cases for every extractor and both equality paths."""

from __future__ import annotations

import threading

import pytest

from prmkit.data._answers import (
    AUTO_ORDER,
    EXTRACTORS,
    answers_equal,
    extract_answer,
    extract_answer_is,
    extract_boxed,
    extract_gsm8k,
    extract_last_number,
    normalize_answer,
)
from prmkit.errors import PrmkitError

# -- extract_boxed -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    (r"so $x = \boxed{5}$.", "5"),
    (r"first \boxed{1} then \boxed{2}", "2"),
    (r"$\boxed{\frac{1}{2}}$", r"\frac{1}{2}"),
    (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)"),
    (r"\boxed {12}", "12"),
    (r"\fbox{A}", "A"),
    (r"so $\boxed 5$.", "5"),
    (r"so \boxed 5.", "5"),
    (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),                 # escaped braces do not unbalance it
    (r"\boxed{ \text{Evelyn} }", r"\text{Evelyn}"),    # stripped
    (r"\boxed{\boxed{7}}", "7"),                       # a box that is only a box is unwrapped
    (r"\boxed{2 + \boxed{3}}", r"2 + \boxed{3}"),      # a nested box belongs to its outer box
    (r"\boxed{1} \boxed{2} \boxed{3", None),           # the last box never closes: cut off
    (r"\boxed{}", None),
    (r"\boxedx{3}", None),                             # another macro
    ("no box here", None),
    ("", None),
])
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


# -- extract_gsm8k -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", "72"),
    ("#### 1,000", "1,000"),
    ("#### 5\n#### 6", "6"),
    ("####7", "7"),
    ("#### 42\nQuestion: next one", "42"),  # only the answer line
    ("no marker", None),
    ("####   \n", None),
])
def test_extract_gsm8k(text, expected):
    assert extract_gsm8k(text) == expected


# -- extract_answer_is ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("The answer is: 42", "42"),
    ("The answer is 42.", "42"),
    (r"Thus the final answer is $\boxed{3}$. I hope it is correct.", "3"),
    ("Final Answer: The final answer is $\\frac{1}{2}$. I hope it is correct.", r"\frac{1}{2}"),
    ("Answer: 12", "12"),
    ("**Answer:** 12", "12"),
    ("The answer is 3.14 exactly.", "3.14 exactly"),  # a decimal point does not end the sentence
    ("# Answer\n\n29", "29"),                          # PRM800K
    ("Some steps.\n\n# Answer\n\n\\frac{3}{4}\n", r"\frac{3}{4}"),
    ("Answer:\n7", "7"),
    ("the answer is 1. Wait, no: the answer is 2.", "2"),  # the last statement counts
    ("The answer is", None),
    ("We answer the question.", None),
])
def test_extract_answer_is(text, expected):
    assert extract_answer_is(text) == expected


# -- extract_last_number -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("She has 3 apples and 4 pears.", "4"),
    ("The total is 1,000.", "1000"),
    ("It is 1,234,567.89 dollars", "1234567.89"),
    ("The temperature is -5 degrees", "-5"),
    ("x = \u22127", "-7"),               # Unicode minus
    ("5-3 = 2", "2"),
    ("5-3", "3"),                        # subtraction, not a negative
    ("pi is about 3.14.", "3.14"),
    ("She ate 3/4 of it.", "3/4"),
    ("value .5", ".5"),
    ("1,2,3", "3"),                      # a list, not thousands
    ("12,3456", "3456"),
    ("no numbers", None),
])
def test_extract_last_number(text, expected):
    assert extract_last_number(text) == expected


# -- extract_answer ------------------------------------------------------------------------------------


def test_auto_tries_boxed_then_gsm8k_then_answer_is_then_last_number():
    assert AUTO_ORDER == ("boxed", "gsm8k", "answer_is", "last_number")
    both = "The answer is 3.\n#### 4\nso \\boxed{5} 6"
    assert extract_answer(both) == "5"
    assert extract_answer("The answer is 3.\n#### 4\n6") == "4"
    assert extract_answer("The answer is 3, not 4.\n6") == "3, not 4"
    assert extract_answer("we get 3 and 4") == "4"
    assert extract_answer("nothing") is None


def test_auto_skips_markdown_headings_that_look_like_gsm8k_lines():
    text = "#### Step one: add\n3 + 4 = 7\n#### Step two: done"
    assert extract_gsm8k(text) == "Step two: done"
    assert extract_answer(text) == "7"
    assert extract_answer("#### $1,200") == "$1,200"


def test_extract_answer_by_name():
    text = "The answer is 3.\n#### 4\nso \\boxed{5} 6"
    assert {m: extract_answer(text, m) for m in EXTRACTORS} == {
        "boxed": "5", "gsm8k": "4", "answer_is": "3", "last_number": "6"}


def test_unknown_extraction_method_lists_the_known_ones():
    with pytest.raises(PrmkitError, match="known: auto, boxed, gsm8k, answer_is, last_number"):
        extract_answer("x", "regex")


# -- normalize_answer ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "expected"), [
    ("$5$", "5"),
    (r"\(5\)", "5"),
    (r"\boxed{5}", "5"),
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})"),
    (r"\dfrac{14}{3}", r"\frac{14}{3}"),
    (r"\tfrac12", r"\frac12"),
    (r"90^\circ", "90"),
    (r"90^{\circ}", "90"),
    ("90°", "90"),
    (r"50\%", "50"),
    (r"12\text{ cm}", "12"),
    (r"12 \text{ square feet}", "12"),
    (r"\text{Evelyn}", "Evelyn"),
    (r"\text{(C)}", "(C)"),
    ("1,000", "1000"),
    ("10{,}000", "10000"),
    ("(1,000)", "(1,000)"),           # not a plain number: the comma may separate coordinates
    ("5.", "5"),
    (r"3\!\cdot\!4", r"3\cdot4"),
    (r"\rightarrow", r"\rightarrow"),  # only \left and \right themselves go
])
def test_normalize_answer(answer, expected):
    assert normalize_answer(answer) == expected


# -- answers_equal -------------------------------------------------------------------------------------

# (pred, ref, auto, math-verify alone, fallback alone), derived by hand.
EQUALITY_CASES = [
    (r"\frac{1}{2}", "0.5", True, True, True),
    (r"\dfrac{14}{3}", r"\frac{14}{3}", True, True, True),
    (r"(3, \frac{\pi}{2})", r"\left( 3, \frac{\pi}{2} \right)", True, True, True),
    ("1,000", "1000", True, True, True),
    ("x=5", "5", True, True, True),        # an assignment answers with its value...
    ("5", "x=5", True, True, True),
    ("y=5", "x=5", False, False, False),   # ...but two assignments must name the same variable
    (r"90^\circ", "90", True, True, True),
    (r"12\text{ cm}", "12", True, True, True),
    (r"\frac13", "0.333333333", True, True, True),  # within 1e-6
    (r"-\frac{3}{4}", "-0.75", True, True, True),
    ("3/4", r"\frac{3}{4}", True, True, True),
    ("$5$", r"\boxed{5}", True, True, True),
    (r"\text{Evelyn}", "Evelyn", True, True, True),
    ("0", "0.0", True, True, True),
    # math-verify is the more lenient path:
    (r"50\%", "0.5", True, True, False),
    (r"\{1,2\}", r"\{2,1\}", True, True, False),
    (r"2\sqrt{3}", r"\sqrt{12}", True, True, False),
    # clear non-equal pairs
    ("3", "4", False, False, False),
    (r"\frac{1}{3}", "0.33", False, False, False),
    (r"\sqrt{2}", "1.414", False, False, False),
    ("-5", "5", False, False, False),
    ("x^2", "x^3", False, False, False),
    ("(1,2)", "[1,2]", False, False, False),
    ("Evelyn", "Bob", False, False, False),
    ("1000", "1001", False, False, False),
]


@pytest.mark.parametrize(("pred", "ref", "auto", "mv", "fallback"), EQUALITY_CASES)
def test_answers_equal(pred, ref, auto, mv, fallback):
    assert answers_equal(pred, ref) is auto
    assert answers_equal(pred, ref, method="math_verify") is mv
    assert answers_equal(pred, ref, method="fallback") is fallback


@pytest.mark.parametrize(("pred", "ref"), [(None, "1"), ("1", None), ("", ""), ("  ", "1"), ("$$", "$$")])
def test_missing_or_empty_answers_match_nothing(pred, ref):
    assert answers_equal(pred, ref) is False
    assert answers_equal(pred, ref, method="fallback") is False


def test_fallback_numbers_use_a_relative_tolerance():
    assert answers_equal("1000000", "1000000.5", method="fallback")      # 5e-7 relative
    assert not answers_equal("1000000", "1000002", method="fallback")    # 2e-6 relative
    assert not answers_equal("0", "0.0000001", method="fallback")        # no absolute slack at 0
    assert not answers_equal("1/0", "2/0", method="fallback")


def test_fallback_decides_when_math_verify_reads_nothing():
    # Plain words: math-verify reads no expression from "blue", so the strings decide.
    assert answers_equal("blue", "blue")
    assert not answers_equal("blue", "red")


def test_off_the_main_thread_math_verify_runs_without_signals():
    results: list[object] = []

    def work() -> None:
        try:
            results.append(answers_equal(r"2\sqrt{3}", r"\sqrt{12}", method="math_verify"))
        except BaseException as e:  # noqa: BLE001 - the assertion below reports it
            results.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert results == [True]


def test_unknown_equality_method():
    with pytest.raises(PrmkitError, match="known: auto, math_verify, fallback"):
        answers_equal("1", "1", method="sympy")
