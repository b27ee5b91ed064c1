"""kvslim.Session: prefill and decode, logits without a copy, kept positions, KV files, turns."""

import numpy as np
import pytest

import kvslim
from conftest import LONG_PROMPT


def test_greedy_decode_equals_generate(model):
    expected = model.generate(LONG_PROMPT, max_tokens=10, temperature=0, press="snapkv", budget=64)
    s = kvslim.Session(model, press="snapkv", budget=64, max_tokens=10, temperature=0)
    s.prefill(model.tokenize(LONG_PROMPT))
    got = [s.decode() for _ in range(len(expected.tokens))]
    assert got == expected.tokens


def test_logits_are_a_view_of_the_engine_buffer(model):
    s = kvslim.Session(model, temperature=0)
    s.prefill(model.tokenize("The code of box 3 is"))
    a, b = s.logits, s.logits
    assert a.shape == (model.n_vocab,) and a.dtype == np.float32
    assert np.shares_memory(a, b)  # both views of one buffer: no copy was made
    assert not a.flags.writeable
    before = a.copy()
    token = s.decode()
    assert token == int(np.argmax(before))  # greedy picks the argmax (lowest id on ties)
    assert not np.array_equal(before, a)  # the view now shows the new token's logits


def test_kept_positions_follow_the_budget(model):
    s = kvslim.Session(model, press="snapkv", budget=64, window=16)
    tokens = model.tokenize(LONG_PROMPT)
    s.prefill(tokens)
    kept = s.kept_positions()
    assert len(kept) == model.n_layers and all(len(layer) == model.n_kv_heads for layer in kept)
    n = len(tokens)
    for layer in kept:
        for positions in layer:
            assert len(positions) == 64
            assert positions == sorted(set(positions))
            assert positions[-16:] == list(range(n - 16, n))  # SnapKV always keeps its window
    full = kvslim.Session(model)
    full.prefill(tokens)
    assert all(p == list(range(n)) for layer in full.kept_positions() for p in layer)
    assert s.kv_bytes < full.kv_bytes


def test_save_and_load_round_trip(model, tmp_path):
    s = kvslim.Session(model, press="h2o", budget=48, temperature=0)
    s.turn(LONG_PROMPT, max_tokens=4)
    path = tmp_path / "s.kv"
    s.save(path)
    t = kvslim.Session.load(model, path, temperature=0)
    assert t.press == "h2o"
    assert t.history == s.history
    assert t.kept_positions() == s.kept_positions()
    # Both go on identically.
    assert s.turn(" And box 5?", max_tokens=6) == t.turn(" And box 5?", max_tokens=6)


def test_cli_kv_file_loads_in_python(model, model_path, cli, tmp_path):
    path = tmp_path / "cli.kv"
    cli("generate", "-m", model_path, "-p", LONG_PROMPT, "-n", 4, "--temp", 0, "--press", "snapkv", "--budget", 64,
        "--ctx", 2048, "--save-kv", path, "--json")
    t = kvslim.Session.load(model, path, temperature=0)
    assert t.press == "snapkv"
    assert all(len(p) <= 64 + 4 for layer in t.kept_positions() for p in layer)


def test_load_refuses_a_corrupt_file(model, tmp_path):
    bad = tmp_path / "bad.kv"
    bad.write_bytes(b"not a kv file")
    with pytest.raises(kvslim.Error, match="bad.kv"):
        kvslim.Session.load(model, bad)


def test_turns_reuse_the_cache(model):
    s = kvslim.Session(model, press="snapkv", budget=64, temperature=0, max_tokens=4)
    s.turn(LONG_PROMPT)
    first = s.n_past
    s.turn(" Which box was it?")
    assert s.last_turn.reused >= first - 1  # only the new message (and the last answer token) ran
    assert s.n_past > first


def test_decode_before_prefill_is_an_error(model):
    with pytest.raises(kvslim.Error, match="prefill"):
        kvslim.Session(model).decode()


def test_bad_token_is_refused(model):
    s = kvslim.Session(model)
    s.prefill([1, 2, 3])
    with pytest.raises(kvslim.Error, match="outside the vocabulary"):
        s.decode(model.n_vocab + 5)
    assert s.decode(4) == 4  # still usable
