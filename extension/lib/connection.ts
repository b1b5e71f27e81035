/**
 * The connection of one extension instance to the hub of one profile (docs/wire-protocol.md):
 * handshake, reading, bounded buffering while away, quiet reconnects with backoff (1 s doubling
 * to 10 s), and, for the `instance` role, starting the hub when it is not running
 * (`hub-process.ts`). The `tools` role (a hub-spawned child) never starts a hub and never says
 * goodbye: the hub owns that process. Where the hub is (this machine's hub.sock, or a hub on
 * another machine, which is never started from here) is `transport.ts`'s business.
 *
 * Nothing here throws to its callers; failures become state (`phase`, `detail`) and callbacks.
 */
import * as fs from "node:fs";
import type * as net from "node:net";
import { otherHubAlive, spawnHub } from "./hub-process.ts";
import { thisMachine } from "./machine.ts";
import { lastLine, type ProfilePaths, profilePaths } from "./paths.ts";
import { binaryVersion, hubBinary, ownVersion } from "./release.ts";
import { globalState } from "./state.ts";
import { describeTarget, type HubTarget, isRemote, localTarget, openTransport, resolveTarget } from "./transport.ts";
import {
	type ByeReason,
	type ClientMessage,
	decodeHandshake,
	decodeHubMessage,
	encodeLine,
	type HelloFields,
	type HubMessage,
	type Json,
	type Level,
	LineReader,
	PROTOCOL,
} from "./wire.ts";

export type Phase = "stopped" | "waiting" | "connecting" | "handshake" | "connected";
export type Role = "instance" | "tools";

export interface WelcomeInfo {
	hub_pid: number | null;
	instance_id: string | null;
	/** The hub's release; null from a hub that does not say. */
	hub_version: string | null;
	/** The hub's state database; null from an older hub. */
	store_id: string | null;
	/** How files cross the connection ("bytes": pi is on another machine). */
	files: "paths" | "bytes";
}

export interface ConnectOutcome {
	ok: boolean;
	message: string;
	/** Nothing to show (a newer connect took over, or the session ended). */
	silent?: boolean;
}

export interface ConnectionCallbacks {
	/** The hello's fields besides type, protocol and secret (built at each attempt). */
	hello(): HelloFields;
	/** After a welcome, before the outbox is flushed. */
	onWelcome(welcome: WelcomeInfo): void;
	/** Every message after the welcome that this extension knows (unknown types are ignored). */
	onMessage(msg: HubMessage): void;
	/** The connection state changed (footer, pending tool calls). */
	onStatus(): void;
	/** Show something to the person. */
	notify(text: string, level: Level): void;
	/** A failure that is only recorded (see log.ts). */
	problem(where: string, e: unknown): void;
}

export interface SendOptions {
	/** Keep the line while disconnected (events), in a bounded outbox. */
	buffer?: boolean;
	/** What to send instead when the message cannot fit in one line. */
	fallback?: () => ClientMessage;
}

const OUTBOX_CAP = 1000;
/**
 * The outbox holds at most this many UTF-16 code units besides its newest line (0.5-1 MB; a line
 * is at most 1 MiB), so a hub that is away during a long run costs pi little memory.
 */
const OUTBOX_CAP_CHARS = 512 * 1024;
/** Events are dropped while this much is unsent on the socket: a hub that stopped reading. */
const BACKLOG_CAP = 1024 * 1024;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 10_000;
const FAST_RETRY_MS = 250;
const HUB_START_WAIT_MS = 10_000;
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** How often a hub being replaced is looked at until it is gone (it stops within a second or two). */
const REPLACE_POLL_MS = 100;
/** How often a missing hub is started again (no stop marker); tests shorten it. */
const AUTO_START_INTERVAL_MS = Number(process.env.PI_TELEGRAM_AUTOSTART_MS) || 30_000;
/** Refusals that retrying cannot fix: stop until the next connect command or session start. */
const HALTING_REFUSALS: ReadonlySet<string> = new Set(["protocol", "secret", "token"]);

export class HubConnection {
	private readonly cb: ConnectionCallbacks;
	readonly profile: string;
	readonly paths: ProfilePaths;
	readonly role: Role;
	phase: Phase = "waiting";
	/** Why we are not connected, for the footer and /telegram-status. */
	detail = "connecting…";
	welcome: WelcomeInfo | undefined;
	/** Set after a refusal that retrying cannot fix (protocol, secret, token). */
	halted: string | undefined;
	/**
	 * Start the hub when it is not running (the project is remembered or the person asked).
	 * Always false for the tools role.
	 */
	autoStart: boolean;
	/** Where the hub was looked for last (this machine's hub.sock until an attempt says otherwise). */
	target: HubTarget;
	/** Lines waiting for the connection (see OUTBOX_CAP*, the oldest dropped first). */
	private outbox: string[] = [];
	/** The outbox's length in UTF-16 code units. */
	private outboxChars = 0;
	private sock: net.Socket | undefined;
	private timer: NodeJS.Timeout | undefined;
	private handshakeTimer: NodeJS.Timeout | undefined;
	private backoff = BACKOFF_MIN_MS;
	private fastUntil = 0;
	/** An attempt failed (or the connection was lost) since the last welcome. */
	private failed = false;
	private lastShown = new Set<string>();
	private waiter: { resolve: (o: ConnectOutcome) => void; timer: NodeJS.Timeout } | undefined;
	/**
	 * A hub we started exited with an error. It is reported only if the next attempt fails too:
	 * when two pis start a hub at once, the loser exits ("another hub is already serving this
	 * profile") while the winner answers.
	 */
	private hubExitError: string | undefined;
	/**
	 * The pid of a hub of another release this connection stopped (SIGTERM) to start its own
	 * release in its place, until that process is gone.
	 */
	private replacing: number | undefined;

	constructor(
		profile: string,
		cb: ConnectionCallbacks,
		opts: { role: "instance"; autoStart: boolean } | { role: "tools" },
	) {
		this.cb = cb;
		this.profile = profile;
		this.paths = profilePaths(profile);
		this.target = localTarget(this.paths);
		this.role = opts.role;
		this.autoStart = opts.role === "instance" ? opts.autoStart : false;
	}

	/** Starts connecting (quietly, in the background). */
	start(): void {
		if (this.phase === "stopped") return;
		this.attemptSoon(0);
	}

	/**
	 * Starts (or restarts) connecting for a connect command and resolves when the outcome is
	 * known: welcomed, refused, the hub failed to start, or ~10 s passed.
	 */
	connectNow(): Promise<ConnectOutcome> {
		this.halted = undefined;
		this.backoff = BACKOFF_MIN_MS;
		this.lastShown.clear();
		if (this.phase === "connected") return Promise.resolve({ ok: true, message: this.connectedText() });
		this.settleWaiter({ ok: false, message: "superseded by a newer connect", silent: true });
		return new Promise<ConnectOutcome>((resolve) => {
			const timer = setTimeout(() => {
				this.settleWaiter({
					ok: false,
					message: `could not reach the hub of profile ${this.profile} within ${HUB_START_WAIT_MS / 1000} s (${this.detail}); ${isRemote(this.target) ? `it is at ${this.where}` : `see ${this.paths.log}`}. Still trying in the background.`,
				});
			}, HUB_START_WAIT_MS + 2000);
			timer.unref?.();
			this.waiter = { resolve, timer };
			if (this.phase !== "connecting" && this.phase !== "handshake") this.attemptSoon(0, true);
		});
	}

	/** Stops for good, saying goodbye when connected and `bye` is given. */
	stop(bye?: ByeReason): void {
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
				if (wasConnected && bye && s.writable) s.end(encodeLine({ type: "bye", reason: bye }));
				else s.destroy();
			} catch (e) {
				this.cb.problem("saying goodbye to the hub", e);
				s.destroy();
			}
		}
		this.settleWaiter({ ok: false, message: "stopped", silent: true });
	}

	get connected(): boolean {
		return this.phase === "connected";
	}

	/**
	 * Whether a call cannot reach the hub now: refused, stopped, or failing since the last
	 * welcome. A first attempt still under way, or a hub this connection started coming up,
	 * is not: it is about to work.
	 */
	get unreachable(): boolean {
		if (this.phase === "connected") return false;
		if (this.halted !== undefined || this.phase === "stopped") return true;
		return this.failed && Date.now() >= this.fastUntil;
	}

	/** Where the hub is reached (a socket path, or host:port for a hub on another machine). */
	get where(): string {
		return describeTarget(this.target);
	}

	/**
	 * Sends a message now when connected; otherwise keeps it in the bounded outbox when `buffer`
	 * is set (events), or drops it. Returns whether it was written.
	 */
	/** Resolves once the socket's write buffer holds at most `limit` bytes (or it closed): a
	 * sender of many lines (an upload) waits here rather than buffering a whole file. */
	drained(limit = 1 << 20): Promise<void> {
		const s = this.sock;
		if (!s || !s.writable || s.writableLength <= limit) return Promise.resolve();
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

	send(msg: ClientMessage, opts: SendOptions = {}): boolean {
		const s = this.sock;
		const connected = this.phase === "connected" && s !== undefined && s.writable;
		// Events (the previews) are dropped rather than queued behind a hub that stopped reading.
		if (connected && opts.buffer && s.writableLength > BACKLOG_CAP) return false;
		const line = encodeLine(msg, opts.fallback);
		if (connected) {
			try {
				s.write(line);
				return true;
			} catch (e) {
				// a broken socket: closing it makes the close handler reconnect
				this.cb.problem(`writing ${msg.type} to the hub`, e);
				s.destroy();
			}
		}
		if (opts.buffer && this.phase !== "stopped") {
			this.outbox.push(line);
			this.outboxChars += line.length;
			let drop = 0;
			while (
				this.outbox.length - drop > 1 &&
				(this.outbox.length - drop > OUTBOX_CAP || this.outboxChars > OUTBOX_CAP_CHARS)
			) {
				this.outboxChars -= this.outbox[drop]?.length ?? 0;
				drop++;
			}
			if (drop > 0) this.outbox.splice(0, drop);
		}
		return false;
	}

	get buffered(): number {
		return this.outbox.length;
	}

	/** The footer text. */
	statusText(): string {
		if (this.phase === "connected") return "telegram: connected";
		if (this.halted) return "telegram: refused by the hub";
		return `telegram: ${this.detail}`;
	}

	private connectedText(): string {
		return `connected to the hub of profile ${this.profile} (hub pid ${this.welcome?.hub_pid ?? "?"}, instance ${this.welcome?.instance_id ?? "?"})`;
	}

	private clearTimers(): void {
		if (this.timer) clearTimeout(this.timer);
		if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
		this.timer = undefined;
		this.handshakeTimer = undefined;
	}

	private settleWaiter(o: ConnectOutcome): void {
		const w = this.waiter;
		if (!w) return;
		this.waiter = undefined;
		clearTimeout(w.timer);
		w.resolve(o);
	}

	/** Shows a message once per connect command / session (background retries stay quiet). */
	private showOnce(text: string, level: Level): void {
		if (this.waiter) return; // the connect command reports it
		if (this.lastShown.has(text)) return;
		this.lastShown.add(text);
		this.cb.notify(text, level);
	}

	private setDetail(detail: string): void {
		if (this.detail === detail) return;
		this.detail = detail;
		this.cb.onStatus();
	}

	private attemptSoon(delayMs: number, explicit = false): void {
		if (this.phase === "stopped") return;
		if (this.timer) clearTimeout(this.timer);
		this.timer = setTimeout(() => {
			this.timer = undefined;
			this.attempt(explicit);
		}, delayMs);
		this.timer.unref?.();
	}

	private scheduleRetry(): void {
		this.failed = true;
		if (this.phase === "stopped" || this.halted) return;
		this.phase = "waiting";
		if (Date.now() < this.fastUntil) {
			this.attemptSoon(FAST_RETRY_MS);
			return;
		}
		const delay = this.backoff;
		this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
		this.attemptSoon(delay);
	}

	/** The shared secret, or undefined when the hub has not written it (not running). */
	private readSecret(): string | undefined {
		try {
			return fs.readFileSync(this.paths.secret, "utf8").trim() || undefined;
		} catch (e) {
			if ((e as NodeJS.ErrnoException).code !== "ENOENT") this.cb.problem(`reading ${this.paths.secret}`, e);
			return undefined;
		}
	}

	private attempt(explicit: boolean): void {
		if (this.phase === "stopped" || this.halted) return;
		// A hub-spawned child always talks to the hub on this machine that spawned it.
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
				if (this.sock !== s) return;
				this.phase = "handshake";
				s.write(
					encodeLine({ type: "hello", protocol: PROTOCOL, secret: secret ?? "", version: ownVersion(), machine: thisMachine(), ...this.cb.hello() }),
				);
				this.handshakeTimer = setTimeout(() => {
					if (this.sock === s && this.phase === "handshake") {
						this.setDetail("the hub did not answer the hello");
						s.destroy();
					}
				}, HANDSHAKE_TIMEOUT_MS);
				this.handshakeTimer.unref?.();
			},
			untrusted: (text) => {
				if (this.sock === s) this.halt(text);
			},
		});
		s.unref(); // never keep pi alive
		this.sock = s;
		const reader = new LineReader();
		let errCode: string | undefined;
		s.on("data", (chunk: Buffer) => {
			if (this.sock !== s) return;
			const { messages, error } = reader.push(chunk);
			for (const m of messages) {
				if (this.sock !== s) return;
				this.incoming(s, m);
			}
			if (error && this.sock === s) {
				try {
					s.end(encodeLine({ type: "error", message: error }));
				} catch (e) {
					this.cb.problem("reporting a protocol error to the hub", e);
				}
				s.destroy();
			}
		});
		s.on("error", (e: NodeJS.ErrnoException) => {
			errCode = e.code;
		});
		s.on("close", () => {
			if (this.sock !== s) return;
			this.sock = undefined;
			if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
			this.handshakeTimer = undefined;
			const was = this.phase;
			if (was === "stopped") return;
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
				// Never reached, and nothing to start: say where it was looked for, keep trying quietly.
				const detail = `cannot reach the hub at ${describeTarget(target)} (${errCode ?? "closed"})`;
				this.setDetail(detail);
				this.settleWaiter({ ok: false, message: `${detail}; still trying in the background` });
				this.scheduleRetry();
				return;
			}
			if (!this.halted) this.setDetail(errCode ? `cannot connect (${errCode})` : "reconnecting…");
			this.reportHubExit();
			this.scheduleRetry();
		});
	}

	private incoming(s: net.Socket, raw: Json): void {
		if (this.phase === "connected") {
			const msg = decodeHubMessage(raw);
			if (msg) this.cb.onMessage(msg);
			return;
		}
		if (this.phase !== "handshake") return;
		const msg = decodeHandshake(raw);
		if (!msg) return; // anything else before the welcome: ignored
		if (msg.type === "welcome") {
			if (msg.protocol !== PROTOCOL) {
				const text = `the hub speaks protocol ${String(msg.protocol)}, this extension speaks ${PROTOCOL}: update pi-telegram and the extension to the same version`;
				this.halt(text);
				s.destroy();
				return;
			}
			if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
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
			} catch (e) {
				this.cb.problem("after the hub's welcome", e);
			}
			const lines = this.outbox;
			this.outbox = [];
			this.outboxChars = 0;
			for (const l of lines) if (s.writable) s.write(l);
			this.cb.onStatus();
			this.settleWaiter({ ok: true, message: this.connectedText() });
			void this.checkRelease(this.welcome);
			return;
		}
		const text = `the hub of profile ${this.profile} refused this pi: ${msg.message}`;
		if (HALTING_REFUSALS.has(msg.code)) {
			this.halt(text);
		} else {
			this.setDetail(`refused (${msg.code || "?"})`);
			this.settleWaiter({ ok: false, message: text });
			this.showOnce(text, "error");
		}
		s.destroy();
	}

	private halt(text: string): void {
		this.halted = text;
		this.detail = "refused by the hub";
		// Not left "connecting"/"handshake": the next connect command must try again.
		if (this.phase !== "stopped" && this.phase !== "connected") this.phase = "waiting";
		this.clearTimers();
		this.cb.onStatus();
		if (this.waiter) this.settleWaiter({ ok: false, message: text });
		else this.showOnce(text, "error");
	}

	/**
	 * After a welcome from a hub of another release (pi-telegram was updated; the running hub
	 * is the binary from before): when the binary this extension would start is of its own
	 * release, the old hub is stopped cleanly (SIGTERM: everything waiting is in its database)
	 * and ours started in its place (`hubNotRunning`). Otherwise the person is told once what
	 * differs. A hub on another machine is never stopped from here.
	 */
	private async checkRelease(welcome: WelcomeInfo): Promise<void> {
		const ours = ownVersion();
		if (this.role !== "instance" || welcome.hub_version === ours || ours === "unknown") return;
		const theirs = welcome.hub_version ?? "of an older release";
		const pid = welcome.hub_pid;
		if (isRemote(this.target) || pid === null) {
			this.showOnce(`telegram: the hub is ${theirs}, this pi's pi-telegram ${ours}: update the hub's machine to ${ours}`, "warning");
			return;
		}
		const found = hubBinary();
		const would = "bin" in found ? await binaryVersion(found.bin) : undefined;
		// Something else happened meanwhile (disconnected, another hub): the next welcome decides.
		if (this.phase !== "connected" || this.welcome !== welcome) return;
		if (!("bin" in found) || would !== ours) {
			const binary = "bin" in found ? `${found.bin} (${found.source}) is ${would ?? "of an unknown release"}` : found.problem;
			this.showOnce(
				`telegram: this pi runs pi-telegram ${ours} and the hub ${theirs}; ${binary}. Restart pi (or /reload) after updating so both are one release`,
				"warning",
			);
			return;
		}
		this.cb.notify(
			`telegram: replacing the running hub (${theirs}, pid ${pid}) with ${ours} from ${found.source}; nothing waiting for pi is lost`,
			"info",
		);
		this.replacing = pid;
		try {
			process.kill(pid, "SIGTERM");
		} catch (e) {
			this.replacing = undefined;
			this.cb.problem(`stopping the hub of release ${theirs}`, e);
		}
	}

	/** Whether process `pid` still exists. */
	private static alive(pid: number): boolean {
		try {
			process.kill(pid, 0);
			return true;
		} catch (e) {
			return (e as NodeJS.ErrnoException).code === "EPERM";
		}
	}

	private hubNotRunning(explicit: boolean): void {
		if (this.replacing !== undefined) {
			if (HubConnection.alive(this.replacing)) {
				// It finishes what it was sending and lets go of its lock; ours starts after it.
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
			// a hub we started is coming up
			this.setDetail("starting the hub…");
			this.scheduleRetry();
			return;
		}
		if (mayStart && !explicit && fs.existsSync(this.paths.stopped)) {
			// A person stopped the hub on purpose: only /telegram-connect (or `serve`) starts it.
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

	private startHub(): void {
		this.fastUntil = Date.now() + HUB_START_WAIT_MS;
		this.setDetail("starting the hub…");
		spawnHub(this.profile, this.paths, {
			failed: (text) => this.hubFailed(text),
			exited: (code, signal, pid) => {
				if (this.phase === "stopped" || this.phase === "connected") return;
				// Another hub holds the profile (two pis started one at once): it is coming up.
				if (otherHubAlive(this.paths.dir, pid)) return;
				const line = lastLine(this.paths.log);
				this.fastUntil = 0;
				this.hubExitError = `the hub exited (${code !== null ? `code ${code}` : signal}): ${line ?? "no output"} (log: ${this.paths.log})`;
				if (this.phase === "waiting") this.attemptSoon(0);
			},
			problem: (where, e) => this.cb.problem(where, e),
		});
	}

	private reportHubExit(): void {
		const text = this.hubExitError;
		if (!text) return;
		this.hubExitError = undefined;
		this.hubFailed(text);
	}

	private hubFailed(text: string): void {
		if (this.phase === "stopped") return;
		this.fastUntil = 0;
		if (this.phase === "connected") return; // another hub answered anyway
		this.setDetail("hub not running");
		if (this.waiter) this.settleWaiter({ ok: false, message: text });
		else this.showOnce(text, "warning");
	}
}
