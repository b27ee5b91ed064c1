"""Shared helpers of the scale-out tests (tests/scale/*_test.py): where kvslim and the model are,
skipping (only outside CI) when the machine cannot run a test's daemons, bounded waits, and the
results comparison."""
import json
import os
import shutil
import signal
import sys
import time

SKIP = 77  # CTest's SKIP_RETURN_CODE for these tests
IN_CI = os.environ.get("CI") == "true"
KVSLIM = os.environ.get("KVSLIM_BINARY", "")
SOURCE_DIR = os.environ.get("KVSLIM_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODEL = os.path.join(SOURCE_DIR, "models", "kvslim-small.gguf")
TIMING_FIELDS = {"prefill_ms", "score_ms", "decode_ms"}  # wall times: differ between any two runs


def log(message):
    print(message, flush=True)


def skip(message):
    """A prerequisite this machine lacks: a skip, except in CI, where it is a failure."""
    if IN_CI:
        log(f"error: {message} (CI=true: a missing prerequisite fails the test)")
        sys.exit(1)
    log(f"SKIPPED: {message}")
    sys.exit(SKIP)


def fail(message):
    log(f"FAILED: {message}")
    sys.exit(1)


def require_programs(*names):
    missing = [n for n in names if not (shutil.which(n) or os.access(f"/usr/sbin/{n}", os.X_OK))]
    if missing:
        skip(f"{', '.join(missing)} not found (Debian packages; scripts/install-deps.sh installs them)")
    if not KVSLIM or not os.access(KVSLIM, os.X_OK):
        fail(f"KVSLIM_BINARY '{KVSLIM}' is not an executable kvslim")


def wait_until(what, predicate, timeout, interval=0.1):
    """Polls predicate() until it is truthy (returned) or timeout seconds pass (a failure)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def read_jsonl(path):
    """The complete lines of a samples.jsonl (an unterminated last line is a write in progress)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


def record_key(r):
    return (r["method"], r["budget"], r["task"], r["length"], r["depth"], r["seed"], r["protocol"])


def without_timings(r):
    return {k: v for k, v in r.items() if k not in TIMING_FIELDS}


def compare_records(got, want, what):
    """Record for record (order aside, wall times aside): the same keys once each, equal fields."""
    keys = [record_key(r) for r in got]
    if len(keys) != len(set(keys)):
        dups = sorted({k for k in keys if keys.count(k) > 1})
        fail(f"{what}: duplicate records {dups[:3]}")
    got_by = {record_key(r): without_timings(r) for r in got}
    want_by = {record_key(r): without_timings(r) for r in want}
    if set(got_by) != set(want_by):
        fail(f"{what}: records differ: missing {sorted(set(want_by) - set(got_by))[:3]}, "
             f"extra {sorted(set(got_by) - set(want_by))[:3]}")
    for k, r in want_by.items():
        if got_by[k] != r:
            diff = {f: (got_by[k].get(f), r.get(f)) for f in r if got_by[k].get(f) != r.get(f)}
            fail(f"{what}: record {k} differs from the one-process run: {diff}")
    log(f"{what}: {len(got)} records, each equal to the one-process run's (wall times aside)")


def exit_on_sigterm():
    """SIGTERM (a runner stopping the test) raises SystemExit, so that the test's finally stops its daemons."""
    def handler(signum, frame):
        log("FAILED: stopped by SIGTERM")
        sys.exit(1)
    signal.signal(signal.SIGTERM, handler)
