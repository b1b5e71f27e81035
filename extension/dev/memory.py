#!/usr/bin/env python3
"""What the extension costs pi in memory: starts the real pi offline (`pi --mode rpc`, a temporary
agent dir, the fake LLM and mock hub of smoke.py) in several variants and prints the RSS of the pi
process (VmRSS and VmHWM from /proc/<pid>/status), the median over several runs.

    python3 extension/dev/memory.py                  # pi from $PI_BIN, else .cache/test-deps/bin/pi
    python3 extension/dev/memory.py -n 5 --prompts 20 --variants pi,emptyjs,ext,hub

Variants:
  pi     pi alone (no extension)
  empty  pi with an empty TypeScript extension (`export default function (): void {}`): pi
         transpiles any .ts extension (jiti, with Babel), a cost every TypeScript extension pays
  emptyjs  pi with an empty JavaScript extension (index.mjs), which Node imports by itself: the
         cost of pi's extension loader (jiti) alone, the floor for any extension
  ext    pi with the extension installed as `pi-telegram install-extension` does (the files copied
         to <agent-dir>/telegram/extension/, registered in settings.json "packages"); not connected
  hub    the same, in a project remembered in connections.json with a mock hub running: the
         extension connects at session start, and the prompts' events go to the hub

Points: `start` (pi answered get_state, then 1.5 s idle), `connect` (the hub got the hello, then
1.5 s; for the variants without a hub, another 1.5 s), `prompts` (after N prompts, each to
agent_settled, then 1 s). A variant `e:PATH` loads the extension file PATH with `-e` (for
bisecting). Standard library only.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import smoke  # noqa: E402  (the fake LLM, the mock hub, the temporary agent dir)

EXT_DIR = os.path.dirname(HERE)
POINTS = ("start", "connect", "prompts")


def status(pid):
    """VmRSS and VmHWM of pid, in MB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024
    return out


def install_extension(env, src):
    """What `pi-telegram install-extension` does: the extension's files (without dev/) in
    <agent-dir>/telegram/extension/, that folder in settings.json "packages"."""
    dest = os.path.join(env.agent, "telegram", "extension")
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("dev", "node_modules", ".*"))
    settings_path = os.path.join(env.agent, "settings.json")
    settings = json.load(open(settings_path))
    settings["packages"] = [dest]
    with open(settings_path, "w") as f:
        json.dump(settings, f)


class RpcPi:
    def __init__(self, env, args):
        self.p = subprocess.Popen([env.pi_bin, "--mode", "rpc", "--no-session", *args], cwd=env.work, env=env.env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        env.procs.append(self.p)
        self.lines, self.n = [], 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                pass

    def cmd(self, o, timeout=60):
        self.n += 1
        cid = f"m{self.n}"
        self.p.stdin.write(json.dumps(dict(o, id=cid)) + "\n")
        self.p.stdin.flush()
        return smoke.wait_for(lambda: next((m for m in self.lines if m.get("type") == "response" and m.get("id") == cid), None),
                              timeout, what=f"response to {o.get('type')}")

    def settled(self):
        return sum(1 for m in self.lines if m.get("type") == "agent_settled")

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()


def run_once(pi_bin, llm_port, variant, prompts, ext_src):
    env = smoke.Env(pi_bin, llm_port)
    try:
        args, hub = [], None
        if variant in ("empty", "emptyjs"):
            empty = os.path.join(env.root, "empty-extension", "index.ts" if variant == "empty" else "index.mjs")
            os.makedirs(os.path.dirname(empty))
            with open(empty, "w") as f:
                f.write("export default function (): void {}\n" if variant == "empty" else "export default function () {}\n")
            args = ["-e", empty]
        elif variant.startswith("e:"):
            args = ["-e", os.path.abspath(variant[2:])]
        elif variant in ("ext", "hub"):
            install_extension(env, ext_src)
        if variant == "hub":
            hub = smoke.MockHub(env)
            with open(os.path.join(env.agent, "telegram", "connections.json"), "w") as f:
                json.dump({"version": 1, "projects": {env.work: {"profile": "default"}}}, f)
        pi = RpcPi(env, args)
        pid = pi.p.pid
        out = {}
        pi.cmd({"type": "get_state"})
        time.sleep(1.5)
        out["start"] = status(pid)
        if hub:
            smoke.wait_for(lambda: hub.ins("hello"), what="hello")
        time.sleep(1.5)
        out["connect"] = status(pid)
        for i in range(prompts):
            r = pi.cmd({"type": "prompt", "message": f"prompt {i}: " + "lorem ipsum " * 50})
            assert r.get("success"), r
            smoke.wait_for(lambda: pi.settled() > i, timeout=60, what=f"prompt {i} settled")
        time.sleep(1.0)
        out["prompts"] = status(pid)
        if hub:
            n_events = len(hub.ins("event"))
            assert n_events > prompts, f"the hub got only {n_events} events"
        pi.close()
        if hub:
            hub.stop()
        return out
    finally:
        env.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=5, help="runs per variant (median)")
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--variants", default="pi,empty,emptyjs,ext,hub")
    ap.add_argument("--ext", default=EXT_DIR, help="the extension folder to install (default: this one)")
    ap.add_argument("--json", help="also write the raw samples here")
    a = ap.parse_args()
    pi_bin = os.environ.get("PI_BIN") or os.path.join(smoke.REPO, ".cache", "test-deps", "bin", "pi")
    if not os.path.exists(pi_bin):
        sys.exit(f"pi not found at {pi_bin}: run scripts/install-test-deps.sh or set PI_BIN")
    llm = ThreadingHTTPServer(("127.0.0.1", 0), smoke.FakeLLM)
    threading.Thread(target=llm.serve_forever, daemon=True).start()
    variants = a.variants.split(",")
    samples = {v: [] for v in variants}
    # interleaved, so that a slow phase of the machine hits every variant alike
    for run in range(a.n):
        for v in variants:
            samples[v].append(run_once(pi_bin, llm.server_address[1], v, a.prompts, os.path.abspath(a.ext)))
            print(f"run {run + 1}/{a.n} {v}: " + "  ".join(f"{p} {samples[v][-1][p]['VmRSS']:.1f}" for p in POINTS),
                  file=sys.stderr, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(samples, f, indent=1)

    def med(v, p, k):
        return statistics.median(s[p][k] for s in samples[v])

    base = variants[0]
    print(f"\nRSS of the pi process in MB, median of {a.n} runs ({a.prompts} prompts); "
          f"+x = more than '{base}'")
    head = f"{'variant':8}" + "".join(f"{p + ' RSS':>17}" for p in POINTS) + f"{'peak (HWM)':>17}"
    print(head)
    print("-" * len(head))
    for v in variants:
        row = f"{v:8}"
        for p in POINTS:
            x = med(v, p, "VmRSS")
            row += f"{x:9.1f} ({x - med(base, p, 'VmRSS'):+5.1f})"
        x = med(v, "prompts", "VmHWM")
        row += f"{x:9.1f} ({x - med(base, 'prompts', 'VmHWM'):+5.1f})"
        print(row)


if __name__ == "__main__":
    main()
