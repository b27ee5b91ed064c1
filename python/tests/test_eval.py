"""kvslim.eval: the same records as `kvslim eval` for the same grid."""

import json
import os

import pytest

import kvslim

# Fields that measure time differ between any two runs; everything else must be equal.
TIMING = ("ms", "tok_s", "seconds")


def untimed(record):
    return {k: v for k, v in record.items() if not any(t in k for t in TIMING)}


def test_records_equal_the_cli(model, model_path, cli, tmp_path):
    args = dict(methods=["full", "snapkv", "knorm"], budgets=[48], tasks=["passkey"], lengths=[256], samples=2)
    records = kvslim.eval(model, **args, dataframe=False)
    out = tmp_path / "cli"
    cli("eval", "-m", model_path, "--methods", "full,snapkv,knorm", "--budgets", 48, "--tasks", "passkey",
        "--lengths", 256, "--samples", 2, "--threads", 2, "--out", out, json_out=False)
    with open(out / "samples.jsonl") as f:
        expected = [json.loads(line) for line in f]
    assert len(records) == 6  # (full, snapkv@48, knorm@48) x two samples
    assert [untimed(r) for r in records] == [untimed(r) for r in expected]


def test_out_directory_resumes(model, tmp_path):
    args = dict(methods="snapkv", budgets=[32], tasks=["passkey"], lengths=[256], samples=1, out=tmp_path,
                dataframe=False)
    first = kvslim.eval(model, **args)
    again = kvslim.eval(model, **args)
    assert len(first) == len(again) == 1  # the second call found the run done


def test_bad_grid_is_refused(model):
    with pytest.raises(kvslim.Error, match="nosuchtask"):
        kvslim.eval(model, "snapkv", [32], ["nosuchtask"], [256], 1)


def test_dataframe_holds_the_records(model):
    # pandas is one of the test tools (scripts/install-deps.sh); eval returns a DataFrame with it.
    try:
        import pandas
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("pandas (python3-pandas) is missing")
        pytest.skip("pandas (python3-pandas) is not installed")
    args = dict(methods=["snapkv"], budgets=[32], tasks=["passkey"], lengths=[256], samples=2)
    frame = kvslim.eval(model, **args)
    records = kvslim.eval(model, **args, dataframe=False)
    assert isinstance(frame, pandas.DataFrame) and len(frame) == len(records) == 2
    assert list(frame["method"]) == [r["method"] for r in records]
    assert list(frame["score"]) == [r["score"] for r in records]
