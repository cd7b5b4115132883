r"""Final-answer extraction and answer equivalence.

Extraction turns a solution text into its final answer string. Each extractor returns the answer
(stripped) or None when the text holds none:

- :func:`extract_boxed`: the content of the last ``\boxed{...}`` / ``\fbox{...}`` (MATH, most
  chain-of-thought prompts);
- :func:`extract_gsm8k`: the rest of the line after the last ``#### `` (GSM8K references);
- :func:`extract_answer_is`: "The answer is: 42", "Answer: 12", PRM800K's ``# Answer`` heading;
- :func:`extract_last_number`: the last number in the text (the usual last resort);
- :func:`extract_answer`: one of the above by name (:data:`EXTRACTORS`), or ``"auto"``, which tries
  them in that order and returns the first answer found.

Equivalence (:func:`answers_equal`) decides whether a predicted answer matches a reference answer:

1. Both answers are normalised (:func:`normalize_answer`: outer ``$``, spaces, ``\left``/``\right``,
   ``\!``, a trailing period, ``\text{...}`` units after a number, ``^\circ``, ``\%``, thousands commas,
   ``\dfrac``/``\tfrac`` -> ``\frac``); identical normal forms are equal. This is cheap and sound, and it
   spares math-verify the answers it handles worst (plain words, multiple-choice letters).
2. Otherwise math-verify decides: both answers are wrapped in ``$...$`` (math-verify only extracts
   LaTeX that sits in a math environment; a bare ``\frac{1}{2}`` would be read as nothing), parsed,
   and compared with ``verify(reference, prediction)`` (math-verify is asymmetric: the reference is
   its "gold").
3. The fallback decides when math-verify is not installed, raises, times out, or reads no
   expression from one of the answers: normalised string equality, then numeric equality with a
   relative tolerance of 1e-6 for integers, decimals and simple fractions (``a/b``,
   ``\frac{a}{b}``, ``\frac ab``).

``answers_equal(..., method="math_verify")`` and ``method="fallback"`` use one path alone (to
measure them, or to rule math-verify out).

Conventions (both paths agree on them): ``x=5`` matches ``5`` (an assignment answers with its value)
but not ``y=5``; ``1,000`` matches ``1000``; ``90^\circ`` matches ``90``; ``12\text{ cm}`` matches
``12``; ``50\%`` matches ``50``. Where they differ, math-verify is the more lenient: it also reads
``50\%`` as ``0.5``, ``\pi`` as ``3.141593`` (6 decimals), ``\{1,2\}`` as ``\{2,1\}`` and
``2\sqrt{3}`` as ``\sqrt{12}``, which the fallback (strings and plain numbers only) does not.

Threads: math-verify bounds its time with ``signal.alarm``, which only works in the main thread of the
main interpreter. Off the main thread :func:`answers_equal` calls it without a time limit
(``parsing_timeout=None``, ``timeout_seconds=None``); on the main thread the limit is ``timeout``
seconds per parse and per comparison. A timeout counts as "math-verify could not decide", so the
fallback answers.

>>> extract_answer(r"so the area is $\boxed{\frac{14}{3}}$.")
'\\frac{14}{3}'
>>> answers_equal(r"\dfrac{14}{3}", r"\frac{14}{3}"), answers_equal("0.5", r"\frac12")
(True, True)
>>> answers_equal("1,000", "1000"), answers_equal("3", "4")
(True, False)
"""

from __future__ import annotations

import math
import re
import threading
from collections import deque
from collections.abc import Callable
from fractions import Fraction

from prmkit.errors import MissingDependencyError, PrmkitError

__all__ = [
    "EXTRACTORS", "AUTO_ORDER", "extract_answer", "extract_boxed", "extract_gsm8k",
    "extract_answer_is", "extract_last_number", "answers_equal", "normalize_answer",
    "math_verify_available", "EQUALITY_METHODS", "states_answer",
]

# -- extraction ---------------------------------------------------------------------------------------

# `\boxed` or `\fbox` as a whole command: `\boxedx` would be another macro.
_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def _match_brace(text: str, open_at: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``open_at``, or None when it never closes.

    Escaped braces (``\\{``, ``\\}``) and any other backslash escape do not count, so a set such as
    ``\\{1, 2\\}`` inside a box does not unbalance it.
    """
    depth = 0
    i = open_at
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _whole_box(s: str) -> str | None:
    """The content of ``s`` when ``s`` is exactly one ``\\boxed{...}``, else None."""
    box = _BOX_RE.match(s)
    if not box:
        return None
    opener = box.end()
    while opener < len(s) and s[opener].isspace():
        opener += 1
    if opener < len(s) and s[opener] == "{" and _match_brace(s, opener) == len(s) - 1:
        return s[opener + 1:-1]
    return None


def extract_boxed(text: str) -> str | None:
    r"""The content of the last top-level ``\boxed{...}`` (or ``\fbox{...}``), braces balanced.

    ``\boxed {x}`` (a space before the brace) and the brace-less ``\boxed 5`` (up to the next space
    or ``$``) are read too. A box nested in another box belongs to it, so the outer box is the one
    returned; a content that is itself exactly one box is unwrapped. When the last box never closes
    (a generation cut off mid-answer) there is no answer: None, rather than an earlier box the
    writer went on from. An empty box is no answer either.

    >>> extract_boxed(r"first \boxed{1}, then $\boxed{\frac{1}{2}}$.")
    '\\frac{1}{2}'
    >>> extract_boxed(r"$\boxed{\{1, 2\}}$"), extract_boxed(r"so $\boxed 5$."), extract_boxed("none")
    ('\\{1, 2\\}', '5', None)
    >>> extract_boxed(r"\boxed{2} and then \boxed{3") is None
    True
    """
    answer: str | None = None
    pos = 0
    for m in _BOX_RE.finditer(text):
        if m.start() < pos:  # inside the previous box
            continue
        i = m.end()
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "{":
            close = _match_brace(text, i)
            if close is None:
                return None
            answer = text[i + 1:close].strip()
            pos = close + 1
        else:
            # `\boxed 5`: one token; a sentence's period or comma after it is not part of it.
            token = re.match(r"[^\s$]*", text[i:]).group(0)  # type: ignore[union-attr]
            answer = token.rstrip(".,;:")
            pos = i + len(token)
    if answer and _whole_box(answer) is not None:
        return extract_boxed(answer)
    return answer or None


_GSM8K_RE = re.compile(r"####[ \t]*([^\n]*)")
_GSM8K_NUMBER_RE = re.compile(r"[-+\u2212]?[$\u00a3\u20ac]?\s*[-\u2212]?\.?\d")


def extract_gsm8k(text: str) -> str | None:
    """The rest of the line after the last ``####`` (GSM8K's answer line), or None.

    Only that line is taken, so text a model writes after its answer line stays out of it.

    >>> extract_gsm8k("She has 3 + 4 = 7 apples.\\n#### 7")
    '7'
    """
    matches = _GSM8K_RE.findall(text)
    if not matches:
        return None
    return matches[-1].strip() or None


# "The answer is: 42", "the final answer is $3$", "Answer: 12", "**Answer:** 12", and PRM800K's
# "# Answer" heading (whose answer is on the next non-empty line).
_ANSWER_IS_RE = re.compile(
    r"""(?:^[ \t]*\#+[ \t]*answer[ \t]*:?[ \t]*$)        # "# Answer" on a line of its own
      | \banswer(?:\*\*)?[ \t]*(?:is\b[ \t]*:?|:)(?:\*\*)?[ \t]*   # "answer is", "answer:", "Answer:**"
    """,
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)
_MATH_OPENERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    tail = deque(pattern.finditer(text), maxlen=1)
    return tail[0] if tail else None


def _clean_stated_answer(value: str) -> str | None:
    """The answer inside the phrase that follows "the answer is": a box, a math span, or the
    words up to the end of the sentence."""
    value = value.strip().strip("*").strip()
    if _BOX_RE.search(value):
        return extract_boxed(value)
    for opener, closer in _MATH_OPENERS:
        if value.startswith(opener):
            end = value.find(closer, len(opener))
            if end > 0:
                return value[len(opener):end].strip() or None
    # "42. I hope it is correct." -> "42"; a decimal point (no space after it) does not end it.
    end = re.search(r"\.(?:\s|$)", value)
    if end:
        value = value[:end.start()]
    return value.strip().strip("*").strip() or None


def extract_answer_is(text: str) -> str | None:
    r"""The answer stated in words: "The answer is: 42", "Answer: 12", PRM800K's ``# Answer``.

    The last such statement counts. A box in the statement gives its content; a math span
    (``$...$``) gives its content; otherwise the words up to the end of the sentence. When nothing
    follows on the same line (``# Answer\n\n29``), the next non-empty line is the answer.

    >>> extract_answer_is(r"So the final answer is $\boxed{3}$. I hope it is correct.")
    '3'
    >>> extract_answer_is("The answer is: 42"), extract_answer_is("# Answer\n\n29")
    ('42', '29')
    """
    last = _last_match(_ANSWER_IS_RE, text)
    if last is None:
        return None
    rest = text[last.end():]
    line_end = rest.find("\n")
    value = rest if line_end < 0 else rest[:line_end]
    if not value.strip():
        following = [ln for ln in rest.split("\n") if ln.strip()]
        if not following:
            return None
        value = following[0]
    return _clean_stated_answer(value)


_NUMBER_RE = re.compile(
    r"""(?:(?<![\w)\]}])[-\u2212])?          # a sign, unless it is a subtraction ("5-3")
        (?<![\d.])                            # start at the number's first digit
        (?: \d+/\d+(?![\d.])                  # 3/4
          | \d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)  # 1,000 and 1,234.5
          | \d+(?:\.\d+)?                     # 12 and 3.14
          | \.\d+ )                           # .5
    """,
    re.VERBOSE,
)


def extract_last_number(text: str) -> str | None:
    """The last number in ``text``, with thousands commas dropped and a Unicode minus made ``-``.

    Integers, decimals, negatives and simple fractions (``3/4``) count; a period after the number
    ends the sentence, not the number.

    >>> extract_last_number("He pays $1,000 and gets back -3.5 dollars, i.e. 3/4 of it.")
    '3/4'
    >>> extract_last_number("5-3 = 2."), extract_last_number("no digits") is None
    ('2', True)
    """
    last = _last_match(_NUMBER_RE, text)
    if last is None:
        return None
    return last.group(0).replace(",", "").replace("\u2212", "-")


#: Extractors by name, for :func:`extract_answer` and configuration files.
EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "boxed": extract_boxed,
    "gsm8k": extract_gsm8k,
    "answer_is": extract_answer_is,
    "last_number": extract_last_number,
}
#: The order ``method="auto"`` tries the extractors in: the most explicit marking first.
AUTO_ORDER: tuple[str, ...] = ("boxed", "gsm8k", "answer_is", "last_number")


def extract_answer(text: str, method: str = "auto") -> str | None:
    r"""The final answer of ``text`` by ``method`` (a name in :data:`EXTRACTORS`, or ``"auto"``).

    ``"auto"`` tries :data:`AUTO_ORDER` and returns the first answer found, or None. In auto mode
    a ``####`` line counts only when it starts with a number (after a sign or a currency sign):
    GSM8K answers are numbers, while a model's Markdown heading (``#### Step 2: ...``) is not an
    answer.

    >>> extract_answer("The answer is 7.\n#### 7"), extract_answer("We get x = 12.")
    ('7', '12')
    >>> extract_answer("#### Step 1: add\n3 + 4 = 7")
    '7'
    """
    if method != "auto":
        try:
            extractor = EXTRACTORS[method]
        except KeyError:
            raise PrmkitError(f"unknown answer extraction method {method!r}; known: auto, "
                              f"{', '.join(EXTRACTORS)}") from None
        return extractor(text)
    for name in AUTO_ORDER:
        answer = EXTRACTORS[name](text)
        if answer is None or (name == "gsm8k" and not _GSM8K_NUMBER_RE.match(answer)):
            continue
        return answer
    return None


# -- normalisation (the fallback, and a cheap first check) ---------------------------------------------

_DELIMS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
# A unit after a number: `12\text{ cm}`, `5 \mbox{inches}`, `3\,\text{m}^2`.
_UNIT_RE = re.compile(r"(?<=[\d}])\s*(?:\\[,;:! ]\s*)*\\(?:text|mbox|mathrm)\{\s*[A-Za-z][A-Za-z ]*\}"
                      r"(?:\^\{?[23]\}?)?")
_TEXT_RE = re.compile(r"\\(?:text|textbf|textit|mbox|mathrm|mathbf|operatorname)\{([^{}]*)\}")
_THOUSANDS_RE = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_ASSIGNMENT_RE = re.compile(r"([A-Za-z](?:_\{?\w+\}?)?)=(?P<value>[^=<>]+)")


def _strip_delimiters(s: str) -> str:
    changed = True
    while changed:
        changed = False
        s = s.strip()
        for opener, closer in _DELIMS:
            if len(s) >= len(opener) + len(closer) and s.startswith(opener) and s.endswith(closer):
                s = s[len(opener):len(s) - len(closer)]
                changed = True
                break
        inner = _whole_box(s)
        if inner is not None:
            s, changed = inner, True
    return s


def normalize_answer(answer: str) -> str:
    r"""A canonical string form of an answer, for comparing answers as strings.

    Removes outer ``$``/``\(``/``\[`` and a whole-answer ``\boxed{}``, every space (and ``\!``,
    ``\,``, ``\;``, ``~``), ``\left``/``\right``, ``\displaystyle``, degrees (``^\circ``, ``°``),
    ``\%``, a unit in ``\text{...}`` after a number, a trailing period, thousands commas in a plain
    number (``1,000``, ``10{,}000``); unwraps other ``\text{...}``; makes ``\dfrac``/``\tfrac``
    ``\frac``.

    >>> normalize_answer(r"$\left( 3, \dfrac{\pi}{2} \right)$")
    '(3,\\frac{\\pi}{2})'
    >>> normalize_answer(r"1{,}000\text{ cm}."), normalize_answer(r"\text{Evelyn}")
    ('1000', 'Evelyn')
    """
    s = _strip_delimiters(answer)
    s = s.replace("{,}", ",")
    s = re.sub(r"\\(?:left|right)(?![A-Za-z])\.?", "", s)
    s = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", s)
    s = re.sub(r"\\displaystyle(?![A-Za-z])", "", s)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|°", "", s)
    s = re.sub(r"\\?%", "", s)
    s = _UNIT_RE.sub("", s)
    s = _TEXT_RE.sub(r"\1", s)
    s = re.sub(r"\\[!,;: ]|~", "", s)
    s = re.sub(r"\s+", "", s)
    s = s.rstrip(".")
    if _THOUSANDS_RE.fullmatch(s):
        s = s.replace(",", "")
    return s


def _number(s: str) -> Fraction | float | None:
    """The value of a normalised answer that is a plain number or a simple fraction, else None."""
    sign = 1
    if s[:1] in "+-":
        sign, s = (-1 if s[0] == "-" else 1), s[1:]
    m = (re.fullmatch(r"\\frac\{([^{}]+)\}\{([^{}]+)\}", s)
         or re.fullmatch(r"\\frac(\d)(\d)", s) or re.fullmatch(r"([^/]+)/([^/]+)", s))
    try:
        if m:
            num, den = _number(m.group(1)), _number(m.group(2))
            if num is None or den is None or den == 0:
                return None
            return sign * Fraction(num) / Fraction(den)
        if re.fullmatch(r"\d+(?:\.\d*)?|\.\d+", s):
            return sign * Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    return None


def _fallback_equal(pred: str, ref: str) -> bool:
    """Normalised string equality, then numeric equality (relative tolerance 1e-6)."""
    p, r = normalize_answer(pred), normalize_answer(ref)
    if not p or not r:
        return False
    if p == r:
        return True
    # An assignment answers with its value ("x=5" matches "5"), as in math-verify; two assignments
    # to different names do not match.
    pa, ra = _ASSIGNMENT_RE.fullmatch(p), _ASSIGNMENT_RE.fullmatch(r)
    if pa and not ra:
        p = pa.group("value")
    elif ra and not pa:
        r = ra.group("value")
    if p == r:
        return True
    a, b = _number(p), _number(r)
    if a is None or b is None:
        return False
    return a == b or math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=0.0)


# -- math-verify ---------------------------------------------------------------------------------------

def math_verify_available() -> bool:
    """Whether math-verify can be imported (otherwise :func:`answers_equal` uses its fallback)."""
    try:
        import math_verify  # noqa: F401
    except ImportError:
        return False
    return True


def _for_math_verify(answer: str) -> str:
    # math-verify reads LaTeX only inside a math environment (or a box): a bare `\frac{1}{2}` or
    # `\left( 3, \frac{\pi}{2} \right)` would parse as nothing. Outer delimiters the answer already
    # has are taken off first, so `$5$` is not wrapped twice and a stray `$5` (currency) still reads.
    return f"${_strip_delimiters(answer)}$"


def _math_verify_equal(pred: str, ref: str, timeout: int | None) -> bool | None:
    """math-verify's verdict, or None when it is missing, fails, times out, or reads nothing."""
    try:
        from math_verify import parse, verify
        from math_verify.errors import TimeoutException
    except ImportError:
        return None
    # signal.alarm (math-verify's time limit) only works in the main thread.
    if threading.current_thread() is not threading.main_thread():
        timeout = None
    try:
        gold = parse(_for_math_verify(ref), parsing_timeout=timeout, raise_on_error=True)
        target = parse(_for_math_verify(pred), parsing_timeout=timeout, raise_on_error=True)
        # Only string fallbacks (no sympy object) means math-verify could not read that side.
        if not any(not isinstance(x, str) for x in gold) or not any(
                not isinstance(x, str) for x in target):
            return None
        return bool(verify(gold, target, timeout_seconds=timeout, raise_on_error=True))
    except (Exception, TimeoutException):  # TimeoutException is a BaseException
        return None


#: How :func:`answers_equal` may decide.
EQUALITY_METHODS: tuple[str, ...] = ("auto", "math_verify", "fallback")


def answers_equal(pred: str | None, ref: str | None, *, method: str = "auto",
                  timeout: int | None = 5) -> bool:
    r"""Whether the predicted answer ``pred`` matches the reference answer ``ref``.

    ``method="auto"`` (the default) is normalised string equality, then math-verify, then the
    fallback where math-verify cannot decide (see the module docstring). ``"math_verify"`` is
    math-verify alone (False where it cannot decide); ``"fallback"`` is the fallback alone.
    ``timeout`` bounds each math-verify parse and comparison, in seconds (main thread only). None or
    an empty answer matches nothing.

    >>> answers_equal(r"(3, \frac{\pi}{2})", r"\left( 3, \frac{\pi}{2} \right)")
    True
    >>> answers_equal("x=5", "5"), answers_equal(r"\frac{1}{2}", "0.5", method="fallback")
    (True, True)
    >>> answers_equal(r"\frac{1}{3}", "0.33"), answers_equal(None, "1")
    (False, False)
    """
    if method not in EQUALITY_METHODS:
        raise PrmkitError(f"unknown answer equality method {method!r}; known: "
                          f"{', '.join(EQUALITY_METHODS)}")
    if pred is None or ref is None:
        return False
    pred, ref = str(pred).strip(), str(ref).strip()
    if not pred or not ref:
        return False
    if method == "fallback":
        return _fallback_equal(pred, ref)
    if method == "math_verify":
        if not math_verify_available():
            raise MissingDependencyError("math-verify", purpose="answer equivalence")
        return _math_verify_equal(pred, ref, timeout) is True
    p = normalize_answer(pred)
    if p and p == normalize_answer(ref):
        return True
    verdict = _math_verify_equal(pred, ref, timeout)
    if verdict is not None:
        return verdict
    return _fallback_equal(pred, ref)


def states_answer(step: str) -> bool:
    """Whether a step states the final answer ("The answer is 8.", a ``\\boxed{}``), which ends a
    solution. The last number of any step is not enough: most steps end with one.

    >>> states_answer("The answer is 8."), states_answer("5 + 3 = 8.")
    (True, False)
    """
    return extract_answer_is(step) is not None or extract_boxed(step) is not None
