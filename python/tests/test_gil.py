"""The engine releases the GIL: another Python thread keeps running while generate works."""

import threading

from conftest import LONG_PROMPT


def test_second_thread_runs_during_generate(model):
    counts = {"during": 0}
    inside = threading.Event()
    done = threading.Event()

    def count():
        while not done.is_set():
            if inside.is_set():
                counts["during"] += 1

    worker = threading.Thread(target=count)
    worker.start()
    try:
        inside.set()
        # Long enough (a prefill of about 950 tokens and up to 400 decode steps) for many
        # switches had the GIL been kept: Python switches threads only every 5 ms while it holds it.
        r = model.generate(LONG_PROMPT, max_tokens=400, temperature=0)
        inside.clear()
    finally:
        done.set()
        worker.join()
    assert r.tokens
    # With the GIL held for the whole call the counter could not move at all during it.
    assert counts["during"] > 10000
