"""kvslim for Python: long-context inference on the CPU with a KV cache that really shrinks.

    import kvslim
    model = kvslim.Model("models/kvslim-4k.gguf")
    r = model.generate("...", max_tokens=32, press="snapkv", budget=128)
    print(r.text, r.kv_bytes_final, r.kept_tokens)

docs/python.md is the reference.
"""

import json as _json

from . import _kvslim
from ._kvslim import Error, GenerateResult, TurnStats
from .evaluation import eval
from .model import Model
from .press import Press, ScorerPress
from .session import Session


def _catalogue():
    return {p["name"]: p for p in _json.loads(_kvslim._presses_json())}


presses = _catalogue()
"""Every registered method by name: its description, options (key, default, help) and what it
can do (block-wise eviction, budget rule, adakv wrapping, multi-turn rule), as `kvslim presses
--json` prints them."""


def system_info():
    """The CPU, the instruction-set level chosen and the kernel of each weight and KV type, as
    `kvslim info --system` prints them."""
    return _json.loads(_kvslim._system_json())


__all__ = ["Model", "Session", "Press", "ScorerPress", "presses", "eval", "system_info", "Error", "GenerateResult",
           "TurnStats"]
