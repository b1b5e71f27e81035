import * as fs from "node:fs";
import { otherHubAlive, spawnHub } from "./hub-process.js";
import { thisMachine } from "./machine.js";
import { lastLine, profilePaths } from "./paths.js";
import { binaryVersion, hubBinary, ownVersion } from "./release.js";
import { globalState } from "./state.js";
import { describeTarget, isRemote, localTarget, openTransport, resolveTarget } from "./transport.js";
import { decodeHandshake, decodeHubMessage, encodeLine, LineReader, PROTOCOL, } from "./wire.js";
const OUTBOX_CAP = 1000;
const OUTBOX_CAP_CHARS = 512 * 1024;
const BACKLOG_CAP = 1024 * 1024;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 10_000;
const FAST_RETRY_MS = 250;
const HUB_START_WAIT_MS = 10_000;
const HANDSHAKE_TIMEOUT_MS = 10_000;
const REPLACE_POLL_MS = 100;
const AUTO_START_INTERVAL_MS = Number(process.env.PI_TELEGRAM_AUTOSTART_MS) || 30_000;
const HALTING_REFUSALS = new Set(["protocol", "secret", "token"]);
export class HubConnection {
    cb;
    profile;
    paths;
    role;
    phase = "waiting";
    detail = "connecting…";
    welcome;
    halted;
    autoStart;
    target;
    outbox = [];
    outboxChars = 0;
    sock;
    timer;
    handshakeTimer;
    backoff = BACKOFF_MIN_MS;
    fastUntil = 0;
    failed = false;
    lastShown = new Set();
    waiter;
    hubExitError;
    replacing;
    constructor(profile, cb, opts) {
        this.cb = cb;
        this.profile = profile;
        this.paths = profilePaths(profile);
        this.target = localTarget(this.paths);
        this.role = opts.role;
        this.autoStart = opts.role === "instance" ? opts.autoStart : false;
    }
    start() {
        if (this.phase === "stopped")
            return;
        this.attemptSoon(0);
    }
    connectNow() {
        this.halted = undefined;
        this.backoff = BACKOFF_MIN_MS;
        this.lastShown.clear();
        if (this.phase === "connected")
            return Promise.resolve({ ok: true, message: this.connectedText() });
        this.settleWaiter({ ok: false, message: "superseded by a newer connect", silent: true });
        return new Promise((resolve) => {
            const timer = setTimeout(() => {
                this.settleWaiter({
                    ok: false,
                    message: `could not reach the hub of profile ${this.profile} within ${HUB_START_WAIT_MS / 1000} s (${this.detail}); ${isRemote(this.target) ? `it is at ${this.where}` : `see ${this.paths.log}`}. Still trying in the background.`,
                });
            }, HUB_START_WAIT_MS + 2000);
            timer.unref?.();
            this.waiter = { resolve, timer };
            if (this.phase !== "connecting" && this.phase !== "handshake")
                this.attemptSoon(0, true);
        });
    }
    stop(bye) {
        const wasConnected = this.phase === "connected";
        this.phase = "stopped";
        this.detail = "disconnected";
        this.clearTimers();
        this.outbox = [];
        this.outboxChars = 0;
        const s = this.sock;
        this.sock = undefined;
        if (s) {
            try {
                if (wasConnected && bye && s.writable)
                    s.end(encodeLine({ type: "bye", reason: bye }));
                else
                    s.destroy();
            }
            catch (e) {
                this.cb.problem("saying goodbye to the hub", e);
                s.destroy();
            }
        }
        this.settleWaiter({ ok: false, message: "stopped", silent: true });
    }
    get connected() {
        return this.phase === "connected";
    }
    get unreachable() {
        if (this.phase === "connected")
            return false;
        if (this.halted !== undefined || this.phase === "stopped")
            return true;
        return this.failed && Date.now() >= this.fastUntil;
    }
    get where() {
        return describeTarget(this.target);
    }
    drained(limit = 1 << 20) {
        const s = this.sock;
        if (!s || !s.writable || s.writableLength <= limit)
            return Promise.resolve();
        return new Promise((resolve) => {
            const done = () => {
                s.off("drain", done);
                s.off("close", done);
                resolve();
            };
            s.on("drain", done);
            s.on("close", done);
        });
    }
    send(msg, opts = {}) {
        const s = this.sock;
        const connected = this.phase === "connected" && s !== undefined && s.writable;
        if (connected && opts.buffer && s.writableLength > BACKLOG_CAP)
            return false;
        const line = encodeLine(msg, opts.fallback);
        if (connected) {
            try {
                s.write(line);
                return true;
            }
            catch (e) {
                this.cb.problem(`writing ${msg.type} to the hub`, e);
                s.destroy();
            }
        }
        if (opts.buffer && this.phase !== "stopped") {
            this.outbox.push(line);
            this.outboxChars += line.length;
            let drop = 0;
            while (this.outbox.length - drop > 1 &&
                (this.outbox.length - drop > OUTBOX_CAP || this.outboxChars > OUTBOX_CAP_CHARS)) {
                this.outboxChars -= this.outbox[drop]?.length ?? 0;
                drop++;
            }
            if (drop > 0)
                this.outbox.splice(0, drop);
        }
        return false;
    }
    get buffered() {
        return this.outbox.length;
    }
    statusText() {
        if (this.phase === "connected")
            return "telegram: connected";
        if (this.halted)
            return "telegram: refused by the hub";
        return `telegram: ${this.detail}`;
    }
    connectedText() {
        return `connected to the hub of profile ${this.profile} (hub pid ${this.welcome?.hub_pid ?? "?"}, instance ${this.welcome?.instance_id ?? "?"})`;
    }
    clearTimers() {
        if (this.timer)
            clearTimeout(this.timer);
        if (this.handshakeTimer)
            clearTimeout(this.handshakeTimer);
        this.timer = undefined;
        this.handshakeTimer = undefined;
    }
    settleWaiter(o) {
        const w = this.waiter;
        if (!w)
            return;
        this.waiter = undefined;
        clearTimeout(w.timer);
        w.resolve(o);
    }
    showOnce(text, level) {
        if (this.waiter)
            return;
        if (this.lastShown.has(text))
            return;
        this.lastShown.add(text);
        this.cb.notify(text, level);
    }
    setDetail(detail) {
        if (this.detail === detail)
            return;
        this.detail = detail;
        this.cb.onStatus();
    }
    attemptSoon(delayMs, explicit = false) {
        if (this.phase === "stopped")
            return;
        if (this.timer)
            clearTimeout(this.timer);
        this.timer = setTimeout(() => {
            this.timer = undefined;
            this.attempt(explicit);
        }, delayMs);
        this.timer.unref?.();
    }
    scheduleRetry() {
        this.failed = true;
        if (this.phase === "stopped" || this.halted)
            return;
        this.phase = "waiting";
        if (Date.now() < this.fastUntil) {
            this.attemptSoon(FAST_RETRY_MS);
            return;
        }
        const delay = this.backoff;
        this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
        this.attemptSoon(delay);
    }
    readSecret() {
        try {
            return fs.readFileSync(this.paths.secret, "utf8").trim() || undefined;
        }
        catch (e) {
            if (e.code !== "ENOENT")
                this.cb.problem(`reading ${this.paths.secret}`, e);
            return undefined;
        }
    }
    attempt(explicit) {
        if (this.phase === "stopped" || this.halted)
            return;
        const target = this.role === "tools" ? localTarget(this.paths) : resolveTarget(this.profile, this.paths);
        if (target.kind === "invalid") {
            this.halt(`telegram: ${target.message}`);
            return;
        }
        this.target = target;
        const secret = target.kind === "local" ? this.readSecret() : target.secret;
        if (target.kind === "local" && (!secret || !fs.existsSync(this.paths.socket))) {
            this.hubNotRunning(explicit);
            return;
        }
        this.phase = "connecting";
        const s = openTransport(target, {
            ready: () => {
                if (this.sock !== s)
                    return;
                this.phase = "handshake";
                s.write(encodeLine({ type: "hello", protocol: PROTOCOL, secret: secret ?? "", version: ownVersion(), machine: thisMachine(), ...this.cb.hello() }));
                this.handshakeTimer = setTimeout(() => {
                    if (this.sock === s && this.phase === "handshake") {
                        this.setDetail("the hub did not answer the hello");
                        s.destroy();
                    }
                }, HANDSHAKE_TIMEOUT_MS);
                this.handshakeTimer.unref?.();
            },
            untrusted: (text) => {
                if (this.sock === s)
                    this.halt(text);
            },
        });
        s.unref();
        this.sock = s;
        const reader = new LineReader();
        let errCode;
        s.on("data", (chunk) => {
            if (this.sock !== s)
                return;
            const { messages, error } = reader.push(chunk);
            for (const m of messages) {
                if (this.sock !== s)
                    return;
                this.incoming(s, m);
            }
            if (error && this.sock === s) {
                try {
                    s.end(encodeLine({ type: "error", message: error }));
                }
                catch (e) {
                    this.cb.problem("reporting a protocol error to the hub", e);
                }
                s.destroy();
            }
        });
        s.on("error", (e) => {
            errCode = e.code;
        });
        s.on("close", () => {
            if (this.sock !== s)
                return;
            this.sock = undefined;
            if (this.handshakeTimer)
                clearTimeout(this.handshakeTimer);
            this.handshakeTimer = undefined;
            const was = this.phase;
            if (was === "stopped")
                return;
            this.welcome = undefined;
            if (was === "connected") {
                this.phase = "waiting";
                this.backoff = BACKOFF_MIN_MS;
                this.setDetail("hub connection lost, reconnecting…");
                this.cb.onStatus();
                this.scheduleRetry();
                return;
            }
            if (target.kind === "local" && (errCode === "ENOENT" || errCode === "ECONNREFUSED")) {
                this.hubNotRunning(explicit);
                return;
            }
            if (isRemote(target) && was === "connecting" && !this.halted) {
                const detail = `cannot reach the hub at ${describeTarget(target)} (${errCode ?? "closed"})`;
                this.setDetail(detail);
                this.settleWaiter({ ok: false, message: `${detail}; still trying in the background` });
                this.scheduleRetry();
                return;
            }
            if (!this.halted)
                this.setDetail(errCode ? `cannot connect (${errCode})` : "reconnecting…");
            this.reportHubExit();
            this.scheduleRetry();
        });
    }
    incoming(s, raw) {
        if (this.phase === "connected") {
            const msg = decodeHubMessage(raw);
            if (msg)
                this.cb.onMessage(msg);
            return;
        }
        if (this.phase !== "handshake")
            return;
        const msg = decodeHandshake(raw);
        if (!msg)
            return;
        if (msg.type === "welcome") {
            if (msg.protocol !== PROTOCOL) {
                const text = `the hub speaks protocol ${String(msg.protocol)}, this extension speaks ${PROTOCOL}: update pi-telegram and the extension to the same version`;
                this.halt(text);
                s.destroy();
                return;
            }
            if (this.handshakeTimer)
                clearTimeout(this.handshakeTimer);
            this.handshakeTimer = undefined;
            this.phase = "connected";
            this.failed = false;
            this.backoff = BACKOFF_MIN_MS;
            this.fastUntil = 0;
            this.hubExitError = undefined;
            this.lastShown.clear();
            this.welcome = {
                hub_pid: msg.hub_pid,
                instance_id: msg.instance_id,
                hub_version: msg.hub_version,
                store_id: msg.store_id,
                files: msg.files,
            };
            this.detail = "connected";
            try {
                this.cb.onWelcome(this.welcome);
            }
            catch (e) {
                this.cb.problem("after the hub's welcome", e);
            }
            const lines = this.outbox;
            this.outbox = [];
            this.outboxChars = 0;
            for (const l of lines)
                if (s.writable)
                    s.write(l);
            this.cb.onStatus();
            this.settleWaiter({ ok: true, message: this.connectedText() });
            void this.checkRelease(this.welcome);
            return;
        }
        const text = `the hub of profile ${this.profile} refused this pi: ${msg.message}`;
        if (HALTING_REFUSALS.has(msg.code)) {
            this.halt(text);
        }
        else {
            this.setDetail(`refused (${msg.code || "?"})`);
            this.settleWaiter({ ok: false, message: text });
            this.showOnce(text, "error");
        }
        s.destroy();
    }
    halt(text) {
        this.halted = text;
        this.detail = "refused by the hub";
        if (this.phase !== "stopped" && this.phase !== "connected")
            this.phase = "waiting";
        this.clearTimers();
        this.cb.onStatus();
        if (this.waiter)
            this.settleWaiter({ ok: false, message: text });
        else
            this.showOnce(text, "error");
    }
    async checkRelease(welcome) {
        const ours = ownVersion();
        if (this.role !== "instance" || welcome.hub_version === ours || ours === "unknown")
            return;
        const theirs = welcome.hub_version ?? "of an older release";
        const pid = welcome.hub_pid;
        if (isRemote(this.target) || pid === null) {
            this.showOnce(`telegram: the hub is ${theirs}, this pi's pi-telegram ${ours}: update the hub's machine to ${ours}`, "warning");
            return;
        }
        const found = hubBinary();
        const would = "bin" in found ? await binaryVersion(found.bin) : undefined;
        if (this.phase !== "connected" || this.welcome !== welcome)
            return;
        if (!("bin" in found) || would !== ours) {
            const binary = "bin" in found ? `${found.bin} (${found.source}) is ${would ?? "of an unknown release"}` : found.problem;
            this.showOnce(`telegram: this pi runs pi-telegram ${ours} and the hub ${theirs}; ${binary}. Restart pi (or /reload) after updating so both are one release`, "warning");
            return;
        }
        this.cb.notify(`telegram: replacing the running hub (${theirs}, pid ${pid}) with ${ours} from ${found.source}; nothing waiting for pi is lost`, "info");
        this.replacing = pid;
        try {
            process.kill(pid, "SIGTERM");
        }
        catch (e) {
            this.replacing = undefined;
            this.cb.problem(`stopping the hub of release ${theirs}`, e);
        }
    }
    static alive(pid) {
        try {
            process.kill(pid, 0);
            return true;
        }
        catch (e) {
            return e.code === "EPERM";
        }
    }
    hubNotRunning(explicit) {
        if (this.replacing !== undefined) {
            if (HubConnection.alive(this.replacing)) {
                this.setDetail("waiting for the old hub to stop…");
                this.attemptSoon(REPLACE_POLL_MS);
                return;
            }
            this.replacing = undefined;
            globalState().lastAutoStart = Date.now();
            this.startHub();
            this.scheduleRetry();
            return;
        }
        if (this.hubExitError) {
            this.setDetail("hub not running");
            this.reportHubExit();
            this.scheduleRetry();
            return;
        }
        const g = globalState();
        const now = Date.now();
        const mayStart = this.autoStart && (explicit || now - g.lastAutoStart >= AUTO_START_INTERVAL_MS);
        if (now < this.fastUntil) {
            this.setDetail("starting the hub…");
            this.scheduleRetry();
            return;
        }
        if (mayStart && !explicit && fs.existsSync(this.paths.stopped)) {
            this.setDetail("hub stopped on purpose (/telegram-connect starts it)");
            this.scheduleRetry();
            return;
        }
        if (mayStart) {
            g.lastAutoStart = now;
            this.startHub();
            this.scheduleRetry();
            return;
        }
        this.setDetail("hub not running");
        if (this.waiter && !this.autoStart) {
            this.settleWaiter({ ok: false, message: `the hub of profile ${this.profile} is not running` });
        }
        this.scheduleRetry();
    }
    startHub() {
        this.fastUntil = Date.now() + HUB_START_WAIT_MS;
        this.setDetail("starting the hub…");
        spawnHub(this.profile, this.paths, {
            failed: (text) => this.hubFailed(text),
            exited: (code, signal, pid) => {
                if (this.phase === "stopped" || this.phase === "connected")
                    return;
                if (otherHubAlive(this.paths.dir, pid))
                    return;
                const line = lastLine(this.paths.log);
                this.fastUntil = 0;
                this.hubExitError = `the hub exited (${code !== null ? `code ${code}` : signal}): ${line ?? "no output"} (log: ${this.paths.log})`;
                if (this.phase === "waiting")
                    this.attemptSoon(0);
            },
            problem: (where, e) => this.cb.problem(where, e),
        });
    }
    reportHubExit() {
        const text = this.hubExitError;
        if (!text)
            return;
        this.hubExitError = undefined;
        this.hubFailed(text);
    }
    hubFailed(text) {
        if (this.phase === "stopped")
            return;
        this.fastUntil = 0;
        if (this.phase === "connected")
            return;
        this.setDetail("hub not running");
        if (this.waiter)
            this.settleWaiter({ ok: false, message: text });
        else
            this.showOnce(text, "warning");
    }
}
