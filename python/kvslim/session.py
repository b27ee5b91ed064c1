"""kvslim.Session: one compressed KV cache driven turn by turn or token by token."""

import os

from . import _kvslim
from ._options import compression, sampling


class Session:
    """A KV cache with a method that lives across calls.

    prefill(tokens) runs tokens as a turn after everything cached (the method selects at its
    end, as `kvslim chat` does for each message); decode() feeds one token; turn(text) runs a
    message and samples its answer. press, budget, ratio, prefill_evict and the method's options
    as in Model.generate; max_tokens bounds each answer (the method plans for it); sampling
    settings left at None keep `kvslim generate`'s defaults.

    A press that raises inside prefill leaves the session empty (its history is dropped; the
    model and other sessions are untouched) and the exception reaches the caller.
    """

    def __init__(self, model, press=None, budget=None, *, ratio=None, prefill_evict="end", max_tokens=128,
                 temperature=None, top_k=None, top_p=None, min_p=None, repeat_penalty=None, repeat_last_n=None,
                 seed=None, **press_options):
        self.model = model
        s = sampling(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                     repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, seed=seed)
        self._s = _kvslim._Session(model._m, compression(model, press, budget, ratio, prefill_evict, press_options), s,
                                   max_tokens)

    @classmethod
    def load(cls, model, path, *, max_tokens=128, temperature=None, top_k=None, top_p=None, min_p=None,
             repeat_penalty=None, repeat_last_n=None, seed=None):
        """A session from a KV file (`kvslim generate --save-kv`, `chat /save`, Session.save):
        its method, options and budget come from the file."""
        session = cls.__new__(cls)
        session.model = model
        s = sampling(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                     repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, seed=seed)
        session._s = _kvslim._Session.load(model._m, os.fspath(path), s, max_tokens)
        return session

    def prefill(self, tokens):
        """Runs token ids (or text, tokenized with BOS only when nothing is cached) as a turn."""
        if isinstance(tokens, str):
            tokens = self.model.tokenize(tokens, add_bos=None if not self.history else False)
        self._s.prefill(list(tokens))

    def decode(self, token=None):
        """Feeds `token`, or a token sampled from `logits` with the session's settings; returns it."""
        return self._s.decode(token)

    def turn(self, text, max_tokens=None):
        """Runs `text` as a turn and returns the answer's text (up to max_tokens)."""
        return self._s.turn(text, max_tokens)

    @property
    def logits(self):
        """The last token's logits: a read-only NumPy view of the engine's buffer (no copy),
        overwritten by the next prefill or decode; copy it to keep it."""
        return self._s.logits

    def kept_positions(self):
        """Per layer, per KV head: the original positions of the tokens the cache holds."""
        return self._s.kept_positions()

    kv_bytes = property(lambda self: self._s.kv_bytes, doc="KV bytes in use")
    history = property(lambda self: self._s.history, doc="every token seen or said, in order")
    n_past = property(lambda self: self._s.n_past, doc="tokens run through the model")
    last_turn = property(lambda self: self._s.last_turn, doc="what the last turn did (TurnStats)")
    press = property(lambda self: self._s.press, doc="the method's name")

    def save(self, path):
        """Writes the session as a KV file (atomically: an existing file is never half-written)."""
        self._s.save(os.fspath(path))

    def reset(self):
        """Forgets everything cached (the method stays)."""
        self._s.reset()
