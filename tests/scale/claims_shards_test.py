#!/usr/bin/env python3
"""`kvslim claims --shard i/n` and `--merge DIR...` (what scripts/slurm/submit.sh runs for a claims
run): two shards of a small claims run (--quick --samples 1 on models/kvslim-small.gguf), merged,
give every sweep's records of a one-process run record for record (wall times aside) and the same
table (the row timing the methods' scoring aside), running nothing at the merge; and the misuses
are one-line errors."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_common import KVSLIM, MODEL, compare_records, fail, log, read_jsonl, record_key

PLAN = ["-m", MODEL, "--quick", "--samples", "1", "--threads", "1"]
SWEEPS = ["query-agnostic", "query-aware", "recall", "block-prefill", "multi-turn"]


def claims(*args, check=True):
    p = subprocess.run([KVSLIM, "claims", *args], capture_output=True, text=True, timeout=120)
    if check and p.returncode != 0:
        fail(f"kvslim claims {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p


def table_rows(path):
    """The table's rows, the one timing the methods' scoring (wall time) left out."""
    return [line for line in open(path, encoding="utf-8").read().splitlines()
            if line.startswith("| ") and "scoring costs" not in line]


def main():
    start = time.monotonic()
    if not KVSLIM or not os.access(KVSLIM, os.X_OK):
        fail(f"KVSLIM_BINARY '{KVSLIM}' is not an executable kvslim")
    tmp = tempfile.mkdtemp(prefix="kvslim-claims-")
    one, s0, s1, merged = (os.path.join(tmp, d) for d in ("one-process", "shard0", "shard1", "merged"))

    # Misuses first (no model run).
    for args, message in (([*PLAN, "--shard", "0/2", "--merge", s0, "--out", merged], "give one or the other"),
                          ([*PLAN, "--shard", "2/2", "--out", s0], "shard"),
                          ([*PLAN, "--merge", os.path.join(tmp, "absent"), "--out", merged], "no such directory")):
        p = claims(*args, check=False)
        lines = p.stderr.strip().splitlines()
        if p.returncode == 0 or len(lines) != 1 or not lines[0].startswith("error:") or message not in lines[0]:
            fail(f"claims {' '.join(args[-4:])}: want one 'error: ...{message}...' line, got {p.returncode}: {p.stderr}")

    # The one-process run and both shards at once.
    def spawn(*args):
        return subprocess.Popen([KVSLIM, "claims", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = {"one-process": spawn(*PLAN, "--out", one), "0/2": spawn(*PLAN, "--shard", "0/2", "--out", s0),
            "1/2": spawn(*PLAN, "--shard", "1/2", "--out", s1)}
    outputs = {}
    for name, proc in runs.items():
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            fail(f"claims {name} failed: {err[-2000:]}")
        outputs[name] = out
    for shard, folder in (("0/2", s0), ("1/2", s1)):
        if f"claims shard {shard}:" not in outputs[shard] or "| paper |" in outputs[shard]:
            fail(f"shard {shard} should report its runs and print no table: {outputs[shard][-500:]}")
        if os.path.exists(os.path.join(folder, "claims.md")):
            fail(f"shard {shard} wrote a table")

    # A merge with a shard missing is refused; with both it runs nothing and writes the table.
    os.makedirs(os.path.join(tmp, "empty"))
    p = claims(*PLAN, "--merge", s0, os.path.join(tmp, "empty"), "--out", os.path.join(tmp, "bad"), check=False)
    if p.returncode == 0 or "error:" not in p.stderr or "samples.jsonl" not in p.stderr:
        fail(f"a merge of a folder without the sweeps should fail naming samples.jsonl: {p.stderr}")
    p = claims(*PLAN, "--merge", s0, s1, "--out", merged)
    if "runs were missing" in p.stderr:
        fail(f"the merge ran runs the shards had: {p.stderr[-1000:]}")
    for sweep in SWEEPS:
        got = read_jsonl(os.path.join(merged, sweep, "samples.jsonl"))
        parts = [read_jsonl(os.path.join(s, sweep, "samples.jsonl")) for s in (s0, s1)]
        keys = [{record_key(r) for r in part} for part in parts]
        if not keys[0] or not keys[1] or keys[0] & keys[1]:
            fail(f"{sweep}: the shards should split the samples ({len(keys[0])} and {len(keys[1])} records, "
                 f"{len(keys[0] & keys[1])} in both)")
        compare_records(got, read_jsonl(os.path.join(one, sweep, "samples.jsonl")), f"{sweep} (2 shards merged)")
    want, got = table_rows(os.path.join(one, "claims.md")), table_rows(os.path.join(merged, "claims.md"))
    if not want or got != want:
        fail("the merged claims.md differs from the one-process run's:\n" + "\n".join(
            f"- {w}\n+ {g}" for w, g in zip(want, got) if w != g))
    log(f"claims.md: {len(got)} rows, the same as the one-process run's (the scoring-time row aside)")
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"claims_shards: passed in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
