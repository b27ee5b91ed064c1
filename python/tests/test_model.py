"""kvslim.Model: tokenizer, generate against `kvslim generate --json`, errors."""

import numpy as np
import pytest

import kvslim
from conftest import LONG_PROMPT


def test_tokenize_roundtrip(model):
    text = "Hello world, the code is 42."
    tokens = model.tokenize(text, add_bos=False)
    assert tokens and all(isinstance(t, int) for t in tokens)
    assert model.detokenize(tokens) == text


def test_shape_properties(model):
    assert model.n_layers > 0 and model.n_kv_heads > 0 and model.n_heads % model.n_kv_heads == 0
    assert model.ctx == 2048 and model.threads == 2


@pytest.mark.parametrize("press,budget,options", [(None, None, {}), ("snapkv", 64, {"window": 16}),
                                                  ("adakv:tova", 48, {}), ("knorm", 64, {}),
                                                  ("lookaheadkv", 64, {})])
def test_generate_equals_cli(model, model_path, cli, press, budget, options):
    # Sampled (temperature 0.8, seed 7), so the whole path (prefill, method, sampler) must match.
    r = model.generate(LONG_PROMPT, max_tokens=24, seed=7, press=press, budget=budget, **options)
    args = ["generate", "-m", model_path, "-p", LONG_PROMPT, "-n", 24, "--seed", 7, "--threads", 2, "--ctx", 2048,
            "--json"]
    if press:
        args += ["--press", press, "--budget", budget]
    for key, value in options.items():
        args += ["--press-opt", f"{key}={value}"]
    expected = cli(*args)
    assert r.text == expected["text"]
    assert r.tokens == expected["token_ids"]
    assert r.n_prompt == expected["n_prompt"]
    assert r.stop_reason == expected["stop_reason"]
    assert r.kept_tokens == pytest.approx(expected["kept_tokens"])
    assert r.kv_bytes_final == expected["kv_bytes_final"]
    assert r.kv_bytes_peak == expected["kv_bytes_peak"]
    assert (r.budget or 0) == expected["budget"]


def test_generate_evicts(model):
    full = model.generate(LONG_PROMPT, max_tokens=4, temperature=0)
    small = model.generate(LONG_PROMPT, max_tokens=4, temperature=0, press="snapkv", budget=64)
    assert full.kept_tokens == full.n_prompt
    assert small.kept_tokens <= 64
    assert small.kv_bytes_prefill < full.kv_bytes_prefill


def test_on_token_streams_the_text(model):
    pieces = []
    r = model.generate(LONG_PROMPT, max_tokens=12, seed=3, on_token=pieces.append)
    assert "".join(pieces) == r.text and len(pieces) == len(r.tokens)


def test_token_ids_as_prompt(model):
    ids = model.tokenize(LONG_PROMPT)
    a = model.generate(ids, max_tokens=8, temperature=0)
    b = model.generate(LONG_PROMPT, max_tokens=8, temperature=0)
    assert a.tokens == b.tokens


@pytest.mark.parametrize("kwargs,message", [
    ({"press": "nosuch"}, "unknown method 'nosuch'"),
    ({"press": "snapkv", "budget": 64, "windw": 4}, "windw"),
    ({"press": "snapkv", "budget": 0}, "--budget must be > 0"),
    ({"press": "snapkv", "budget": 8, "window": 32}, "window 32 exceeds the budget 8"),
    ({"press": "lagkv", "prefill_evict": "block"}, "no block-wise prefill eviction"),
    ({"temperature": -1}, "--temp must be >= 0"),
])
def test_bad_settings_raise_kvslim_error(model, kwargs, message):
    with pytest.raises(kvslim.Error, match=message):
        model.generate(LONG_PROMPT, max_tokens=2, **kwargs)


def test_over_long_prompt_is_refused(model):
    with pytest.raises(kvslim.Error, match="context"):
        model.generate(list(range(1, 3000)), max_tokens=2)


def test_misspelt_keyword_is_refused(model):
    # Extra keywords are the method's options, which the method checks by name.
    with pytest.raises(kvslim.Error, match="temprature"):
        model.generate(LONG_PROMPT, max_tokens=2, temprature=0.5)


def test_missing_file(tmp_path):
    with pytest.raises(kvslim.Error, match="nosuch.gguf"):
        kvslim.Model(tmp_path / "nosuch.gguf")


def test_corrupt_file(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 16)
    with pytest.raises(kvslim.Error):
        kvslim.Model(bad)


def test_presses_catalogue_lists_every_method():
    names = set(kvslim.presses)
    for method in ["full", "dapq", "lagkv", "keydiff", "lookaheadkv", "rocketkv", "streaming_llm", "h2o", "tova",
                   "snapkv", "pyramidkv", "adakv", "knorm", "laq", "quest", "sparq", "exact_topk"]:
        assert method in names
    assert [o["key"] for o in kvslim.presses["snapkv"]["options"]][:3] == ["window", "kernel", "pooling"]


def test_system_info_names_the_level():
    info = kvslim.system_info()
    assert isinstance(info, dict) and info
