"""pystop: an example loom plugin in Python, a stopping criterion on Python regular expressions.

It ends a sequence when its generated text matches `pattern`, a Python regular expression:
unlike loom's Go (RE2) expressions these have backreferences and lookaround, so that the
default, `\\b(\\w+)\\s+\\1\\b`, stops at the first word said twice in a row ("the the"), which no
Go expression can say. Unless `include` is set, the match and what follows it are cut from the
returned text.

Config ([plugins.config]):

    pattern = '\\b(\\w+)\\s+\\1\\b'   # a Python regular expression (the re module)
    include = false                # keep the matched text in the output

build.sh packs this file with the sdk into one executable zip (pystop.pyz) that
/usr/bin/python3 runs, so that the pipeline's sha256 covers all of the plugin's code.
"""

import re

import loom_plugin


class PythonRegexStop:
    name = "python_regex"
    doc = "Stops when the generated text matches config pattern, a Python regular expression."
    # The text a match may still cut is held back from streaming (in bytes).
    hold_back = 32

    def configure(self, cfg):
        pattern = cfg.str("pattern", r"\b(\w+)\s+\1\b")
        self.include = cfg.bool("include", False)
        try:
            self.re = re.compile(pattern)
        except re.error as e:
            cfg.error("pattern", "= %r: %s" % (pattern, e))

    def check(self, seq):
        text = seq.generated_text().decode("utf-8", errors="replace")
        m = self.re.search(text)
        if m is None:
            return None
        end = len(text[: m.start()].encode("utf-8"))
        return loom_plugin.Stop("stop_python_regex", detail="matched %r" % m.group(0), cut_text=not self.include, text_end=end)


if __name__ == "__main__":
    loom_plugin.serve(PythonRegexStop())
