"""loom_plugin: write loom logits processors and stopping criteria in Python.

A processor is an object with a ``name``, optionally ``needs``, ``doc``, ``configure(cfg)``
and ``use_vocabulary(vocab)``, and a ``process(seq, cands)`` method; ``serve`` runs it as a
loom plugin (hashicorp/go-plugin over gRPC, the same protocol as the Go sdk)::

    import loom_plugin

    class BanDigits:
        name = "ban_digits"
        needs = loom_plugin.NEEDS_HISTORY

        def process(self, seq, cands):
            for token in (5, 6, 7):
                cands.ban(token)

    loom_plugin.serve(BanDigits())

A stopping criterion has a ``check(seq)`` method instead, called after every generated token;
it returns None to go on, or a ``Stop`` (or just a reason string) to end the sequence.
``hold_back`` (a class attribute: it is read before ``configure``) is how many bytes of text
loom holds back from streaming while a stop may still cut them::

    class ThreeSentences:
        name = "three_sentences"

        def check(self, seq):
            text = seq.generated_text()
            if text.count(b".") >= 3:
                return loom_plugin.Stop("stop_sentences", detail="3 sentences")

    loom_plugin.serve(ThreeSentences())

One plugin may serve several parts of both kinds: ``serve(BanDigits(), ThreeSentences())``.

It needs Debian's python3-grpcio and python3-protobuf, and the generated modules beside this
file (sdk/proto/generate.sh makes them). See docs/plugins.md in the loom repository.
"""

import json
import math
import mmap
import os
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

import go_plugin_pb2
import go_plugin_pb2_grpc
import health_pb2
import health_pb2_grpc
import loom_plugin_pb2 as pb
import loom_plugin_pb2_grpc as pbg

PROTOCOL_VERSION = 1
COOKIE_KEY = "LOOM_PLUGIN"
COOKIE_VALUE = "d6f1c0de-loom-decoding-plugin"
MAX_MESSAGE = 1 << 30

NEEDS_LOGITS = ("logits", 0)
NEEDS_HISTORY = ("history", 0)


def needs_top(n):
    """The processor reads only the n most likely candidates (the host drops the rest)."""
    return ("top", max(int(n), 1))


_stderr = sys.stderr


def log(level, message, **fields):
    """Logs a line that loom shows under the plugin's name at level (trace … error)."""
    entry = {"@level": level, "@message": str(message), "@timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    entry.update({k: v if isinstance(v, (int, float, str, bool)) or v is None else str(v) for k, v in fields.items()})
    _stderr.write(json.dumps(entry) + "\n")
    _stderr.flush()


class Config:
    """The plugin's [plugins.config] table with typed getters; problems name their key."""

    def __init__(self, values, plugin_name=""):
        self.values = values
        self.plugin_name = plugin_name
        self.errors = []
        self._read = set()

    def has(self, key):
        return key in self.values

    def error(self, key, message):
        self.errors.append((key, message))

    def _get(self, key, default, kinds, want):
        self._read.add(key)
        if key not in self.values:
            return default
        v = self.values[key]
        if isinstance(v, bool) and bool not in kinds:
            ok = False
        else:
            ok = isinstance(v, kinds)
        if not ok:
            self.error(key, "= %s: must be %s" % (json.dumps(v), want))
            return default
        return v

    def str(self, key, default=""):
        return self._get(key, default, (str,), "a string")

    def bool(self, key, default=False):
        return self._get(key, default, (bool,), "true or false")

    def float(self, key, default=0.0):
        return float(self._get(key, default, (int, float), "a number"))

    def int(self, key, default=0):
        v = self._get(key, default, (int, float), "an integer")
        if v != int(v):
            self.error(key, "= %s: must be an integer" % v)
            return default
        return int(v)

    def list(self, key, default=None):
        return self._get(key, default, (list,), "a list")

    def unread(self):
        return sorted(k for k in self.values if k not in self._read)


class Vocabulary:
    def __init__(self, msg):
        self.size = msg.size
        self.tokens = list(msg.tokens)
        self.bos, self.eos = msg.bos, msg.eos
        self.end_of_generation = list(msg.end_of_generation)


class Sequence:
    """One sequence at one step: tokens (prompt and generated), prompt_len, and text (bytes):
    the generated text so far, as loom streams it (the prompt's text is not included)."""

    def __init__(self, index, tokens, prompt_len, text):
        self.index, self.tokens, self.prompt_len, self.text = index, tokens, prompt_len, text

    def generated(self):
        """The generated tokens."""
        return self.tokens[self.prompt_len:]

    def generated_text(self):
        """The generated text (bytes)."""
        return self.text


class Stop:
    """A stopping criterion's verdict: the sequence ends with finish reason ``reason`` (say
    "stop_sentences") and ``detail``. With ``cut_text`` the returned text ends at byte
    ``text_end`` of the generated text (to drop a stop marker)."""

    def __init__(self, reason, detail="", cut_text=False, text_end=0):
        if not reason:
            raise ValueError("a Stop needs a reason")
        self.reason, self.detail, self.cut_text, self.text_end = str(reason), str(detail), bool(cut_text), int(text_end)


class Candidates:
    """The next-token logits of one sequence.

    ``logit(id)`` reads one logit (None when absent); ``ban(id)`` and ``add_bias(id, d)`` are
    sent back as a short list. ``dense`` (a writable float view over the whole vocabulary, or
    None when the row is sparse or not sent) may be written in place; using it makes the host
    read the whole row back. ``items()`` lists (id, logit) pairs.
    """

    def __init__(self, dense=None, items=None, has_logits=True):
        self._dense = dense
        self._items = items
        self.has_logits = has_logits
        self.dense_changed = False
        self.edit_ids, self.edit_deltas = [], []
        self._index = None

    @property
    def dense(self):
        if self._dense is not None:
            self.dense_changed = True
        return self._dense

    def logit(self, token):
        if self._dense is not None:
            return self._dense[token] if 0 <= token < len(self._dense) else None
        if self._items is None:
            return None
        if self._index is None:
            self._index = {t: i for i, (t, _) in enumerate(self._items)}
        i = self._index.get(token)
        return None if i is None else self._items[i][1]

    def items(self):
        if self._dense is not None:
            return list(enumerate(self._dense))
        return list(self._items or [])

    def add_bias(self, token, delta):
        self.edit_ids.append(int(token))
        self.edit_deltas.append(float(delta))

    def ban(self, token):
        self.add_bias(token, -math.inf)


class _Region:
    def __init__(self, fd):
        self.fd, self.mm, self.view, self.size = fd, None, None, 0

    def ensure(self, size):
        if size > self.size:
            self.mm = mmap.mmap(self.fd, size)  # the old mapping is left to the collector
            self.view = memoryview(self.mm)
            self.size = size

    def floats(self, off, n):
        return self.view[off:off + 4 * n].cast("f")

    def ints(self, off, n):
        return self.view[off:off + 4 * n].cast("i")

    def raw(self, off, n):
        return self.view[off:off + n]


class _PluginServicer(pbg.PluginServicer):
    def __init__(self, parts):
        self.parts = parts
        fd = os.environ.get("LOOM_SHM_FD")
        self.region = None
        if fd:
            try:
                os.fstat(int(fd))
                self.region = _Region(int(fd))
            except (OSError, ValueError):
                pass

    def Describe(self, request, context):
        reply = pb.DescribeReply(shared_memory=self.region is not None, sdk="loom-sdk-python/1")
        for p in self.parts:
            if _is_stopping(p):
                hold = max(int(getattr(p, "hold_back", 0)), 0)
                reply.parts.add(kind=pb.KIND_STOPPING, name=p.name, doc=getattr(p, "doc", ""), hold_back=hold)
                continue
            kind, n = getattr(p, "needs", NEEDS_LOGITS)
            needs = {"logits": pb.NEEDS_LOGITS, "top": pb.NEEDS_TOP, "history": pb.NEEDS_HISTORY}[kind]
            reply.parts.add(kind=pb.KIND_PROCESSOR, name=p.name, doc=getattr(p, "doc", ""), needs=needs, top_n=n)
        return reply

    def Configure(self, request, context):
        values = json.loads(request.config_json or b"{}")
        cfg = Config(values, request.plugin_name)
        configurable = False
        for p in self.parts:
            if hasattr(p, "configure"):
                configurable = True
                try:
                    p.configure(cfg)
                except Exception as e:  # a part's bug is a configuration error, not a crash
                    cfg.error("", "%s: %s" % (p.name, e))
        for k in cfg.unread():
            cfg.error(k, "unknown key" if configurable else "unknown key: this plugin takes no configuration")
        return pb.ConfigureReply(errors=[pb.ConfigError(key=k, message=m) for k, m in cfg.errors])

    def SetVocabulary(self, request, context):
        vocab = Vocabulary(request)
        for p in self.parts:
            if hasattr(p, "use_vocabulary"):
                try:
                    p.use_vocabulary(vocab)
                except Exception as e:
                    return pb.VocabularyReply(error="%s: %s" % (p.name, e))
        return pb.VocabularyReply()

    def Steps(self, request_iterator, context):
        for req in request_iterator:
            reply = pb.StepReply(id=req.id)
            try:
                self._step(req, reply)
            except Exception as e:
                log("error", "step failed", error=repr(e))
                reply = pb.StepReply(id=req.id, error="%s: %s" % (type(e).__name__, e))
            yield reply

    def _part(self, index, stopping):
        if index >= len(self.parts) or _is_stopping(self.parts[index]) != stopping:
            raise ValueError("no %s part number %d" % ("stopping" if stopping else "processor", index))
        return self.parts[index]

    def _step(self, req, reply):
        call_kind = req.WhichOneof("call")
        if call_kind not in ("process", "stop"):
            raise ValueError("unknown step call %r" % call_kind)
        shared = self.region is not None and req.shm_size > 0
        if shared:
            self.region.ensure(req.shm_size)
        if call_kind == "stop":
            part = self._part(req.stop.part, True)
            row = req.stop.row
            seq, _ = self._load(row, shared and row.tokens_off != 0)
            verdict = _verdict(part.check(seq), part.name, len(seq.text))
            if verdict is not None:
                reply.stop.reason = verdict.reason
                reply.stop.detail = verdict.detail
                reply.stop.cut_text = verdict.cut_text
                reply.stop.text_end = verdict.text_end
            else:
                reply.stop.SetInParent()
            return
        call = req.process
        part = self._part(call.part, False)
        for row in call.rows:
            seq, cands = self._load(row, shared and row.tokens_off != 0)
            part.process(seq, cands)
            rr = reply.rows.add()
            if cands.dense_changed:
                rr.mode = pb.REPLY_DENSE
                if not (shared and row.tokens_off != 0):
                    rr.logits.extend(cands._dense)
            elif cands.edit_ids:
                rr.mode = pb.REPLY_EDITS
                rr.edit_ids.extend(cands.edit_ids)
                rr.edit_deltas.extend(cands.edit_deltas)

    def _load(self, row, shared):
        if shared:
            r = self.region
            tokens = r.ints(row.tokens_off, row.num_tokens).tolist()
            text = bytes(r.raw(row.text_off, row.text_len))
        else:
            tokens, text = list(row.tokens), bytes(row.text)
        seq = Sequence(row.index, tokens, row.prompt_len, text)
        if not row.has_logits:
            return seq, Candidates(has_logits=False)
        if row.dense:
            dense = self.region.floats(row.logits_off, row.num_items) if shared else list(row.logits)
            return seq, Candidates(dense=dense)
        if shared:
            raw = self.region.raw(row.items_off, 8 * row.num_items)
            ids, logits = raw.cast("i")[0::2], raw.cast("f")[1::2]
            items = list(zip(ids.tolist(), logits.tolist()))
        else:
            items = list(zip(row.item_ids, row.item_logits))
        return seq, Candidates(items=items)


def _is_stopping(part):
    return callable(getattr(part, "check", None))


def _verdict(result, name, text_len):
    """Turns what check returned into a Stop, or None to go on."""
    if result is None or result is False or result == "":
        return None
    if isinstance(result, str):
        return Stop(result)
    if not isinstance(result, Stop):
        raise TypeError("%s.check returned %r: want None, a reason string or a loom_plugin.Stop" % (name, result))
    if result.cut_text and not 0 <= result.text_end <= text_len:
        raise ValueError("%s.check cuts at byte %d of a %d-byte text" % (name, result.text_end, text_len))
    return result


class _Health(health_pb2_grpc.HealthServicer):
    def Check(self, request, context):
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


class _Controller(go_plugin_pb2_grpc.GRPCControllerServicer):
    """go-plugin's controller: on Shutdown the plugin exits at once (else the host waits 2s)."""

    def __init__(self, done):
        self.done = done

    def Shutdown(self, request, context):
        self.done.set()
        return go_plugin_pb2.Empty()


def _check_parts(parts):
    if not parts:
        raise ValueError("serve needs at least one part")
    seen = set()
    for i, p in enumerate(parts):
        name = getattr(p, "name", "")
        is_proc, is_stop = callable(getattr(p, "process", None)), _is_stopping(p)
        if is_proc == is_stop:
            raise TypeError("part %d (%r) needs exactly one of process(seq, cands) and check(seq)" % (i, p))
        key = (is_stop, name)
        if not isinstance(name, str) or not name or key in seen:
            raise ValueError("part %d (%r): empty or repeated name %r" % (i, p, name))
        seen.add(key)


def serve(*parts):
    """Serves the parts (processors and stopping criteria) until the host stops the plugin;
    then exits the process."""
    _check_parts(parts)
    if os.environ.get(COOKIE_KEY) != COOKIE_VALUE:
        sys.stderr.write("This is a loom plugin: declare it in a pipeline's [[plugins]]; loom starts it.\n")
        sys.exit(1)
    # The first line on standard output is the handshake; anything else printed goes to stderr.
    handshake_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sock_dir = os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or tempfile.gettempdir()
    path = os.path.join(sock_dir, "plugin-py-%d.sock" % os.getpid())
    done = threading.Event()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)],
    )
    pbg.add_PluginServicer_to_server(_PluginServicer(parts), server)
    health_pb2_grpc.add_HealthServicer_to_server(_Health(), server)
    go_plugin_pb2_grpc.add_GRPCControllerServicer_to_server(_Controller(done), server)
    server.add_insecure_port("unix:" + path)
    server.start()
    os.write(handshake_fd, ("1|%d|unix|%s|grpc\n" % (PROTOCOL_VERSION, path)).encode())
    os.close(handshake_fd)
    done.wait()
    server.stop(0.1).wait()
    try:
        os.remove(path)
    except OSError:
        pass
    os._exit(0)
