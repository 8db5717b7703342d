"""pyrepetition: an example loom plugin in Python, a repetition penalty.

Tokens seen in the last `last_n` tokens (prompt included) have positive logits divided by
`penalty` and negative ones multiplied by it. The logits are read in place from the memory
shared with loom; the changes go back as a short list of biases.

Config ([plugins.config]):

    penalty = 1.3   # > 0; 1 changes nothing
    last_n = 64     # the window; -1 the whole sequence, 0 disables (as loom's penalties)

build.sh packs this file with the sdk into one executable zip (pyrepetition.pyz) that
/usr/bin/python3 runs, so that the pipeline's sha256 covers all of the plugin's code.
"""

import math

import loom_plugin


class RepetitionPenalty:
    name = "repetition_penalty"
    doc = "Divides positive logits (multiplies negative ones) of recent tokens by penalty."
    needs = loom_plugin.NEEDS_LOGITS

    def configure(self, cfg):
        self.penalty = cfg.float("penalty", 1.3)
        self.last_n = cfg.int("last_n", 64)
        if not self.penalty > 0:
            cfg.error("penalty", "= %s: must be positive" % self.penalty)
        if self.last_n < -1:
            cfg.error("last_n", "= %s: must be >= -1 (-1: the whole sequence, 0 disables)" % self.last_n)

    def process(self, seq, cands):
        if self.last_n == 0:
            return
        window = seq.tokens[-self.last_n:] if self.last_n > 0 else seq.tokens
        for token in set(window):
            v = cands.logit(token)
            if v is None or math.isinf(v):
                continue
            new = v / self.penalty if v > 0 else v * self.penalty
            cands.add_bias(token, new - v)


if __name__ == "__main__":
    loom_plugin.serve(RepetitionPenalty())
