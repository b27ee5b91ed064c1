"""kvslim.Model: a GGUF file loaded once, generating and chatting with any compression method."""

import os
import queue
import threading
import time
import uuid

from . import _kvslim
from ._options import compression, sampling


class Model:
    """A GGUF model with its thread pool.

    threads: 0 uses every core. ctx: the most tokens a session may hold (prompt + answer).
    batch: prefill block size. kv_page: tokens per KV page of one head. cache_type_k/v: the
    stored type of the KV pages (f32, f16, bf16, q8_0), as --cache-type-k/-v.
    One engine call runs at a time per Model; calls release the GIL while they compute.
    """

    def __init__(self, path, threads=0, ctx=4096, batch=512, kv_page=256, cache_type_k="f16", cache_type_v="f16"):
        self.path = os.fspath(path)
        self._m = _kvslim._Model(self.path, threads, ctx, batch, kv_page, cache_type_k, cache_type_v)

    n_vocab = property(lambda self: self._m.n_vocab)
    n_layers = property(lambda self: self._m.n_layers)
    n_heads = property(lambda self: self._m.n_heads)
    n_kv_heads = property(lambda self: self._m.n_kv_heads)
    head_dim = property(lambda self: self._m.head_dim)
    ctx = property(lambda self: self._m.ctx)
    threads = property(lambda self: self._m.threads)

    def tokenize(self, text, add_bos=None, special=True):
        """Token ids of `text`; add_bos None follows the tokenizer's own setting."""
        return self._m.tokenize(text, add_bos, special)

    def detokenize(self, tokens, special=False):
        """The text of `tokens` (special tokens rendered when special=True)."""
        return self._m.detokenize(list(tokens), special)

    def generate(self, prompt, max_tokens=128, *, temperature=None, top_k=None, top_p=None, min_p=None,
                 repeat_penalty=None, repeat_last_n=None, seed=None, press=None, budget=None, ratio=None,
                 prefill_evict="end", add_bos=None, special=True, on_token=None, **press_options):
        """Prefill `prompt` (text or token ids) with the method, then sample up to max_tokens.

        The same path and defaults as `kvslim generate`: with the same settings .text is what it
        prints. press: a method name ("snapkv", "adakv:tova"), a kvslim.Press instance or None;
        budget (tokens kept per layer and KV head) or ratio (share of the prompt evicted);
        further keyword arguments are the method's options (window=16 is --press-opt window=16).
        on_token(piece) receives each token's text as it is sampled.
        """
        s = sampling(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                     repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, seed=seed)
        c = compression(self, press, budget, ratio, prefill_evict, press_options)
        return self._m._generate(prompt, max_tokens, s, c, add_bos, special, on_token)

    def create_chat_completion(self, messages, max_tokens=128, *, temperature=None, top_k=None, top_p=None,
                               min_p=None, repeat_penalty=None, repeat_last_n=None, seed=None, press=None,
                               budget=None, ratio=None, prefill_evict="end", chat_template=None, stream=False,
                               **press_options):
        """An OpenAI-shaped chat completion (as llama-cpp-python returns): the messages rendered
        with the model's chat template (or the Jinja file chat_template), answered with the
        method. stream=True returns an iterator of chat.completion.chunk dicts instead."""
        s = sampling(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                     repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, seed=seed)
        c = compression(self, press, budget, ratio, prefill_evict, press_options)
        args = (list(messages), max_tokens, s, c, os.fspath(chat_template) if chat_template else "")
        ident = "chatcmpl-" + uuid.uuid4().hex
        created = int(time.time())
        name = os.path.basename(self.path)
        if stream:
            return self._stream_chat(args, ident, created, name)
        r = self._m._chat(*args, None)
        message = {"role": "assistant", "content": r["text"]}
        if r["reasoning"]:
            message["reasoning_content"] = r["reasoning"]  # gpt-oss's analysis channel, as llama.cpp names it
        return {
            "id": ident,
            "object": "chat.completion",
            "created": created,
            "model": name,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": _finish_reason(r["stop_reason"])}],
            "usage": _usage(r),
            "kv": _kv(c, r),
        }

    def _stream_chat(self, args, ident, created, name):
        # The answer runs on a worker thread (the GIL released while the engine computes); its
        # pieces come through a queue as they are sampled.
        pieces = queue.Queue()
        outcome = {}

        def run():
            try:
                outcome["result"] = self._m._chat(*args, pieces.put)
            except BaseException as error:  # handed to the consumer below
                outcome["error"] = error
            finally:
                pieces.put(None)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()

        def chunk(delta, finish_reason=None, **extra):
            return dict({"id": ident, "object": "chat.completion.chunk", "created": created, "model": name,
                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}, **extra)

        def chunks():
            yield chunk({"role": "assistant", "content": ""})
            while (piece := pieces.get()) is not None:
                yield chunk({"content": piece})
            worker.join()
            if "error" in outcome:
                raise outcome["error"]
            r = outcome["result"]
            yield chunk({}, _finish_reason(r["stop_reason"]), usage=_usage(r), kv=_kv(args[3], r))

        return chunks()


def _finish_reason(stop_reason):
    return "stop" if stop_reason == "eos" else "length"


def _usage(r):
    return {"prompt_tokens": r["prompt_tokens"], "completion_tokens": r["completion_tokens"],
            "total_tokens": r["prompt_tokens"] + r["completion_tokens"]}


def _kv(c, r):
    return {"press": c.press, "kept_tokens": r["kept_tokens"], "bytes_final": r["kv_bytes"],
            "prefill_ms": r["prefill_ms"], "decode_ms": r["decode_ms"]}
