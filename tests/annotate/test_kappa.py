"""Cohen's and Fleiss' kappa against values worked out by hand."""

from __future__ import annotations

import pytest

from prmkit.eval import cohen_kappa, fleiss_kappa


def test_cohen_kappa_hand_values():
    # 10 steps; the raters agree on 7 (4 x +1, 3 x -1). Rater a: 6 x +1, 4 x -1; rater b: 5 x +1, 5 x -1.
    a = [1, 1, 1, 1, 1, 1, -1, -1, -1, -1]
    b = [1, 1, 1, 1, -1, -1, -1, -1, -1, 1]
    # p_o = 7/10; p_e = 0.6 * 0.5 + 0.4 * 0.5 = 0.5; kappa = 0.2 / 0.5 = 0.4
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    # three categories: a = (1, 0, -1, 1), b = (1, -1, -1, 0): p_o = 1/2,
    # p_e = (2/4)(1/4) + (1/4)(1/4) + (1/4)(2/4) = 5/16, kappa = (8/16 - 5/16) / (11/16) = 3/11
    assert cohen_kappa([1, 0, -1, 1], [1, -1, -1, 0]) == pytest.approx(3 / 11)
    # systematic disagreement is below zero: p_o = 0, p_e = 1/2
    assert cohen_kappa([1, -1], [-1, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([], []) is None and cohen_kappa([0, 0], [0, 0]) is None
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 1])


def test_fleiss_kappa_hand_values():
    # Fleiss (1971)-style table, 3 raters, 3 categories, 4 items:
    # rows (3,0,0) (0,3,0) (1,1,1) (0,2,1): P_i = 1, 1, 0, 1/3 -> P = 7/12;
    # column totals 4, 6, 2 of 12 -> P_e = (16 + 36 + 4) / 144 = 7/18; kappa = (7/12 - 7/18) / (11/18) = 7/22
    assert fleiss_kappa([[3, 0, 0], [0, 3, 0], [1, 1, 1], [0, 2, 1]]) == pytest.approx(7 / 22)
    # two raters on every item: Fleiss' kappa is Scott's pi
    assert fleiss_kappa([[2, 0], [0, 2], [2, 0], [0, 2]]) == pytest.approx(1.0)
    assert fleiss_kappa([]) is None and fleiss_kappa([[2, 0], [2, 0]]) is None
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 0], [1, 0]])
