#!/usr/bin/env python3
"""Two `kvslim serve` replicas behind nginx (Debian's) on 127.0.0.1 with the configuration of
scripts/nginx/replicas-conf.sh: a conversation's turns (same X-Conversation-Id) reach one replica,
whose second turn prefills only its new tokens (its answer's timings and the replica's /metrics
show the reuse); conversations are spread over both replicas; with the conversation's replica
stopped the other answers its next turn, recomputed from the messages: the same answer as that
replica gives the same request from an empty slot.

Skips (exit 77) only where nginx is missing, never with CI=true."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale_common import KVSLIM, MODEL, SOURCE_DIR, exit_on_sigterm, fail, log, require_programs, skip, wait_until

TEMPLATE = os.path.join(SOURCE_DIR, "tests", "data", "chat-template.jinja")
FILLER = ("The archive lists the rooms of the old house one by one: the hall, the library, the kitchen, the "
          "garden room and the attic, each with its own key. ")
REQUEST = {"max_tokens": 8, "temperature": 0, "press": "snapkv", "budget": 32}


def http(method, url, body=None, headers=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json",
                                                                         **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def metric(base, name):
    status, _, text = http("GET", base + "/metrics")
    if status != 200:
        fail(f"{base}/metrics answered {status}")
    m = re.search(rf"^kvslim:{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    if not m:
        fail(f"{base}/metrics has no kvslim:{name}")
    return float(m.group(1))


def start_replica(tmp, name):
    log_path = os.path.join(tmp, f"{name}.log")
    proc = subprocess.Popen([KVSLIM, "serve", "-m", MODEL, "--chat-template", TEMPLATE, "--port", "0", "--threads", "1",
                             "--parallel", "1"], stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
    port = wait_until(f"replica {name} to listen", lambda: (re.findall(r"listening on http://127\.0\.0\.1:(\d+)",
                      open(log_path).read()) or [None])[0] or (proc.poll() is not None and fail(open(log_path).read())), 30)
    base = f"http://127.0.0.1:{port}"
    wait_until(f"replica {name} to be healthy", lambda: http_ok(base + "/health"), 30)
    return proc, f"127.0.0.1:{port}"


def http_ok(url):
    try:
        return http("GET", url, timeout=2)[0] == 200
    except OSError:
        return False


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    start = time.monotonic()
    exit_on_sigterm()
    require_programs("nginx")
    tmp = tempfile.mkdtemp(prefix="kvslim-nginx-")
    os.chmod(tmp, 0o755)  # nginx workers (user nobody when started as root) reach their temp files through it
    procs = []
    try:
        body(tmp, procs)
    finally:
        for p in procs:  # only the processes this test started
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"nginx_replicas: passed in {time.monotonic() - start:.1f} s")


def body(tmp, procs):
    a, addr_a = start_replica(tmp, "a")
    procs.append(a)
    b, addr_b = start_replica(tmp, "b")
    procs.append(b)
    replicas = {addr_a: a, addr_b: b}
    listen = f"127.0.0.1:{free_port()}"
    conf = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "nginx", "replicas-conf.sh"), "--listen", listen,
                           "--prefix", os.path.join(tmp, "nginx"), addr_a, addr_b], capture_output=True, text=True)
    if conf.returncode != 0:
        fail(f"replicas-conf.sh: {conf.stderr}")
    prefix = os.path.join(tmp, "nginx")
    nginx_log = open(os.path.join(tmp, "nginx.out"), "w")
    nginx = subprocess.Popen(["nginx", "-p", prefix, "-e", os.path.join(prefix, "logs", "error.log"), "-c",
                              conf.stdout.strip()], stdout=nginx_log, stderr=subprocess.STDOUT)
    procs.insert(0, nginx)
    lb = f"http://{listen}"
    wait_until("nginx to answer", lambda: http_ok(lb + "/health") or (nginx.poll() is not None and fail(
        "nginx exited: " + open(os.path.join(tmp, "nginx.out")).read() + open(os.path.join(prefix, "logs", "error.log")).read())), 20)
    log(f"replicas {addr_a} and {addr_b} behind nginx on {listen}")

    # Conversations land on both replicas, each always on the same one.
    placement = {}
    for i in range(12):
        seen = {http("GET", lb + "/health", headers={"X-Conversation-Id": f"conv-{i}"})[1]["X-Kvslim-Replica"]
                for _ in range(3)}
        if len(seen) != 1:
            fail(f"conversation conv-{i} reached several replicas: {seen}")
        placement[f"conv-{i}"] = seen.pop()
    if set(placement.values()) != {addr_a, addr_b}:
        fail(f"12 conversations all went to one replica: {placement}")
    log("12 conversation ids: " + ", ".join(f"{n} on {sum(1 for v in placement.values() if v == r)} ids"
                                           for n, r in (("replica a", addr_a), ("replica b", addr_b))))

    conv = "conv-0"
    home = placement[conv]
    other = addr_b if home == addr_a else addr_a
    headers = {"X-Conversation-Id": conv}

    def chat(base, messages, hdrs):
        status, h, text = http("POST", base + "/v1/chat/completions", {"messages": messages, **REQUEST}, hdrs)
        if status != 200:
            fail(f"chat answered {status}: {text}")
        return h, json.loads(text)

    messages = [{"role": "user", "content": FILLER * 4 + "Which room is listed first?"}]
    reused_before = metric(f"http://{home}", "prompt_tokens_reused_total")
    other_before = metric(f"http://{other}", "prompt_tokens_reused_total")
    h1, turn1 = chat(lb, messages, headers)
    if h1["X-Kvslim-Replica"] != home:
        fail(f"turn 1 went to {h1['X-Kvslim-Replica']}, not {home}")
    messages += [{"role": "assistant", "content": turn1["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "And which one is listed last?"}]
    h2, turn2 = chat(lb, messages, headers)
    if h2["X-Kvslim-Replica"] != home:
        fail(f"turn 2 went to {h2['X-Kvslim-Replica']}, not {home} (no affinity)")
    t, usage = turn2["timings"], turn2["usage"]
    p1 = turn1["usage"]["prompt_tokens"]
    log(f"turn 1: {p1} prompt tokens prefilled; turn 2: {usage['prompt_tokens']} prompt tokens, {t['cache_n']} found in "
        f"the replica's slot, {t['prompt_n']} prefilled (press {turn2['kv']['press']}, budget {turn2['kv']['budget']})")
    if t["cache_n"] < p1 or t["cache_n"] + t["prompt_n"] != usage["prompt_tokens"]:
        fail(f"turn 2 should reuse at least turn 1's {p1} prompt tokens and prefill only the rest: {t}")
    reused = metric(f"http://{home}", "prompt_tokens_reused_total") - reused_before
    if reused != t["cache_n"]:
        fail(f"replica {home}'s prompt_tokens_reused_total grew by {reused}, not by turn 2's {t['cache_n']}")
    if metric(f"http://{other}", "prompt_tokens_reused_total") != other_before:
        fail(f"replica {other} counted reuse for a conversation it never saw")
    log(f"replica {home}: prompt_tokens_reused_total +{reused:.0f}")

    # Turn 3, as the other replica computes it from an empty slot: the reference; then empty it.
    messages += [{"role": "assistant", "content": turn2["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "How many rooms are there?"}]
    _, reference = chat(f"http://{other}", messages, {})
    status, _, text = http("POST", f"http://{other}/slots/0?action=erase", {})
    if status != 200:
        fail(f"erasing slot 0 of {other}: {status} {text}")

    # The conversation's replica stops; its next turn goes to the other one, recomputed.
    replicas[home].send_signal(signal.SIGTERM)
    replicas[home].wait(timeout=20)
    h3, turn3 = chat(lb, messages, headers)
    if h3["X-Kvslim-Replica"].split(", ")[-1] != other:
        fail(f"with {home} stopped, turn 3 went to {h3['X-Kvslim-Replica']}")
    t3 = turn3["timings"]
    if t3["cache_n"] != 0 or t3["prompt_n"] != turn3["usage"]["prompt_tokens"]:
        fail(f"turn 3 on {other} should prefill the whole conversation: {t3}")
    got, want = turn3["choices"][0]["message"]["content"], reference["choices"][0]["message"]["content"]
    if got != want:
        fail(f"turn 3 recomputed on {other} answered {got!r}, not {want!r} (its answer from an empty slot)")
    log(f"{home} stopped: turn 3 answered by {other}, all {t3['prompt_n']} prompt tokens recomputed, the same answer "
        f"as from an empty slot ({got!r})")
    # And it keeps answering new conversations, whichever replica they hashed to.
    for conv_id in placement:
        if chat(lb, [{"role": "user", "content": "Hello"}], {"X-Conversation-Id": conv_id})[0]["X-Kvslim-Replica"] \
                .split(", ")[-1] != other:
            fail(f"{conv_id} was not answered by the replica still up")
    log(f"all {len(placement)} conversation ids answered by {other} while {home} is down")


if __name__ == "__main__":
    main()
