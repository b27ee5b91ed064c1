#!/usr/bin/env python3
"""A sweep as a Slurm job array on a real one-node cluster (Debian's slurm-wlm and munge, on
127.0.0.1, under a temporary folder): scripts/slurm/submit.sh submits it as 4 shards plus the
dependent merge job; one shard is cancelled mid-way (scancel), which also drops the merge (its
dependency can no longer be met); resubmitting that shard finishes it without duplicates, and
the merged records equal a one-process run of the same sweep record for record.

Skips (exit 77) only where the daemons cannot run here, never with CI=true."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_common import (KVSLIM, exit_on_sigterm, MODEL, SOURCE_DIR, compare_records, fail, log, read_jsonl, record_key,
                          require_programs, skip, wait_until)

SHARDS = 4
# 8 samples (2 per shard) x 4 methods: 8 records per shard, about 1 s of work each.
SWEEP = ["-m", MODEL, "--methods", "full,snapkv,tova,h2o", "--budgets", "64", "--tasks", "passkey",
         "--lengths", "1024", "--samples", "8"]
PER_SHARD = 8
DEADLINE = time.monotonic() + 100  # everything, cleanup included, well inside CTest's timeout


def remaining(cap):
    return max(1.0, min(cap, DEADLINE - time.monotonic()))


def run(cmd, env, check=True, timeout=60):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=remaining(timeout))
    if check and p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return p


def main():
    start = time.monotonic()
    exit_on_sigterm()
    require_programs("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo")
    tmp = tempfile.mkdtemp(prefix="kvslim-slurm-", dir="/tmp")  # short: the munge socket lives there
    cluster = os.path.join(tmp, "cluster")
    env = dict(os.environ, SLURM_CONF=os.path.join(cluster, "slurm.conf"))
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin"
    local_cluster = os.path.join(SOURCE_DIR, "scripts", "slurm", "local-cluster.sh")
    submit = os.path.join(SOURCE_DIR, "scripts", "slurm", "submit.sh")

    # The one-process run of the same sweep, meanwhile (one thread, as each array task has one CPU).
    ref_dir = os.path.join(tmp, "one-process")
    reference = subprocess.Popen([KVSLIM, "eval", *SWEEP, "--threads", "1", "--out", ref_dir],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = subprocess.run([local_cluster, "start", cluster], env=env, capture_output=True, text=True, timeout=60)
    try:
        if started.returncode == 2:
            skip(started.stderr.strip())
        if started.returncode != 0:
            skip(f"this machine could not run a one-node Slurm cluster:\n{started.stderr}")
        log(f"cluster up in {time.monotonic() - start:.1f} s: {started.stdout.strip()}")
        body(env, submit, tmp, reference, ref_dir)
    finally:
        # Jobs first (their processes belong to slurmd's job steps), then the daemons.
        subprocess.run(["scancel", "--full", "--quiet", "--user", str(os.getuid())], env=env, capture_output=True,
                       timeout=20)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            q = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True, timeout=10)
            if q.returncode != 0 or not q.stdout.strip():
                break
            time.sleep(0.2)
        subprocess.run([local_cluster, "stop", cluster], env=env, timeout=60)
        if reference.poll() is None:
            reference.kill()
    shutil.rmtree(tmp, ignore_errors=True)  # kept when the test fails (sys.exit skips this), to look into
    log(f"slurm_sweep: passed in {time.monotonic() - start:.1f} s")


def job_state(env, job):
    p = run(["scontrol", "-o", "show", "job", job], env, check=False)
    m = re.search(r"JobState=(\S+)", p.stdout)
    return m.group(1) if m else "GONE"


def queue_empty(env):
    return not run(["squeue", "-h"], env).stdout.strip()


def body(env, submit, tmp, reference, ref_dir):
    out = os.path.join(tmp, "sweep")
    p = run([submit, "--shards", str(SHARDS), "--out", out, "--kvslim", KVSLIM, "--", "eval", *SWEEP], env)
    log(p.stdout.strip())
    array_id = re.search(r"ARRAY_JOB_ID=(\d+)", p.stdout).group(1)
    merge_id = re.search(r"MERGE_JOB_ID=(\d+)", p.stdout).group(1)
    if "afterok" not in run(["scontrol", "-o", "show", "job", merge_id], env).stdout:
        fail(f"merge job {merge_id} does not depend on the array (afterok)")

    # Cancel a shard mid-way: once its samples.jsonl has a record and before it has them all. A
    # shard that finished first anyway is passed over for the next one.
    killed = None
    for task in (3, 2, 1, 0):
        path = os.path.join(out, "shards", str(task), "samples.jsonl")
        if os.path.exists(os.path.join(out, "shards", str(task), "done")):
            continue
        wait_until(f"shard {task}'s first record", lambda: len(read_jsonl(path)) >= 1 or
                   os.path.exists(os.path.join(out, "shards", str(task), "done")), remaining(40), 0.02)
        run(["scancel", f"{array_id}_{task}"], env)
        wait_until(f"shard {task} to stop", lambda: job_state(env, f"{array_id}_{task}") not in ("RUNNING", "PENDING",
                   "COMPLETING"), remaining(20))
        state = job_state(env, f"{array_id}_{task}")
        lines = len(read_jsonl(path))
        if state == "CANCELLED" and lines < PER_SHARD and not os.path.exists(os.path.join(out, "shards", str(task), "done")):
            killed = (task, lines)
            break
        log(f"shard {task} finished before the cancel took ({state}, {lines} records): trying another")
    if killed is None:
        fail("no shard could be cancelled mid-way: every one finished first")
    task, lines = killed
    log(f"cancelled shard {task} mid-way: {lines} of {PER_SHARD} records written")

    # The others finish; the merge job is dropped, its dependency never to be met.
    wait_until("the other shards and the dropped merge job", lambda: queue_empty(env), remaining(60), 0.2)
    for other in range(SHARDS):
        if other != task and not os.path.exists(os.path.join(out, "shards", str(other), "done")):
            fail(f"shard {other} did not finish: {open(os.path.join(out, 'slurm', f'shard-{other}.log')).read()}")
    if job_state(env, merge_id) == "COMPLETED" or os.path.exists(os.path.join(out, "merged")):
        fail("the merge ran although a shard was cancelled")
    log(f"first merge job {merge_id}: {job_state(env, merge_id)} (a shard was cancelled)")

    # Resubmit the cancelled shard (and a new merge).
    p = run([submit, "--shards", str(SHARDS), "--out", out, "--kvslim", KVSLIM, "--tasks", str(task), "--",
             "eval", *SWEEP], env)
    log(p.stdout.strip())
    merge2 = re.search(r"MERGE_JOB_ID=(\d+)", p.stdout).group(1)
    wait_until("the resubmitted shard and the merge", lambda: queue_empty(env), remaining(60), 0.2)
    if job_state(env, merge2) != "COMPLETED":
        fail(f"merge job {merge2} ended {job_state(env, merge2)}:\n" + open(os.path.join(out, "slurm", "merge.log")).read())
    shard_log = open(os.path.join(out, "slurm", f"shard-{task}.log")).read()
    m = re.findall(r"eval: (\d+) runs done, (\d+) already", shard_log)
    if not m or int(m[-1][1]) != lines or int(m[-1][0]) != PER_SHARD - lines:
        fail(f"the resubmitted shard should skip its {lines} finished runs and run the other {PER_SHARD - lines}: {m}")
    log(f"resubmitted shard {task}: ran {m[-1][0]}, skipped {m[-1][1]} already done")
    shard_records = read_jsonl(os.path.join(out, "shards", str(task), "samples.jsonl"))
    keys = [record_key(r) for r in shard_records]
    if len(keys) != len(set(keys)) or len(keys) != PER_SHARD:
        fail(f"shard {task} holds {len(keys)} records, {len(set(keys))} distinct (want {PER_SHARD}, no duplicates)")

    # The merged results against the one-process run.
    try:
        reference.wait(timeout=remaining(60))
    except subprocess.TimeoutExpired:
        fail("the one-process run did not finish in time")
    if reference.returncode != 0:
        fail(f"the one-process run failed: {reference.stderr.read()}")
    merged = os.path.join(out, "merged")
    compare_records(read_jsonl(os.path.join(merged, "samples.jsonl")), read_jsonl(os.path.join(ref_dir, "samples.jsonl")),
                    "merged shards")
    for f in ("summary.csv", "summary.md"):
        if not os.path.getsize(os.path.join(merged, f)):
            fail(f"merged/{f} is empty")
    plots = [f for f in os.listdir(os.path.join(merged, "plots")) if f.endswith(".svg")]
    if not plots:
        fail("the merge job wrote no plots")
    log(f"merged: samples.jsonl, summary.csv, summary.md, plots/ ({len(plots)} SVG)")


if __name__ == "__main__":
    main()
