"""Compression methods written in Python, run by the engine with real per-head eviction.

Subclass ScorerPress and write score(): one number per cached token of each KV head of a layer
(higher keeps). The engine calls it once per layer at the end of prefill, keeps each head's top
`budget` tokens and frees the rest, exactly as for its built-in scorers. Subclass Press and write
select() to choose the kept indices yourself.

Arguments (NumPy float32 arrays):
  layer      the layer index
  keys       [kv_heads, tokens, head_dim]: the cached keys (after RoPE), in cache order
  values     [kv_heads, tokens, head_dim]
  queries    [heads, window, head_dim]: the last `window` prompt queries (after RoPE)
  attention  [heads, window, tokens]: their softmax rows (zero where a query cannot see), or
             None when the class sets wants_attention = False
queries and attention are read-only views of the engine's buffers (no copy); keys and values
are gathered from the cache pages into new arrays (pages store f16 by default). In a later turn
of a Session, heads may hold different counts: `tokens` is the largest, shorter heads are padded
with zeros and the scores of the padding are ignored.
"""


class Press:
    """A method that chooses the kept tokens itself: override select()."""

    _kvslim_press_kind = "select"
    window = 32  # observation window: the last `window` prompt queries
    wants_attention = True  # collect the window's attention rows (memory: layers x heads x window x prompt floats)

    def select(self, layer, keys, values, queries, attention, budget):
        """Return, per KV head, the ascending cache indices to keep (at most `budget` each)."""
        raise NotImplementedError(f"{type(self).__name__} must define select()")

    def __repr__(self):
        return f"{type(self).__name__}(window={self.window})"


class ScorerPress(Press):
    """A method that scores tokens: override score(); the engine keeps each head's top `budget`."""

    _kvslim_press_kind = "scorer"

    def score(self, layer, keys, values, queries, attention):
        """Return scores of shape [kv_heads, tokens]; higher means keep."""
        raise NotImplementedError(f"{type(self).__name__} must define score()")
