#!/usr/bin/env python3
"""End-to-end smoke test of the pi-telegram extension against the real pi, with no Telegram and no
real hub: a mock hub (the instance role of docs/wire-protocol.md) and a fake OpenAI-compatible LLM,
both in this file, standard library only.

    python3 extension/dev/smoke.py                 # pi from $PI_BIN, else .cache/test-deps/bin/pi
    PI_BIN=/path/to/pi python3 extension/dev/smoke.py -k restart   # only scenarios matching "restart"
    python3 extension/dev/smoke.py --ts            # the TypeScript sources instead of dist/

It loads extension/dist/index.js, what pi-telegram installs: run scripts/build-extension.sh after
changing the TypeScript (scripts/test.sh checks that dist/ is current).

Get pi with `scripts/install-test-deps.sh` (Node 22 + pi 1.6.0 into .cache/test-deps/).
Each scenario uses a fresh temporary agent dir. Prints one line per scenario; exit code 1 on failure.

The same file is the mock hub when run as `smoke.py serve --profile P` (that is how the hub
auto-start is tested: PI_TELEGRAM_BIN points at a wrapper that runs it).
"""
import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
EXT_DIR = os.path.dirname(HERE)
# What pi loads: the compiled dist/index.js (scripts/build-extension.sh), as installed; --ts: index.ts
EXT = os.path.join(EXT_DIR, "dist", "index.js")
REPO = os.path.dirname(os.path.dirname(HERE))
# The extension's release (its package.json): the mock hub says it is of the same one, as a
# hub of the same install does (a hub of another release is the registry test's business).
with open(os.path.join(EXT_DIR, "package.json")) as _f:
    EXTENSION_VERSION = json.load(_f)["version"]


# --------------------------------------------------------------------------- mock hub (subprocess)

def mock_hub_main(argv):
    ap = argparse.ArgumentParser(prog="smoke.py serve")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--no-ack", action="store_true")
    ap.add_argument("--protocol", type=int, default=1)
    ap.add_argument("--refuse")
    ap.add_argument("--fail")
    ap.add_argument("--token", help="the only child token a tools-role hello may carry")
    a = ap.parse_args(argv)
    agent = os.environ.get("PI_CODING_AGENT_DIR") or os.path.expanduser("~/.pi/agent")
    d = os.path.join(agent, "telegram", a.profile)
    os.makedirs(d, mode=0o700, exist_ok=True)
    if a.fail:
        print(f"pi-telegram: {a.fail}", file=sys.stderr)
        sys.exit(1)
    sec_path = os.path.join(d, "hub.secret")
    if not os.path.exists(sec_path):
        with open(sec_path, "w") as f:
            f.write(secrets.token_hex(32))
        os.chmod(sec_path, 0o600)
    secret = open(sec_path).read().strip()
    logf = open(os.path.join(d, "mock.log"), "a", buffering=1)
    lock = threading.Lock()
    conns = {}

    def log(n, direction, msg):
        with lock:
            logf.write(json.dumps({"pid": os.getpid(), "conn": n, "dir": direction, "msg": msg}) + "\n")

    def send(n, s, msg):
        log(n, "out", msg)
        try:
            s.sendall((json.dumps(msg) + "\n").encode())
        except OSError:
            pass

    def handle(s, n):
        buf, welcomed = b"", False
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    kind, msg, notes = read_client_line(line, first=not welcomed)
                    if OVER_LIMIT in notes or msg == "too_long":
                        log(n, "info", "LINE TOO LONG")
                    if kind == "blank":
                        continue
                    if kind == "rejected":
                        # What the hub does: refuse the hello, or say why and close.
                        log(n, "info", f"REJECTED {msg}: {line[:200]!r}")
                        if not welcomed:
                            send(n, s, {"type": "refused", "code": "hello", "message": HELLO_ERRORS.get(msg, msg)})
                        else:
                            send(n, s, {"type": "error", "message": f"malformed line ({msg})"})
                        return
                    log(n, "in", msg)
                    if LONE in notes:
                        # Python reads it, and so would the hub (as U+FFFD); the extension must not write one.
                        log(n, "info", "LONE SURROGATE")
                    if not welcomed:
                        if a.refuse or msg.get("secret") != secret:
                            code = a.refuse or "secret"
                            send(n, s, {"type": "refused", "code": code, "message": f"refused ({code})"})
                            return
                        if msg.get("role") == "tools" and a.token is not None and msg.get("token") != a.token:
                            send(n, s, {"type": "refused", "code": "token", "message": "unknown child token"})
                            return
                        welcomed = True
                        send(n, s, {"type": "welcome", "protocol": a.protocol, "hub_pid": os.getpid(), "instance_id": f"i{n}", "hub_version": EXTENSION_VERSION})
                        conns[n] = s
                        if not a.no_ack:
                            for c in msg.get("completed_turns", []):
                                send(n, s, {"type": "done_ack", "turn_id": c["turn_id"]})
                    elif msg.get("type") == "turn_done" and not a.no_ack:
                        send(n, s, {"type": "done_ack", "turn_id": msg["turn_id"]})
                    elif msg.get("type") == "tool_call":
                        answer = tool_answer(msg)
                        if answer is not None:
                            send(n, s, answer)
        except Exception as e:  # noqa: BLE001 - a test double logs everything
            log(n, "info", f"error {e!r}")
        finally:
            conns.pop(n, None)
            log(n, "info", "closed")
            s.close()

    def ctl(s):
        f = s.makefile("rwb")
        for line in f:
            req = json.loads(line)
            if req["op"] == "send" and conns:
                n = max(conns)
                send(n, conns[n], req["msg"])
            elif req["op"] == "exit":
                f.write(b"{}\n")
                f.flush()
                os._exit(0)
            f.write(b"{}\n")
            f.flush()

    def listen(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        os.chmod(path, 0o600)
        srv.listen(16)
        return srv

    hub = listen(os.path.join(d, "hub.sock"))
    ctls = listen(os.path.join(d, "mock-ctl.sock"))

    def accept_ctl():
        while True:
            c, _ = ctls.accept()
            threading.Thread(target=ctl, args=(c,), daemon=True).start()

    threading.Thread(target=accept_ctl, daemon=True).start()
    log(0, "info", "listening")
    print(f"mock hub listening (pid {os.getpid()})", file=sys.stderr, flush=True)
    n = 0
    while True:
        c, _ = hub.accept()
        n += 1
        threading.Thread(target=handle, args=(c, n), daemon=True).start()


# --------------------------------------------------------------------------- the hub's reading of a line

# The hub reads lines of at most 1 MiB without the newline (crates/wire `MAX_LINE`); the extension
# writes at most 1 MiB with it.
MAX_LINE = 1 << 20
LONE = "lone surrogate"
OVER_LIMIT = "over the extension's limit"
# What the hub requires of each message after the hello (crates/wire `ClientMsg`): a field's kind,
# "!" when it must be there. "str" and "bool" may be absent but never null; "?" may be null; "any"
# is any JSON. Unknown types are ignored, unknown fields too.
_STATE = {k: "str?" for k in ("cwd", "mode", "reason", "session_id", "session_file", "session_name", "thinking_level")}
CLIENT_MSGS = {
    "ack": {"turn_id": "!str", "disposition": "str"},
    "event": {"turn_id": "str?", "event": "!any"},
    "turn_done": {"turn_id": "!str", "text": "str", "aborted": "bool", "error": "str?", "handled": "bool"},
    "state": {**_STATE, "pid": "int?", "model": "model?", "idle": "bool?", "pending": "bool?"},
    "response": {"id": "!str", "ok": "bool", "data": "any", "error": "str?"},
    "tool_call": {"id": "!str", "tool": "!str", "args": "any", "turn_id": "str?"},
    "bye": {"reason": "str"},
    "ui_prompt": {"waiting": "!bool", "kind": "str?", "title": "str?"},
    "upload": {"id": "!str", "name": "!str", "size": "!int", "offset": "int", "data": "str", "done": "bool"},
    "spawn": {"id": "!str", "cwd": "!str", "env": "str_map"},
    "instances": {"id": "!str"},
    "resolve_intent": {"id": "!str", "intent_id": "!int", "create": "!bool"},
}
# The hub's words when it refuses a hello (crates/wire `HelloError`).
HELLO_ERRORS = {"not_json": "the first line is not JSON", "not_hello": "the first line must be a hello",
                "no_protocol": "the hello has no protocol version",
                "no_role": "the hello's role is none of instance, control, tools"}


def _is_int(v, lo=-(1 << 63), hi=(1 << 63) - 1):
    return type(v) is int and lo <= v <= hi


def _fits(kind, v):
    base = kind.lstrip("!").rstrip("?")
    if v is None:
        return kind.endswith("?") or base == "any"
    if base == "str":
        return isinstance(v, str)
    if base == "bool":
        return type(v) is bool
    if base == "int":
        return _is_int(v)
    if base == "model":
        return isinstance(v, dict) and all(isinstance(v[k], str) for k in ("provider", "id") if k in v)
    if base == "str_map":
        return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
    return base == "any"


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def read_client_line(raw, first):
    """What the hub makes of one line from the extension (`raw`, without its newline), the way
    crates/wire reads it: `LineReader`, then `read_hello` for the connection's first line and
    `ClientMsg` after it. Returns (kind, value, notes): ("message", the parsed object, notes),
    ("ignored", it, notes) for a type the hub does not know, ("blank", None, []) for a line it
    skips, or ("rejected", why, notes) for a line it refuses (why: too_long, not_utf8, not_json,
    not_object, invalid; for the first line not_hello, no_protocol, no_role). notes: LONE (the
    line holds half a UTF-16 character: the hub reads U+FFFD), OVER_LIMIT (longer than the
    extension may write). crates/wire/tests/samples/wire-lines.json holds what each line should
    give (s_wire_samples)."""
    if len(raw) > MAX_LINE:
        return "rejected", "too_long", []
    notes = [OVER_LIMIT] if len(raw) + 1 > MAX_LINE else []
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if all(b in b" \t\n\x0c\r" for b in raw):
        return "blank", None, []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "rejected", "not_utf8", notes
    objects = []

    def pairs(kv):
        objects.append(kv)
        return dict(kv)

    try:
        msg = json.loads(text, object_pairs_hook=pairs, parse_constant=_no_constants)
    except ValueError:
        return "rejected", "not_json", notes
    if has_lone_surrogate(msg):
        notes.append(LONE)
    if first:
        if not isinstance(msg, dict) or msg.get("type") != "hello":
            return "rejected", "not_hello", notes
        if not _is_int(msg.get("protocol"), 0, (1 << 32) - 1):
            return "rejected", "no_protocol", notes
        if msg.get("role") not in ("instance", "control", "tools"):
            return "rejected", "no_role", notes
        return "message", msg, notes  # the rest is read field by field: never refused
    if not isinstance(msg, dict):
        return "rejected", "not_object", notes
    t = msg.get("type")
    if not isinstance(t, str):
        return "rejected", "invalid", notes
    if t == "hello":
        return "rejected", "invalid", notes  # a second hello: the hub closes the connection
    spec = CLIENT_MSGS.get(t)
    if spec is None:
        return "ignored", msg, notes
    keys = [k for k, _ in objects[-1]]  # the outermost object is parsed last
    if any(keys.count(k) > 1 for k in spec.keys() | {"type"}):
        return "rejected", "invalid", notes  # serde refuses a field given twice
    for k, kind in spec.items():
        if k in msg and not _fits(kind, msg[k]) or k not in msg and kind.startswith("!"):
            return "rejected", "invalid", notes
    return "message", msg, notes


def without_lone_surrogates(v):
    """`v` with every lone UTF-16 surrogate as U+FFFD, as the hub reads it."""
    if isinstance(v, str):
        # json.loads joins a pair into its character: a surrogate left in a string is half of one
        return re.sub("[\ud800-\udfff]", "\ufffd", v)
    if isinstance(v, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(x) for k, x in v.items()}
    if isinstance(v, list):
        return [without_lone_surrogates(x) for x in v]
    return v


def has_lone_surrogate(v):
    """Whether a parsed message holds half a UTF-16 character (JSON's lone `\\udxxx` escape)."""
    if isinstance(v, str):
        try:
            v.encode("utf-8")
            return False
        except UnicodeEncodeError:
            return True
    if isinstance(v, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(has_lone_surrogate(x) for x in v)
    return False


def tool_answer(msg):
    """What the mock hub answers to a tool_call: a text naming what it got; "FAIL" in a message's
    text is an error, "HANG" no answer at all."""
    args = msg.get("args") or {}
    if msg.get("tool") == "telegram_attach":
        return {"type": "response", "id": msg["id"], "ok": True, "data": {"text": "attached: " + ",".join(args.get("paths", []))}}
    text = args.get("text", "")
    if "HANG" in text:
        return None
    if "FAIL" in text:
        return {"type": "response", "id": msg["id"], "ok": False, "error": "hub says no"}
    return {"type": "response", "id": msg["id"], "ok": True, "data": {"text": "message sent"}}


# --------------------------------------------------------------------------- fake LLM (in process)

class FakeLLM(BaseHTTPRequestHandler):
    """OpenAI chat completions, streamed: answers "echo: <last user text>"; [[slow]] streams word by
    word; [[tool:NAME:{json}]] calls the tool NAME with those arguments; after a tool result it
    answers "tool said: <result>"; [[lone-surrogate]] streams half a character ("lone \\ud800
    surrogate") and [[split-emoji]] an emoji's two halves in two chunks ("split 😀 emoji"), as
    JavaScript strings may hold them. Every request body is kept in REQUESTS."""

    REQUESTS = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    @staticmethod
    def text_of(c):
        return c if isinstance(c, str) else "".join(p.get("text", "") for p in (c or []) if p.get("type") == "text")

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        FakeLLM.REQUESTS.append(req)
        messages = req.get("messages", [])
        last = ""
        for m in reversed(messages):
            if m.get("role") == "user":
                last = self.text_of(m.get("content"))
                break
        tool = None
        if messages and messages[-1].get("role") == "tool":
            reply = "tool said: " + self.text_of(messages[-1].get("content")).strip()
        elif "summariz" in json.dumps(messages[:1])[:400]:
            reply = "echo: summary"
        else:
            reply = "echo: " + last.strip()
            m = re.search(r"\[\[tool:([a-z_]+):(\{.*?\})\]\]", last, re.S)
            if m:
                tool = (m.group(1), m.group(2))
        words = re.findall(r"\S+\s*", reply)
        if "[[lone-surrogate]]" in last:
            words = ["lone ", "\ud800", " surrogate"]
        elif "[[split-emoji]]" in last:
            words = ["split ", "\ud83d", "\ude00", " emoji"]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()

        def chunk(delta, finish=None):
            c = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
            self.wfile.flush()

        try:
            chunk({"role": "assistant", "content": ""})
            if tool:
                FakeLLM.calls = getattr(FakeLLM, "calls", 0) + 1
                chunk({"tool_calls": [{"index": 0, "id": f"call_{FakeLLM.calls}", "type": "function",
                                       "function": {"name": tool[0], "arguments": ""}}]})
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": tool[1]}}]})
                chunk({}, "tool_calls")
            else:
                for w in words:
                    if "[[slow]]" in last:
                        time.sleep(0.15)
                    chunk({"content": w})
                chunk({}, "stop")
            usage = {"prompt_tokens": 10, "completion_tokens": len(words), "total_tokens": 10 + len(words)}
            self.wfile.write(b"data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 0,
                                                     "model": "fake-model", "choices": [], "usage": usage}).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


# --------------------------------------------------------------------------- harness

def wait_for(pred, timeout=15, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        r = pred()
        if r:
            return r
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Env:
    """A temporary agent dir with the fake LLM configured, a project dir, and a wrapper 'hub binary'."""

    def __init__(self, pi_bin, llm_port):
        self.root = tempfile.mkdtemp(prefix="pi-telegram-smoke-")
        self.agent = os.path.join(self.root, "agent")
        self.work = os.path.join(self.root, "work")
        os.makedirs(self.agent)
        os.makedirs(self.work)
        self.pi_bin = pi_bin
        with open(os.path.join(self.agent, "models.json"), "w") as f:
            json.dump({"providers": {"fake": {
                "baseUrl": f"http://127.0.0.1:{llm_port}/v1", "api": "openai-completions", "apiKey": "fake-key",
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False, "supportsStore": False},
                "models": [{"id": "fake-model", "name": "Fake", "reasoning": False, "input": ["text", "image"],
                            "contextWindow": 32000, "maxTokens": 4096,
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}}, f)
        with open(os.path.join(self.agent, "settings.json"), "w") as f:
            json.dump({"defaultProvider": "fake", "defaultModel": "fake-model", "defaultThinkingLevel": "off",
                       "defaultProjectTrust": "never", "quietStartup": True}, f)
        self.hub_bin = os.path.join(self.root, "fake-hub-bin")
        with open(self.hub_bin, "w") as f:
            f.write(f"#!/bin/sh\necho \"$*\" >> {self.root}/hub-bin.calls\nexec {sys.executable} {os.path.abspath(__file__)} \"$@\"\n")
        os.chmod(self.hub_bin, 0o755)
        self.env = dict(os.environ, PI_CODING_AGENT_DIR=self.agent, PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1",
                        PI_TELEMETRY="0", PI_CODING_AGENT_SESSION_DIR=os.path.join(self.root, "sessions"),
                        PI_TELEGRAM_BIN="/nonexistent/pi-telegram")
        for k in ("PI_TELEGRAM_CHILD", "PI_TELEGRAM_CHILD_TOKEN", "PI_TELEGRAM_PROFILE"):
            self.env.pop(k, None)
        self.procs = []

    def pdir(self, profile="default"):
        return os.path.join(self.agent, "telegram", profile)

    def hub_calls(self):
        try:
            return open(os.path.join(self.root, "hub-bin.calls")).read().splitlines()
        except FileNotFoundError:
            return []

    def rejected_lines(self):
        """What the mock hubs of this environment refused (read_client_line), as they logged it."""
        tg = os.path.join(self.agent, "telegram")
        profiles = os.listdir(tg) if os.path.isdir(tg) else []
        return [e["msg"] for p in profiles for e in MockHub.read_log(os.path.join(self.pdir(p), "mock.log"))
                if e["dir"] == "info" and str(e["msg"]).startswith("REJECTED")]

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        # hubs started by the extension run detached: stop them by the pids they logged, and
        # every hub whose environment names this agent dir (one still starting, or one whose
        # folder, log included, a scenario deleted)
        pids = set()
        for profile in os.listdir(os.path.join(self.agent, "telegram")) if os.path.isdir(os.path.join(self.agent, "telegram")) else []:
            pids |= {e["pid"] for e in MockHub.read_log(os.path.join(self.pdir(profile), "mock.log"))}
        wanted = f"PI_CODING_AGENT_DIR={self.agent}".encode()
        for d in os.listdir("/proc") if os.path.isdir("/proc") else []:
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    if wanted in f.read().split(b"\0"):
                        pids.add(int(d))
            except (OSError, ValueError):
                pass
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
                # a mock hub (this file) or a real one; the pid may be someone else's by now
                if not (os.path.abspath(__file__).encode() in args or b"serve" in args and args[0].endswith(b"pi-telegram")):
                    continue
                os.kill(pid, 9)
            except (OSError, ProcessLookupError):
                pass
        shutil.rmtree(self.root, ignore_errors=True)


class MockHub:
    def __init__(self, env, *flags, profile="default", spawn=True):
        self.env, self.profile = env, profile
        self.log = os.path.join(env.pdir(profile), "mock.log")
        self.start_at = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        if spawn:
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "serve", "--profile", profile, *flags],
                                 env=env.env, stderr=subprocess.DEVNULL)
            env.procs.append(p)
            wait_for(lambda: os.path.exists(os.path.join(env.pdir(profile), "mock-ctl.sock"))
                     and self.entries(lambda e: e["msg"] == "listening" and e["pid"] == p.pid), what="mock hub")

    @staticmethod
    def read_log(path, start=0):
        try:
            with open(path) as f:
                f.seek(start)
                # The mock hub may be writing its last line right now: only whole lines count.
                return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def entries(self, pred=lambda e: True):
        return [e for e in self.read_log(self.log, self.start_at) if pred(e)]

    def ins(self, typ):
        return [e["msg"] for e in self.entries(lambda e: e["dir"] == "in" and e["msg"].get("type") == typ)]

    def events(self):
        return [(m["event"]["type"], m["turn_id"]) for m in self.ins("event")]

    def ctl(self, req):
        s = socket.socket(socket.AF_UNIX)
        s.connect(os.path.join(self.env.pdir(self.profile), "mock-ctl.sock"))
        s.sendall((json.dumps(req) + "\n").encode())
        s.makefile().readline()
        s.close()

    def send(self, msg):
        self.ctl({"op": "send", "msg": msg})

    def stop(self):
        try:
            self.ctl({"op": "exit"})
        except OSError:
            pass
        time.sleep(0.2)


class Pi:
    """pi --mode rpc with the extension; answers extension UI dialogs; collects notifications."""

    def __init__(self, env, cwd=None, extra_env=None, answers=None, extensions=()):
        e = dict(env.env)
        e.update(extra_env or {})
        args = [env.pi_bin, "--mode", "rpc", "--no-session", "-e", EXT]
        for x in extensions:
            args += ["-e", x]
        self.p = subprocess.Popen(args, cwd=cwd or env.work, env=e,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        env.procs.append(self.p)
        self.lines, self.notes, self.status, self.answers, self.n = [], [], [], answers or {}, 0
        threading.Thread(target=self._read, daemon=True).start()
        time.sleep(1.0)  # let pi start

    def _read(self):
        for line in self.p.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            self.lines.append(m)
            if m.get("type") == "extension_ui_request":
                meth = m.get("method")
                if meth == "notify":
                    self.notes.append(m.get("message"))
                elif meth == "setStatus":
                    self.status.append(m.get("statusText"))
                elif meth == "confirm":
                    self.send({"type": "extension_ui_response", "id": m["id"], "confirmed": self.answers.get("confirm", True)})
                elif meth == "input":
                    self.send({"type": "extension_ui_response", "id": m["id"], "value": self.answers.get("input", "")})

    def send(self, o):
        self.p.stdin.write(json.dumps(o) + "\n")
        self.p.stdin.flush()

    def cmd(self, o, timeout=30):
        self.n += 1
        cid = f"c{self.n}"
        self.send(dict(o, id=cid))
        return wait_for(lambda: next((m for m in self.lines if m.get("type") == "response" and m.get("id") == cid), None),
                        timeout, what=f"response to {o.get('type')}")

    def prompt(self, text, timeout=30):
        return self.cmd({"type": "prompt", "message": text}, timeout)

    def settled(self):
        return len([m for m in self.lines if m.get("type") == "agent_settled"])

    def assistant_texts(self):
        """The text of every assistant message pi finished, in order."""
        return [FakeLLM.text_of(m["message"].get("content")) for m in self.lines
                if m.get("type") == "message_end" and m.get("message", {}).get("role") == "assistant"]

    def tool_results(self):
        """(tool name, is error, text) of every tool pi ran."""
        return [(m["toolName"], m["isError"], FakeLLM.text_of(m["result"].get("content")))
                for m in self.lines if m.get("type") == "tool_execution_end"]

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()


# --------------------------------------------------------------------------- scenarios

def s_handshake_and_turn(env):
    hub = MockHub(env)
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    hello = wait_for(lambda: hub.ins("hello"), what="hello")[0]
    assert hello["protocol"] == 1 and hello["role"] == "instance" and len(hello["secret"]) == 64, hello
    assert hello["cwd"] == env.work and hello["received_turns"] == [] and hello["idle"] is True, hello
    hub.send({"type": "prompt", "turn_id": "t1", "text": "hi from telegram"})
    done = wait_for(lambda: hub.ins("turn_done"), what="turn_done")[0]
    assert done == {"type": "turn_done", "turn_id": "t1", "text": "echo: hi from telegram", "aborted": False, "error": None}, done
    assert hub.ins("ack") == [{"type": "ack", "turn_id": "t1", "disposition": "started"}]
    wait_for(lambda: ("agent_settled", "t1") in hub.events(), what="agent_settled")
    # The result before pi's idle: the hub sends the answer on turn_done without first handling
    # the settled event.
    order = [e["msg"]["type"] if e["msg"]["type"] != "event" else e["msg"]["event"]["type"]
             for e in hub.entries(lambda e: e["dir"] == "in" and e["msg"].get("turn_id") == "t1")]
    assert order.index("turn_done") < order.index("agent_settled"), order
    evs = hub.events()
    assert ("agent_start", "t1") in evs and ("agent_settled", "t1") in evs and ("message_update", "t1") in evs, evs
    assert all("partial" not in m["event"].get("assistantMessageEvent", {}) for m in hub.ins("event"))
    assert [m["event"] for m in hub.ins("event") if m["event"]["type"] == "agent_end"] == [{"type": "agent_end", "willRetry": False}]
    pi.prompt("typed locally")
    wait_for(lambda: pi.settled() >= 2, what="local run")
    time.sleep(0.3)
    assert ("agent_start", None) in hub.events(), "a local run carries turn_id null"
    hub.send({"type": "get_state", "id": "g1"})
    r = wait_for(lambda: hub.ins("response"), what="get_state response")[0]
    assert r["id"] == "g1" and r["ok"] and r["data"]["model"] == {"provider": "fake", "id": "fake-model"}, r
    pi.close()
    wait_for(lambda: hub.ins("bye"), what="bye")
    # pi's own quit (its stdin closed): "quit", not a session replaced ("shutdown", s_reload).
    assert hub.ins("bye")[0]["reason"] == "quit", hub.ins("bye")
    hub.stop()


def s_restart_duplicate_and_completed(env):
    hub = MockHub(env)
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    hub.send({"type": "prompt", "turn_id": "t1", "text": "first"})
    wait_for(lambda: hub.ins("turn_done"), what="t1")
    hub.send({"type": "prompt", "turn_id": "t2", "text": "[[slow]] a b c d e f g h i j"})
    wait_for(lambda: ("message_update", "t2") in hub.events(), what="t2 streaming")
    hub.stop()  # the hub dies mid-run; t2 finishes while it is away
    wait_for(lambda: pi.settled() >= 2, timeout=20, what="t2 settled while the hub is away")
    hub2 = MockHub(env)
    hello = wait_for(lambda: hub2.ins("hello"), timeout=15, what="reconnect")[0]
    assert hello["received_turns"] == ["t1", "t2"], hello
    assert [c["turn_id"] for c in hello["completed_turns"]] == ["t2"], hello
    assert hello["completed_turns"][0]["text"] == "echo: [[slow]] a b c d e f g h i j"
    hub2.send({"type": "prompt", "turn_id": "t2", "text": "[[slow]] a b c d e f g h i j"})
    wait_for(lambda: hub2.ins("ack"), what="re-ack")
    # The mock hub acknowledged t2's result from the hello (done_ack): pi answered it and forgot
    # it, so a prompt sent again is "finished", never run again.
    assert hub2.ins("ack") == [{"type": "ack", "turn_id": "t2", "disposition": "finished"}], hub2.ins("ack")
    time.sleep(1)
    assert pi.settled() == 2, "a duplicate prompt must not run again"
    hub2.stop()
    hub3 = MockHub(env)
    hello = wait_for(lambda: hub3.ins("hello"), timeout=15, what="reconnect")[0]
    assert hello["completed_turns"] == [], "done_ack forgets the result"
    pi.close()
    hub3.stop()


def s_outbox_is_bounded(env):
    """While the hub is away, events wait in an outbox of at most about 0.5 MB (the oldest dropped)."""
    hub = MockHub(env)
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    wait_for(lambda: hub.ins("hello"), what="hello")
    hub.stop()
    big = "A" * 100_000  # one word: each event that carries it is about 100 kB
    pi.prompt(big)
    wait_for(lambda: pi.settled() >= 1, what="the run while the hub is away")
    hub2 = MockHub(env)
    wait_for(lambda: hub2.ins("hello"), timeout=15, what="reconnect")
    wait_for(lambda: ("agent_settled", None) in hub2.events(), what="the buffered events")
    time.sleep(0.5)
    sizes = [len(json.dumps(m)) for m in hub2.ins("event")]
    types = [t for t, _ in hub2.events()]
    assert sum(sizes) < 512 * 1024 + 120_000, (sum(sizes), types)
    assert "input" not in types and types[-1] == "agent_settled", types
    assert hub2.ins("turn_done") == [], "a local run has no turn_done"
    pi.close()
    hub2.stop()


def s_queue_new_reload_and_remembered(env):
    hub = MockHub(env)
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    saved = json.load(open(os.path.join(env.agent, "telegram", "connections.json")))
    assert saved == {"version": 1, "projects": {env.work: {"profile": "default"}}}, saved
    assert os.stat(os.path.join(env.agent, "telegram", "connections.json")).st_mode & 0o777 == 0o600
    pi.prompt("[[slow]] busy local run one two three four")
    time.sleep(0.4)
    hub.send({"type": "prompt", "turn_id": "t7", "text": "queued"})
    wait_for(lambda: hub.ins("turn_done"), timeout=20, what="queued turn done")
    assert hub.ins("ack")[0]["disposition"] == "queued"
    assert hub.ins("turn_done")[0]["text"] == "echo: queued"
    pi.cmd({"type": "new_session"})
    hello = wait_for(lambda: hub.ins("hello")[1:], what="hello after /new")[0]
    assert hello["reason"] == "new" and hello["received_turns"] == ["t7"], hello
    pi.close()
    pi2 = Pi(env)  # a fresh pi in the remembered project reconnects by itself
    hello = wait_for(lambda: hub.ins("hello")[2:], what="hello from a fresh pi")[0]
    assert hello["reason"] == "startup" and hello["received_turns"] == [], hello
    elsewhere = Pi(env, cwd=env.root)
    time.sleep(1.5)
    assert len(hub.ins("hello")) == 3, "a project that is not remembered does not connect"
    elsewhere.close()
    pi2.close()
    hub.stop()


def s_autostart_and_disconnect(env):
    pi = Pi(env, extra_env={"PI_TELEGRAM_BIN": env.hub_bin})
    pi.prompt("/telegram-connect")
    assert env.hub_calls() == ["serve --profile default"], env.hub_calls()
    hub = MockHub(env, spawn=False)
    hub.start_at = 0
    wait_for(lambda: hub.ins("hello"), what="hello to the auto-started hub")
    assert "mock hub listening" in open(os.path.join(env.pdir(), "hub.log")).read()
    pi.prompt("/telegram-disconnect")
    wait_for(lambda: hub.ins("bye"), what="bye")
    assert hub.ins("bye")[-1] == {"type": "bye", "reason": "disconnect"}
    assert json.load(open(os.path.join(env.agent, "telegram", "connections.json")))["projects"] == {}
    pi.close()
    hub.stop()


def s_hub_fails_to_start(env):
    wrapper = os.path.join(env.root, "failing-hub-bin")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} \"$@\" --fail 'no bot token for profile default: run `pi-telegram setup`'\n")
    os.chmod(wrapper, 0o755)
    pi = Pi(env, extra_env={"PI_TELEGRAM_BIN": wrapper})
    pi.prompt("/telegram-connect")
    assert "no bot token for profile default" in pi.notes[-1], pi.notes
    pi.close()
    pi = Pi(env, extra_env={"PI_TELEGRAM_BIN": "/nonexistent/pi-telegram"})
    pi.prompt("/telegram-connect")
    assert "PI_TELEGRAM_BIN" in pi.notes[-1] and "not found" in pi.notes[-1], pi.notes
    pi.close()


def s_refusals(env):
    hub = MockHub(env, "--refuse", "secret")
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    time.sleep(3)
    assert len(hub.ins("hello")) == 1, "no retry after a secret refusal"
    assert "refused" in pi.notes[-1]
    pi.close()
    hub.stop()
    hub = MockHub(env, "--protocol", "2")
    pi = Pi(env)
    time.sleep(3)
    assert len(hub.ins("hello")) == 1 and "protocol 2" in pi.notes[-1], pi.notes
    pi.close()
    hub.stop()


def s_child_is_inert(env):
    hub = MockHub(env)
    os.makedirs(os.path.join(env.agent, "telegram"), exist_ok=True)
    with open(os.path.join(env.agent, "telegram", "connections.json"), "w") as f:
        json.dump({"version": 1, "projects": {env.work: {"profile": "default"}}}, f)
    pi = Pi(env, extra_env={"PI_TELEGRAM_CHILD": "1", "PI_TELEGRAM_BIN": env.hub_bin})
    pi.prompt("/telegram-connect")
    time.sleep(1.5)
    assert hub.ins("hello") == [] and env.hub_calls() == [] and pi.status == [], "PI_TELEGRAM_CHILD=1 must stay inert"
    pi.close()
    hub.stop()


def s_abort_and_hub_requests(env):
    hub = MockHub(env)
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    hub.send({"type": "prompt", "turn_id": "t1", "text": "[[slow]] one two three four five six seven eight"})
    wait_for(lambda: ("message_update", "t1") in hub.events(), what="streaming")
    hub.send({"type": "abort", "id": "a1"})
    done = wait_for(lambda: hub.ins("turn_done"), what="aborted turn")[0]
    assert done["aborted"] is True and done["text"].startswith("echo:"), done
    assert {"type": "response", "id": "a1", "ok": True} in hub.ins("response")
    hub.send({"type": "set_status", "text": "telegram: @me"})
    hub.send({"type": "notify", "text": "hello from the hub", "level": "warning"})
    hub.send({"type": "something_new", "x": 1})
    wait_for(lambda: "hello from the hub" in pi.notes, what="notify")
    wait_for(lambda: "telegram: @me" in pi.status, what="set_status")
    # pi's saved sessions (none with --no-session): SessionManager.list, without importing pi
    hub.send({"type": "get_sessions", "id": "s1"})
    r = wait_for(lambda: [m for m in hub.ins("response") if m["id"] == "s1"], what="get_sessions response")[0]
    assert r["ok"] is True and isinstance(r["data"]["sessions"], list), r
    pi.close()
    hub.stop()


PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def tool_calls(hub):
    return hub.ins("tool_call")


def s_tools_over_the_instance_connection(env):
    FakeLLM.REQUESTS.clear()
    hub = MockHub(env)
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    wait_for(lambda: hub.ins("hello"), what="hello")
    # a hub turn whose run attaches files: relative, "@"-prefixed and "~" paths become absolute
    hub.send({"type": "prompt", "turn_id": "t1",
              "text": 'send it [[tool:telegram_attach:{"paths":["x.txt","@sub/y.png","~/z.pdf"],"caption":"here"}]]'})
    done = wait_for(lambda: hub.ins("turn_done"), what="t1 done")[0]
    call = tool_calls(hub)[0]
    home = os.path.expanduser("~")
    want = [os.path.join(env.work, "x.txt"), os.path.join(env.work, "sub", "y.png"), os.path.join(home, "z.pdf")]
    assert call["tool"] == "telegram_attach" and call["turn_id"] == "t1" and isinstance(call["id"], str), call
    assert call["args"] == {"paths": want, "caption": "here"}, call
    assert done["text"] == "tool said: attached: " + ",".join(want) and done["error"] is None, done
    # a run typed in pi: turn_id null; the hub's ok:false is a tool error with its reason
    pi.prompt('note [[tool:telegram_message:{"text":"half way FAIL","thread":"B"}]]')
    wait_for(lambda: pi.settled() >= 2, what="local run")
    call = tool_calls(hub)[1]
    assert call["tool"] == "telegram_message" and call["turn_id"] is None, call
    assert call["args"] == {"text": "half way FAIL", "thread": "B"}, call
    assert pi.tool_results()[-1] == ("telegram_message", True, "hub says no"), pi.tool_results()
    pi.prompt('note [[tool:telegram_message:{"text":"all good"}]]')
    wait_for(lambda: pi.settled() >= 3, what="local run")
    assert pi.tool_results()[-1] == ("telegram_message", False, "message sent"), pi.tool_results()
    assert len({c["id"] for c in tool_calls(hub)}) == 3, "tool call ids are unique"
    # what the model is told
    req = FakeLLM.REQUESTS[0]
    tools = {t["function"]["name"]: t["function"] for t in req.get("tools", [])}
    assert tools["telegram_attach"]["parameters"]["required"] == ["paths"], tools
    assert set(tools["telegram_message"]["parameters"]["properties"]) == {"text", "chat_id", "thread_id", "thread"}, tools
    system = FakeLLM.text_of(req["messages"][0].get("content"))
    assert "Send files from this machine to the person on Telegram" in system, system[:2000]
    assert "Use telegram_message for short progress notes" in system, system[:2000]
    # the skill is listed (pi -e: offered by resources_discover) and the hub turn got the note
    assert "<name>telegram-bridge</name>" in system, system[-3000:]
    assert system.count("<name>telegram-bridge</name>") == 1, system[-3000:]
    assert "<telegram>\nThis run's message came from the person through Telegram" in system, system[-3000:]
    pi.close()
    hub.stop()


def s_tools_without_hub_and_on_connection_loss(env):
    FakeLLM.REQUESTS.clear()
    pi = Pi(env)
    pi.prompt('[[tool:telegram_message:{"text":"hi"}]]')
    wait_for(lambda: pi.settled() >= 1, what="run")
    # no hub to reach: the tools are not offered to the model (the fake one calls it anyway)
    assert pi.tool_results() == [("telegram_message", True, "Tool telegram_message not found")], pi.tool_results()
    offered = {t["function"]["name"] for t in FakeLLM.REQUESTS[0].get("tools", [])}
    assert "read" in offered and not offered & {"telegram_attach", "telegram_message"}, offered
    system = FakeLLM.text_of(FakeLLM.REQUESTS[0]["messages"][0].get("content"))
    assert "telegram-bridge" in system and "came from the person through Telegram" not in system, system[-3000:]
    hub = MockHub(env)
    pi.prompt("/telegram-connect")
    hub.send({"type": "prompt", "turn_id": "t1", "text": '[[tool:telegram_message:{"text":"HANG"}]]'})
    wait_for(lambda: tool_calls(hub), what="tool_call")
    hub.stop()  # never answers: the call fails at once, the turn finishes while the hub is away
    wait_for(lambda: pi.settled() >= 2, what="t1 settled")
    name, is_error, text = pi.tool_results()[-1]
    assert name == "telegram_message" and is_error and "connection to the pi-telegram hub was lost" in text, text
    hub2 = MockHub(env)
    hello = wait_for(lambda: hub2.ins("hello"), what="reconnect")[0]
    assert [c["turn_id"] for c in hello["completed_turns"]] == ["t1"], hello
    assert hello["completed_turns"][0]["text"].startswith("tool said: the connection to the pi-telegram hub was lost")
    pi.close()
    hub2.stop()


def s_prompt_with_images(env):
    FakeLLM.REQUESTS.clear()
    hub = MockHub(env)
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    img = {"type": "image", "data": PNG_1X1, "mimeType": "image/png"}
    hub.send({"type": "prompt", "turn_id": "t1", "text": "what is this", "images": [img]})
    done = wait_for(lambda: hub.ins("turn_done"), what="t1 done")[0]
    assert done["text"] == "echo: what is this" and done["error"] is None, done
    user = [m for m in FakeLLM.REQUESTS[-1]["messages"] if m["role"] == "user"][-1]
    kinds = [p["type"] for p in user["content"]]
    assert kinds == ["text", "image_url"] and user["content"][1]["image_url"]["url"].startswith("data:image/png;base64,"), user
    inputs = [(m["event"], m["turn_id"]) for m in hub.ins("event") if m["event"]["type"] == "input"]
    assert inputs == [({"type": "input", "text": "what is this", "source": "extension", "imageCount": 1}, "t1")], inputs
    # an image without text still runs (pi drops the empty text part)
    hub.send({"type": "prompt", "turn_id": "t2", "text": "", "images": [img]})
    done = wait_for(lambda: hub.ins("turn_done")[1:], what="t2 done")[0]
    assert done["turn_id"] == "t2" and done["error"] is None and done["aborted"] is False, done
    user = [m for m in FakeLLM.REQUESTS[-1]["messages"] if m["role"] == "user"][-1]
    assert [p["type"] for p in user["content"]] == ["image_url"], user
    # text starting with "/" and images: no template expansion (sent as written)
    hub.send({"type": "prompt", "turn_id": "t3", "text": "/telegram-status", "images": [img]})
    done = wait_for(lambda: hub.ins("turn_done")[2:], what="t3 done")[0]
    assert done["text"] == "echo: /telegram-status", done
    pi.close()
    hub.stop()


def s_child_tools_mode(env):
    hub = MockHub(env, "--token", "tok1")
    os.makedirs(os.path.join(env.agent, "telegram"), exist_ok=True)
    with open(os.path.join(env.agent, "telegram", "connections.json"), "w") as f:
        json.dump({"version": 1, "projects": {env.work: {"profile": "default"}}}, f)
    child_env = {"PI_TELEGRAM_CHILD": "1", "PI_TELEGRAM_CHILD_TOKEN": "tok1", "PI_TELEGRAM_BIN": env.hub_bin}
    pi = Pi(env, extra_env=child_env)
    hello = wait_for(lambda: hub.ins("hello"), what="tools hello")[0]
    assert set(hello) == {"type", "protocol", "role", "secret", "token", "pid", "cwd", "version", "machine"}, hello
    assert hello["version"] == EXTENSION_VERSION, hello
    assert hello["role"] == "tools" and hello["token"] == "tok1" and hello["cwd"] == env.work, hello
    assert hello["pid"] == pi.p.pid, (hello, pi.p.pid)
    pi.prompt('[[tool:telegram_attach:{"paths":["out/report.txt"]}]]')
    wait_for(lambda: pi.settled() >= 1, what="run")
    call = tool_calls(hub)[0]
    assert call["tool"] == "telegram_attach" and "turn_id" not in call, call
    assert call["args"] == {"paths": [os.path.join(env.work, "out", "report.txt")]}, call
    assert pi.tool_results() == [("telegram_attach", False, "attached: " + os.path.join(env.work, "out", "report.txt"))]
    time.sleep(0.5)
    assert {e["msg"]["type"] for e in hub.entries(lambda e: e["dir"] == "in")} == {"hello", "tool_call"}
    assert pi.status == [] and env.hub_calls() == [], "no footer, no hub start"
    pi.prompt("/telegram-connect")
    assert "inactive" in pi.notes[-1], pi.notes
    # reconnects like the instance connection
    hub.stop()
    hub2 = MockHub(env, "--token", "tok1")
    hello = wait_for(lambda: hub2.ins("hello"), timeout=15, what="tools reconnect")[0]
    assert hello["role"] == "tools" and hello["token"] == "tok1", hello
    pi.prompt('[[tool:telegram_message:{"text":"again"}]]')
    wait_for(lambda: pi.settled() >= 2, what="run")
    assert pi.tool_results()[-1] == ("telegram_message", False, "message sent"), pi.tool_results()
    hub2.stop()
    # a token the hub does not know: refused, no retries
    hub3 = MockHub(env, "--token", "other")
    wait_for(lambda: hub3.ins("hello"), timeout=15, what="hello with the old token")
    time.sleep(3)
    assert len(hub3.ins("hello")) == 1, "no retry after a token refusal"
    pi.close()
    hub3.stop()


def s_loaded_twice(env):
    copy = os.path.join(env.root, "ext-copy")
    shutil.copytree(EXT_DIR, copy, ignore=shutil.ignore_patterns("dev", "node_modules"))
    hub = MockHub(env)
    pi = Pi(env, extensions=[copy])
    pi.prompt("/telegram-connect")
    wait_for(lambda: hub.ins("hello"), what="hello")
    time.sleep(1.5)
    assert len(hub.ins("hello")) == 1, "one connection for two copies"
    hub.send({"type": "prompt", "turn_id": "t1", "text": '[[tool:telegram_message:{"text":"once"}]]'})
    done = wait_for(lambda: hub.ins("turn_done"), what="t1")[0]
    assert done["text"] == "tool said: message sent" and len(tool_calls(hub)) == 1, (done, tool_calls(hub))
    errors = [m for m in pi.lines if m.get("type") == "extension_error"]
    assert errors == [], errors
    pi.close()
    hub.stop()
    hub = MockHub(env, "--token", "t")
    pi = Pi(env, extensions=[copy], extra_env={"PI_TELEGRAM_CHILD_TOKEN": "t"})
    wait_for(lambda: hub.ins("hello"), what="tools hello")
    time.sleep(1.5)
    assert len(hub.ins("hello")) == 1, "one tools connection for two copies"
    pi.close()
    hub.stop()


def s_reload(env):
    hub = MockHub(env)
    pi = Pi(env, extensions=[os.path.join(HERE, "reload_helper.ts")])
    pi.prompt("/telegram-connect")
    wait_for(lambda: hub.ins("hello"), what="hello")
    pi.prompt("/dev-reload")
    hello = wait_for(lambda: hub.ins("hello")[1:], what="hello after /reload")[0]
    assert hello["reason"] == "reload", hello
    assert hub.ins("bye") == [{"type": "bye", "reason": "shutdown"}], hub.ins("bye")
    hub.send({"type": "prompt", "turn_id": "t1", "text": '[[tool:telegram_attach:{"paths":["a"]}]]'})
    done = wait_for(lambda: hub.ins("turn_done"), what="t1")[0]
    assert done["text"] == "tool said: attached: " + os.path.join(env.work, "a"), done
    assert len(hub.ins("hello")) == 2
    pi.close()
    hub.stop()


def s_no_hub_into_a_deleted_folder(env):
    """A pi whose agent folder is deleted under it (a test's temporary folder) starts no hub there:
    the hub would recreate the folder and serve nobody. It says why."""
    pi = Pi(env, extra_env={"PI_TELEGRAM_BIN": env.hub_bin, "PI_TELEGRAM_AUTOSTART_MS": "300"})
    pi.prompt("/telegram-connect")
    hub = MockHub(env, spawn=False)
    hub.start_at = 0
    wait_for(lambda: hub.ins("hello"), what="hello to the auto-started hub")
    started = env.hub_calls()
    mock = hub.entries(lambda e: e["msg"] == "listening")[0]["pid"]
    shutil.rmtree(env.agent)
    os.kill(mock, 9)
    time.sleep(3)  # the extension tries to start a hub every 300 ms: time for several
    assert env.hub_calls() == started, env.hub_calls()
    assert not os.path.exists(env.agent), "the agent folder was made again"
    assert any(f"pi's agent folder {env.agent} is gone" in (n or "") for n in pi.notes), pi.notes
    pi.close()


def s_half_characters(env):
    """Half a character from the model (a lone UTF-16 surrogate; an emoji whose halves come in two
    chunks) reaches the hub as well-formed JSON: U+FFFD for the lone half, the emoji whole."""
    hub = MockHub(env)
    pi = Pi(env)
    pi.prompt("/telegram-connect")
    wait_for(lambda: hub.ins("hello"), what="hello")
    hub.send({"type": "prompt", "turn_id": "t1", "text": "[[lone-surrogate]]"})
    done = wait_for(lambda: hub.ins("turn_done"), what="t1")[0]
    assert done["text"] == "lone \ufffd surrogate", done
    hub.send({"type": "prompt", "turn_id": "t2", "text": "[[split-emoji]]"})
    done = wait_for(lambda: hub.ins("turn_done")[1:], what="t2")[0]
    assert done["text"] == "split \U0001F600 emoji", done
    # The streamed halves too (each delta alone is half an emoji).
    deltas = [m["event"].get("assistantMessageEvent", {}).get("delta") for m in hub.ins("event")
              if m["turn_id"] == "t2" and m["event"]["type"] == "message_update"]
    assert "\ufffd" in deltas, deltas
    assert not hub.entries(lambda e: e["msg"] == "LONE SURROGATE"), "a line with half a character"
    assert pi.assistant_texts()[-2] == "lone \ud800 surrogate", "pi itself keeps what the model sent"
    pi.close()
    hub.stop()


SAMPLES = os.path.join(REPO, "crates", "wire", "tests", "samples", "wire-lines.json")


def padded(v, pad):
    """`v` with @PAD@ in its strings replaced by `pad` (the sample file's padded lines)."""
    if pad is None:
        return v
    if isinstance(v, str):
        return v.replace("@PAD@", pad)
    if isinstance(v, list):
        return [padded(x, pad) for x in v]
    if isinstance(v, dict):
        return {k: padded(x, pad) for k, x in v.items()}
    return v


def s_wire_samples(env):
    """The shared sample lines (crates/wire/tests/samples/wire-lines.json, its "about" says what a
    case holds) written by the extension: the mock hub reads each one (read_client_line) as the
    file says the hub does. crates/wire's test and the extension's unit tests read the same file."""
    with open(SAMPLES) as f:
        cases = json.load(f)["cases"]
    failures, n = [], 0
    for c in cases:
        if c["from"] != "extension":
            continue
        raw = bytes.fromhex(c["line_hex"]) if "line_hex" in c else c["line"].encode("utf-8")
        pad = None
        if "pad_to_bytes" in c:
            pad = "x" * (c["pad_to_bytes"] - (len(raw) - len(b"@PAD@")))
            raw = raw.replace(b"@PAD@", pad.encode(), 1)
        want = padded(c.get("py", c["expect"]), pad)
        kind, value, notes = read_client_line(raw, c.get("first", False))
        if kind == "message":
            got = {"message": without_lone_surrogates(value), **({"notes": notes} if notes else {})}
        elif kind == "rejected":
            got = {"rejected": value}
        else:
            got = kind
        n += 1
        if got != want:
            shown = [json.dumps(x)[:300] for x in (want, got)]
            failures.append(f"{c['name']}:\n  wanted {shown[0]}\n  got    {shown[1]}")
    assert n >= 70, f"only {n} lines from the extension in {SAMPLES}"
    assert not failures, f"{len(failures)} of {n} sample lines:\n" + "\n".join(failures)


SCENARIOS = [s_wire_samples, s_handshake_and_turn, s_restart_duplicate_and_completed, s_outbox_is_bounded, s_queue_new_reload_and_remembered,
             s_autostart_and_disconnect, s_hub_fails_to_start, s_refusals, s_child_is_inert, s_abort_and_hub_requests,
             s_tools_over_the_instance_connection, s_tools_without_hub_and_on_connection_loss, s_prompt_with_images,
             s_child_tools_mode, s_loaded_twice, s_reload, s_half_characters,
             s_no_hub_into_a_deleted_folder]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        return mock_hub_main(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="", help="run only scenarios whose name contains this")
    ap.add_argument("--ts", action="store_true", help="load index.ts (transpiled by pi) instead of dist/index.js")
    a = ap.parse_args()
    if a.ts:
        global EXT
        EXT = os.path.join(EXT_DIR, "index.ts")
    elif not os.path.exists(EXT):
        sys.exit(f"{EXT} is missing: run scripts/build-extension.sh")
    pi_bin = os.environ.get("PI_BIN") or os.path.join(REPO, ".cache", "test-deps", "bin", "pi")
    if not os.path.exists(pi_bin):
        sys.exit(f"pi not found at {pi_bin}: run scripts/install-test-deps.sh or set PI_BIN")
    llm = ThreadingHTTPServer(("127.0.0.1", 0), FakeLLM)
    threading.Thread(target=llm.serve_forever, daemon=True).start()
    failed = 0
    for s in SCENARIOS:
        if a.k not in s.__name__:
            continue
        env = Env(pi_bin, llm.server_address[1])
        t0 = time.time()
        try:
            s(env)
            rejected = env.rejected_lines()
            assert not rejected, f"the extension wrote lines the hub refuses: {rejected}"
            print(f"PASS {s.__name__} ({time.time() - t0:.1f}s)", flush=True)
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {s.__name__} ({time.time() - t0:.1f}s)\n{traceback.format_exc()}", flush=True)
        finally:
            env.cleanup()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
