/**
 * The connection of one extension instance to the hub of one profile (instance role of
 * docs/wire-protocol.md): handshake, reading, bounded buffering while away, quiet reconnects with
 * backoff (1 s doubling to 10 s), and starting the hub when it is not running.
 *
 * Nothing here throws to its callers; failures become state (`phase`, `detail`) and callbacks.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import { ensurePrivateDir, hubBinary, INSTALL_HINT, lastLine, type ProfilePaths, profilePaths } from "./paths.ts";
import { globalState } from "./state.ts";
import { encodeLine, type Json, LineReader, PROTOCOL } from "./wire.ts";

export type Phase = "stopped" | "waiting" | "connecting" | "handshake" | "connected";

export interface Welcome {
	hub_pid: number | null;
	instance_id: string | null;
}

export interface ConnectOutcome {
	ok: boolean;
	message: string;
	/** Nothing to show (a newer connect took over, or the session ended). */
	silent?: boolean;
}

export interface HubCallbacks {
	/** The hello's fields besides type, protocol, role and secret (built at each attempt). */
	hello(): Json;
	/** After a welcome, before the outbox is flushed. */
	onWelcome(welcome: Welcome): void;
	/** Every message after the welcome. */
	onMessage(msg: Json): void;
	/** The connection state changed (footer). */
	onStatus(): void;
	/** Show something to the person. */
	notify(text: string, level: "info" | "warning" | "error"): void;
}

const OUTBOX_CAP = 1000;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 10_000;
const FAST_RETRY_MS = 250;
const HUB_START_WAIT_MS = 10_000;
const HANDSHAKE_TIMEOUT_MS = 10_000;
const AUTO_START_INTERVAL_MS = 30_000;

export class HubClient {
	readonly profile: string;
	readonly paths: ProfilePaths;
	phase: Phase = "waiting";
	/** Why we are not connected, for the footer and /telegram-status. */
	detail = "connecting…";
	welcome: Welcome | undefined;
	/** Set after a refusal that retrying cannot fix (protocol, secret). */
	halted: string | undefined;
	/** Start the hub when it is not running (the project is remembered or the person asked). */
	autoStart: boolean;
	/** Lines waiting for the connection (at most 1000, the oldest dropped first). */
	private outbox: string[] = [];
	private sock: net.Socket | undefined;
	private timer: NodeJS.Timeout | undefined;
	private handshakeTimer: NodeJS.Timeout | undefined;
	private backoff = BACKOFF_MIN_MS;
	private fastUntil = 0;
	private lastShown = new Set<string>();
	private waiter: { resolve: (o: ConnectOutcome) => void; timer: NodeJS.Timeout } | undefined;
	/**
	 * A hub we started exited with an error. It is reported only if the next attempt fails too:
	 * when two pis start a hub at once, the loser exits ("another hub is already serving this
	 * profile") while the winner answers.
	 */
	private hubExitError: string | undefined;

	constructor(
		profile: string,
		private readonly cb: HubCallbacks,
		opts: { autoStart: boolean },
	) {
		this.profile = profile;
		this.paths = profilePaths(profile);
		this.autoStart = opts.autoStart;
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
					message: `could not reach the hub of profile ${this.profile} within ${HUB_START_WAIT_MS / 1000} s (${this.detail}); see ${this.paths.log}. Still trying in the background.`,
				});
			}, HUB_START_WAIT_MS + 2000);
			timer.unref?.();
			this.waiter = { resolve, timer };
			if (this.phase !== "connecting" && this.phase !== "handshake") this.attemptSoon(0, true);
		});
	}

	/** Stops for good, saying goodbye when connected. */
	stop(bye?: "disconnect" | "shutdown"): void {
		const wasConnected = this.phase === "connected";
		this.phase = "stopped";
		this.detail = "disconnected";
		this.clearTimers();
		this.outbox = [];
		const s = this.sock;
		this.sock = undefined;
		if (s) {
			try {
				if (wasConnected && bye && s.writable) s.end(encodeLine({ type: "bye", reason: bye }));
				else s.destroy();
			} catch {
				s.destroy();
			}
		}
		this.settleWaiter({ ok: false, message: "stopped", silent: true });
	}

	get connected(): boolean {
		return this.phase === "connected";
	}

	/**
	 * Sends a message now when connected; otherwise keeps it in the bounded outbox when `buffer`
	 * is set (events), or drops it. Returns whether it was written.
	 */
	send(obj: Json, opts: { buffer?: boolean; fallback?: () => Json } = {}): boolean {
		const line = encodeLine(obj, opts.fallback);
		const s = this.sock;
		if (this.phase === "connected" && s && s.writable) {
			try {
				s.write(line);
				return true;
			} catch {
				// the close handler reconnects
			}
		}
		if (opts.buffer && this.phase !== "stopped") {
			this.outbox.push(line);
			if (this.outbox.length > OUTBOX_CAP) this.outbox.splice(0, this.outbox.length - OUTBOX_CAP);
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
	private showOnce(text: string, level: "info" | "warning" | "error"): void {
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

	private attempt(explicit: boolean): void {
		if (this.phase === "stopped" || this.halted) return;
		let secret: string | undefined;
		try {
			secret = fs.readFileSync(this.paths.secret, "utf8").trim();
		} catch {
			secret = undefined;
		}
		if (!secret || !fs.existsSync(this.paths.socket)) {
			this.hubNotRunning(explicit);
			return;
		}
		this.phase = "connecting";
		const s = net.createConnection(this.paths.socket);
		s.unref(); // never keep pi alive
		this.sock = s;
		const reader = new LineReader();
		let errCode: string | undefined;
		s.on("connect", () => {
			if (this.sock !== s) return;
			this.phase = "handshake";
			s.write(
				encodeLine({ type: "hello", protocol: PROTOCOL, role: "instance", secret, ...this.cb.hello() }),
			);
			this.handshakeTimer = setTimeout(() => {
				if (this.sock === s && this.phase === "handshake") {
					this.setDetail("the hub did not answer the hello");
					s.destroy();
				}
			}, HANDSHAKE_TIMEOUT_MS);
			this.handshakeTimer.unref?.();
		});
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
				} catch {}
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
			if (errCode === "ENOENT" || errCode === "ECONNREFUSED") {
				this.hubNotRunning(explicit);
				return;
			}
			if (!this.halted) this.setDetail(errCode ? `cannot connect (${errCode})` : "reconnecting…");
			this.reportHubExit();
			this.scheduleRetry();
		});
	}

	private incoming(s: net.Socket, msg: Json): void {
		if (this.phase === "handshake") {
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
				this.backoff = BACKOFF_MIN_MS;
				this.fastUntil = 0;
				this.hubExitError = undefined;
				this.lastShown.clear();
				this.welcome = {
					hub_pid: typeof msg.hub_pid === "number" ? msg.hub_pid : null,
					instance_id: typeof msg.instance_id === "string" ? msg.instance_id : null,
				};
				this.detail = "connected";
				try {
					this.cb.onWelcome(this.welcome);
				} catch {}
				const lines = this.outbox;
				this.outbox = [];
				for (const l of lines) if (s.writable) s.write(l);
				this.cb.onStatus();
				this.settleWaiter({ ok: true, message: this.connectedText() });
				return;
			}
			if (msg.type === "refused") {
				const code = String(msg.code ?? "");
				const text = `the hub of profile ${this.profile} refused this pi: ${String(msg.message ?? code)}`;
				if (code === "protocol" || code === "secret") {
					this.halt(text);
				} else {
					this.setDetail(`refused (${code || "?"})`);
					this.settleWaiter({ ok: false, message: text });
					this.showOnce(text, "error");
				}
				s.destroy();
				return;
			}
			return; // anything else before the welcome: ignored
		}
		if (this.phase === "connected") this.cb.onMessage(msg);
	}

	private halt(text: string): void {
		this.halted = text;
		this.detail = "refused by the hub";
		this.clearTimers();
		this.cb.onStatus();
		if (this.waiter) this.settleWaiter({ ok: false, message: text });
		else this.showOnce(text, "error");
	}

	private hubNotRunning(explicit: boolean): void {
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

	/** Spawns `<bin> serve --profile <p>` detached, its output appended to hub.log. */
	private startHub(): void {
		const { bin, source } = hubBinary();
		const spawnedAt = Date.now();
		this.fastUntil = spawnedAt + HUB_START_WAIT_MS;
		this.setDetail("starting the hub…");
		let fd: number | undefined;
		try {
			ensurePrivateDir(this.paths.dir);
			fd = fs.openSync(this.paths.log, "a", 0o600);
			const child = spawn(bin, ["serve", "--profile", this.profile], {
				detached: true,
				stdio: ["ignore", fd, fd],
				env: { ...process.env, NO_COLOR: "1" },
			});
			child.on("error", (e: NodeJS.ErrnoException) => {
				if (e.code === "ENOENT") {
					this.hubFailed(`the hub binary was not found: "${bin}" (from ${source}). To fix it, ${INSTALL_HINT}.`);
				} else {
					this.hubFailed(`could not start the hub "${bin}" (from ${source}): ${e.message}`);
				}
			});
			child.on("exit", (code, signal) => {
				if (code === 0 || Date.now() - spawnedAt > 60_000) return;
				if (this.phase === "stopped" || this.phase === "connected") return;
				// Another hub holds the profile (two pis started one at once): it is coming up.
				if (this.otherHubAlive(child.pid)) return;
				const line = lastLine(this.paths.log);
				this.fastUntil = 0;
				this.hubExitError = `the hub exited (${code !== null ? `code ${code}` : signal}): ${line ?? "no output"} (log: ${this.paths.log})`;
				if (this.phase === "waiting") this.attemptSoon(0);
			});
			child.unref();
		} catch (e) {
			this.hubFailed(`could not start the hub "${bin}" (from ${source}): ${e instanceof Error ? e.message : String(e)}`);
		} finally {
			if (fd !== undefined) {
				try {
					fs.closeSync(fd);
				} catch {}
			}
		}
	}

	/** Whether `hub.lock` names a live process other than `ours` (the hub records its pid there). */
	private otherHubAlive(ours: number | undefined): boolean {
		try {
			const pid = Number.parseInt(fs.readFileSync(`${this.paths.dir}/hub.lock`, "utf8").trim(), 10);
			if (!Number.isInteger(pid) || pid <= 0 || pid === ours) return false;
			try {
				process.kill(pid, 0);
				return true;
			} catch (e) {
				return (e as NodeJS.ErrnoException).code === "EPERM";
			}
		} catch {
			return false;
		}
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
