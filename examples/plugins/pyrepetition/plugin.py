"""pyrepetition: an example loom plugin in Python, a repetition penalty.

Tokens seen in the last `last_n` tokens (prompt included) have positive logits divided by
`penalty` and negative ones multiplied by it: loom's built-in repetition_penalty with
scope = "all", computed to the same float32 results. The logits are read and rewritten in
place in the memory shared with loom; a sparse row (after a top-k, say) gets the changes back
as a short list of biases instead.

Config ([plugins.config]):

    penalty = 1.3   # > 0; 1 changes nothing
    last_n = 64     # the window; -1 the whole sequence, 0 disables (as loom's penalties)

build.sh packs this file with the sdk into one executable zip (pyrepetition.pyz) that
/usr/bin/python3 runs, so that the pipeline's sha256 covers all of the plugin's code.
"""

import math
import struct

import loom_plugin


def float32(x):
    """x rounded to the nearest float32, the precision loom's logits have."""
    return struct.unpack("f", struct.pack("f", x))[0]


class RepetitionPenalty:
    name = "repetition_penalty"
    doc = "Divides positive logits (multiplies negative ones) of recent tokens by penalty."
    needs = loom_plugin.NEEDS_LOGITS

    def configure(self, cfg):
        self.penalty = cfg.float("penalty", 1.3)
        self.last_n = cfg.int("last_n", 64)
        if not 0 < self.penalty < math.inf:
            cfg.error("penalty", "= %s: must be positive and finite" % self.penalty)
        else:
            try:
                # loom holds the penalty as a float32: round it the same way.
                self.penalty = float32(self.penalty)
            except OverflowError:
                cfg.error("penalty", "= %s: too large for a float32" % self.penalty)
        if self.last_n < -1:
            cfg.error("last_n", "= %s: must be >= -1 (-1: the whole sequence, 0 disables)" % self.last_n)

    def penalise(self, v):
        # One rounding to float32 of the exact quotient or product, as loom's float32
        # arithmetic does (a double's 53 bits leave no double-rounding error here).
        return float32(v / self.penalty if v > 0 else v * self.penalty)

    def process(self, seq, cands):
        if self.last_n == 0:
            return
        window = seq.tokens[-self.last_n:] if self.last_n > 0 else seq.tokens
        if not window or self.penalty == 1:
            return
        dense = cands.dense
        for token in set(window):
            v = cands.logit(token)
            if v is None or math.isinf(v):
                continue
            if dense is not None:
                dense[token] = self.penalise(v)
            else:
                cands.add_bias(token, self.penalise(v) - v)


if __name__ == "__main__":
    loom_plugin.serve(RepetitionPenalty())
