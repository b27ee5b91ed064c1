"""Turning keyword arguments into the engine's sampling and compression settings."""

from . import _kvslim

SAMPLING_KEYS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "seed")


def sampling(**given):
    """The sampler's settings; a key left at None keeps `kvslim generate`'s default."""
    s = _kvslim._Sampling()
    for key, value in given.items():
        if key not in SAMPLING_KEYS:
            raise TypeError(f"unknown sampling setting {key!r}")
        if value is not None:
            setattr(s, key, value)
    s.validate()
    return s


def compression(model, press, budget, ratio, prefill_evict, press_options):
    """The method: a registry name (str), a kvslim.Press instance or None (the full cache);
    lookaheadkv takes the adapter beside the model's file unless adapter= names one."""
    return _kvslim._Compression(press, budget, ratio, prefill_evict, dict(press_options), model.path)
