"""Presses written in Python: a five-line KNorm keeps exactly the built-in knorm's positions, the
views handed to score() are what the engine computed, and bad presses fail cleanly."""

import sys

import numpy as np
import pytest

import kvslim
from conftest import LONG_PROMPT


class KNorm(kvslim.ScorerPress):
    wants_attention = False

    def score(self, layer, keys, values, queries, attention):
        return -np.linalg.norm(keys.astype(np.float64), axis=-1)


def kept(model, press, budget, tokens):
    s = kvslim.Session(model, press=press, budget=budget)
    s.prefill(tokens)
    return s.kept_positions()


@pytest.mark.parametrize("budget", [16, 64, 200])
def test_python_knorm_keeps_what_knorm_keeps(model, budget):
    tokens = model.tokenize(LONG_PROMPT)
    assert kept(model, KNorm(), budget, tokens) == kept(model, "knorm", budget, tokens)


def test_python_knorm_generates_what_knorm_generates(model):
    a = model.generate(LONG_PROMPT, max_tokens=16, seed=5, press=KNorm(), budget=48)
    b = model.generate(LONG_PROMPT, max_tokens=16, seed=5, press="knorm", budget=48)
    assert a.tokens == b.tokens and a.kv_bytes_final == b.kv_bytes_final


class Recorder(kvslim.ScorerPress):
    """Checks the arguments against each other and keeps the newest tokens."""

    window = 8

    def __init__(self):
        self.layers = []

    def score(self, layer, keys, values, queries, attention):
        self.layers.append((layer, keys.copy(), values.shape, queries.copy(), attention.copy()))
        return np.tile(np.arange(keys.shape[1], dtype=np.float32), (keys.shape[0], 1))


def test_score_sees_the_engine_attention(model):
    tokens = model.tokenize(LONG_PROMPT)
    n = len(tokens)
    press = Recorder()
    s = kvslim.Session(model, press=press, budget=32)
    s.prefill(tokens)
    assert [layer for layer, *_ in press.layers] == list(range(model.n_layers))
    group = model.n_heads // model.n_kv_heads
    for layer, keys, values_shape, queries, attention in press.layers:
        assert keys.shape == (model.n_kv_heads, n, model.head_dim) and values_shape == keys.shape
        assert queries.shape == (model.n_heads, 8, model.head_dim)
        assert attention.shape == (model.n_heads, 8, n)
        # Query w of the window sits at position n - 8 + w: it sees that many keys, its row sums
        # to 1, and it is the softmax of its scaled dot products with the keys (GQA: query head
        # h reads KV head h // group). Keys are stored in f16 pages, hence the tolerance.
        for h in range(model.n_heads):
            for w in range(8):
                visible = n - 8 + w + 1
                row = attention[h, w]
                assert np.all(row[visible:] == 0)
                assert row[:visible].sum() == pytest.approx(1.0, abs=1e-4)
                logits = keys[h // group, :visible] @ queries[h, w] / np.sqrt(model.head_dim)
                expected = np.exp(logits - logits.max())
                expected /= expected.sum()
                np.testing.assert_allclose(row[:visible], expected, atol=2e-3)
    # Highest score = newest token: every head keeps the last 32 positions.
    assert all(p == list(range(n - 32, n)) for layer in s.kept_positions() for p in layer)


class KeepFirst(kvslim.Press):
    wants_attention = False

    def select(self, layer, keys, values, queries, attention, budget):
        return [list(range(budget)) for _ in range(keys.shape[0])]


def test_select_press_keeps_its_choice(model):
    got = kept(model, KeepFirst(), 20, model.tokenize(LONG_PROMPT))
    assert all(p == list(range(20)) for layer in got for p in layer)


class WrongShape(kvslim.ScorerPress):
    def score(self, layer, keys, values, queries, attention):
        return np.zeros((keys.shape[0], keys.shape[1] + 1))


class Raises(kvslim.ScorerPress):
    def score(self, layer, keys, values, queries, attention):
        raise KeyError("boom in score")


class ReturnsNan(kvslim.ScorerPress):
    def score(self, layer, keys, values, queries, attention):
        s = np.zeros(keys.shape[:2])
        s[0, 3] = np.nan
        return s


class BadSelect(kvslim.Press):
    def select(self, layer, keys, values, queries, attention, budget):
        return [[5, 3]] * keys.shape[0]


@pytest.mark.parametrize("press,error,message", [
    (WrongShape(), ValueError, r"WrongShape.score\(\) for layer 0 returned shape \(\d+, \d+\): expected"),
    (Raises(), KeyError, "boom in score"),
    (ReturnsNan(), ValueError, "NaN"),
    (BadSelect(), ValueError, "out of order"),
])
def test_bad_press_raises_and_leaves_the_engine_usable(model, press, error, message):
    reference = model.generate(LONG_PROMPT, max_tokens=6, temperature=0, press="snapkv", budget=64)
    refs = sys.getrefcount(press)
    for _ in range(3):
        with pytest.raises(error, match=message):
            model.generate(LONG_PROMPT, max_tokens=6, temperature=0, press=press, budget=64)
    assert sys.getrefcount(press) == refs  # the engine let go of the press each time
    s = kvslim.Session(model, press=press, budget=64)
    with pytest.raises(error, match=message):
        s.prefill(model.tokenize(LONG_PROMPT))
    assert s.n_past == 0  # the half-run prefill was dropped
    del s
    assert sys.getrefcount(press) == refs
    again = model.generate(LONG_PROMPT, max_tokens=6, temperature=0, press="snapkv", budget=64)
    assert again.tokens == reference.tokens


def test_python_press_takes_no_press_options(model):
    with pytest.raises(kvslim.Error, match="unknown option"):
        model.generate(LONG_PROMPT, max_tokens=2, press=KNorm(), budget=16, window=4)


def test_not_a_press(model):
    with pytest.raises(TypeError, match="kvslim.Press"):
        model.generate(LONG_PROMPT, max_tokens=2, press=object(), budget=16)
