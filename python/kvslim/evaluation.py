"""kvslim.eval: the sweep `kvslim eval` runs, its records as Python dicts."""

import json
import os
import tempfile

from . import _kvslim


def eval(model, methods, budgets=(), tasks=(), lengths=(), samples=3, *, seed=0, depths=(), data=None,
         protocol="query-aware", metrics=("score",), out=None, shard="0/1", response_tokens=32,
         continuation=None, batch=512, kv_page=32, cache_type_k="f16", cache_type_v="f16", dataframe=None):
    """Runs every method at every budget on generated tasks x lengths x samples (or the samples of
    a LongBench JSONL file, data=) and returns the records: the rows of OUT/samples.jsonl, the
    same numbers `kvslim eval` writes for the same arguments. methods: a list of names or the
    CLI's comma-separated string ("snapkv:window=16,h2o"). out: a results directory (kept and
    resumable, as the CLI's --out); None uses a temporary one. With pandas installed the records
    come as a DataFrame unless dataframe=False."""
    if not isinstance(methods, str):
        methods = ",".join(methods)
    with tempfile.TemporaryDirectory(prefix="kvslim-eval-") as scratch:
        directory = os.fspath(out) if out is not None else scratch
        _kvslim._eval(model._m, methods, list(budgets), list(tasks), list(lengths), samples, seed, list(depths),
                      os.fspath(data) if data else "", protocol, list(metrics), directory, shard, response_tokens,
                      continuation or "", batch, kv_page, cache_type_k, cache_type_v)
        with open(os.path.join(directory, "samples.jsonl"), encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    if dataframe is False:
        return records
    try:
        import pandas
    except ImportError:
        if dataframe:
            raise
        return records
    return pandas.DataFrame.from_records(records)
