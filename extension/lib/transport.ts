/**
 * Where a profile's hub is reached, and the byte stream to it (docs/wire-protocol.md, "Other
 * machines"). Usually this machine's `<agent-dir>/telegram/<profile>/hub.sock` (and the
 * extension may start that hub). A hub on another machine is named in this machine's
 * `<agent-dir>/telegram.json` under `profiles.<profile>.remote`:
 *
 * - `{"connect": "host:port", "fingerprint": "sha256:…", "secret": "…"}`: TLS to the hub's
 *   listener (`remote.listen` there), its self-signed certificate pinned by SHA-256. The pin is
 *   checked before anything is written: to a host with another certificate, the hello (which
 *   carries the secret) is never sent.
 * - `{"socket": "/path/to/forwarded.sock", "secret": "…"}`: the hub's `hub.sock` forwarded
 *   here (`ssh -L`).
 *
 * Without `secret`, this machine's `<agent-dir>/telegram/<profile>/hub.secret` is used (a copy
 * of the hub's). A file holding the secret must be private (0600): otherwise nothing is sent.
 * A remote hub is never started from here. `pi-telegram remote-config` on the hub's machine
 * prints the TLS form.
 */
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import * as tls from "node:tls";
import { agentDir, type ProfilePaths } from "./paths.ts";
import { isJson } from "./wire.ts";

export type HubTarget =
	/** This machine's hub.sock; the secret is read from hub.secret at each attempt. */
	| { kind: "local"; socket: string }
	/** A forwarded hub.sock of another machine. */
	| { kind: "forwarded"; socket: string; secret: string }
	/** TLS to another machine's hub. */
	| { kind: "tls"; host: string; port: number; fingerprint: string; secret: string };

/** A remote configuration that cannot work as written: what to fix. */
export interface BadTarget {
	kind: "invalid";
	message: string;
}

export interface TransportHandlers {
	/** The stream is open and, for TLS, the hub's certificate is the pinned one: send now. */
	ready(): void;
	/** The peer is not the pinned hub; the stream is closed and nothing was written. */
	untrusted(message: string): void;
}

/** TCP keepalive on a TLS connection: a hub machine that vanished is noticed, not waited on. */
const KEEPALIVE_MS = 30_000;

export function localTarget(paths: ProfilePaths): HubTarget {
	return { kind: "local", socket: paths.socket };
}

export function isRemote(t: HubTarget): boolean {
	return t.kind !== "local";
}

/** For the footer, /telegram-status and messages. */
export function describeTarget(t: HubTarget): string {
	switch (t.kind) {
		case "local":
			return t.socket;
		case "forwarded":
			return `${t.socket} (forwarded)`;
		case "tls":
			return `${t.host.includes(":") ? `[${t.host}]` : t.host}:${t.port} (TLS)`;
	}
}

/**
 * The profile's hub, from `<agent-dir>/telegram.json` (read at every attempt, so an edit takes
 * effect without a restart). A missing or malformed file, or a profile without `remote.connect`
 * / `remote.socket`, means this machine's hub (whose own start reports a malformed file).
 */
export function resolveTarget(profile: string, paths: ProfilePaths): HubTarget | BadTarget {
	const file = path.join(agentDir(), "telegram.json");
	let cfg: unknown;
	try {
		cfg = JSON.parse(fs.readFileSync(file, "utf8").replace(/^\uFEFF/, ""));
	} catch {
		return localTarget(paths);
	}
	const profiles = isJson(cfg) ? cfg.profiles : undefined;
	const prof = isJson(profiles) ? profiles[profile] : undefined;
	const remote = isJson(prof) ? prof.remote : undefined;
	if (!isJson(remote) || (remote.connect === undefined && remote.socket === undefined)) return localTarget(paths);
	const key = `profiles.${profile}.remote`;
	const bad = (what: string): BadTarget => ({ kind: "invalid", message: `${key} in ${file}: ${what}` });
	if (remote.connect !== undefined && remote.socket !== undefined) return bad("has both connect and socket; keep one");
	const secret = remoteSecret(remote.secret, file, paths.secret);
	if ("message" in secret) return bad(secret.message);
	if (remote.socket !== undefined) {
		if (typeof remote.socket !== "string" || !path.isAbsolute(remote.socket)) return bad("socket must be an absolute path");
		return { kind: "forwarded", socket: remote.socket, secret: secret.value };
	}
	const addr = typeof remote.connect === "string" ? parseHostPort(remote.connect.trim()) : undefined;
	if (!addr) return bad('connect must be "host:port" (an IPv6 address in brackets: "[::1]:7391")');
	const fingerprint = typeof remote.fingerprint === "string" ? normalizeFingerprint(remote.fingerprint) : undefined;
	if (!fingerprint) {
		return bad('fingerprint must be the hub certificate\'s "sha256:<64 hex digits>" (`pi-telegram remote-config` on the hub\'s machine prints it)');
	}
	return { kind: "tls", host: addr.host, port: addr.port, fingerprint, secret: secret.value };
}

/** The secret from the config (the file must be private), else the local copy of hub.secret. */
function remoteSecret(value: unknown, configFile: string, secretFile: string): { value: string } | { message: string } {
	const from = value !== undefined ? configFile : secretFile;
	let text: string;
	if (value !== undefined) {
		if (typeof value !== "string" || value.trim() === "") return { message: "secret must be a non-empty string" };
		text = value.trim();
	} else {
		try {
			text = fs.readFileSync(secretFile, "utf8").trim();
		} catch {
			return { message: `has no secret: add the hub's "secret" (\`pi-telegram remote-config\` prints it), or copy the hub's hub.secret to ${secretFile}` };
		}
		if (text === "") return { message: `${secretFile} is empty: copy the hub's hub.secret there` };
	}
	try {
		if ((fs.statSync(from).mode & 0o077) !== 0) {
			return { message: `${from} holds the hub secret and others can read it: run chmod 600 ${from}` };
		}
	} catch (e) {
		return { message: `cannot check who can read ${from}: ${e instanceof Error ? e.message : String(e)}` };
	}
	return { value: text };
}

/** `host:port` or `[v6]:port`. */
export function parseHostPort(s: string): { host: string; port: number } | undefined {
	const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(s) ?? /^([^:[\]\s]+):(\d{1,5})$/.exec(s);
	if (!m) return undefined;
	const port = Number(m[2]);
	if (!(port >= 1 && port <= 65535)) return undefined;
	return { host: m[1] as string, port };
}

/** `sha256:AB:CD…` or `sha256:abcd…` (or bare hex) -> 64 lowercase hex digits; else undefined. */
export function normalizeFingerprint(s: string): string | undefined {
	const hex = s
		.trim()
		.replace(/^sha256:/i, "")
		.replace(/[:\s]/g, "")
		.toLowerCase();
	return /^[0-9a-f]{64}$/.test(hex) ? hex : undefined;
}

/**
 * Opens the stream to `t`. `ready` comes once it may be written to; for TLS only after the
 * handshake and the fingerprint check, and a mismatch ends in `untrusted` with nothing written.
 * Errors and the close are the socket's own events.
 */
export function openTransport(t: HubTarget, h: TransportHandlers): net.Socket {
	if (t.kind !== "tls") {
		const s = net.createConnection(t.socket);
		s.on("connect", () => h.ready());
		return s;
	}
	// The certificate is self-signed: no CA can vouch for it, so the chain check is off and the
	// pin below is the whole check (a host name is not checked either: the pin is stronger).
	const s = tls.connect({ host: t.host, port: t.port, rejectUnauthorized: false, minVersion: "TLSv1.3" });
	s.setKeepAlive(true, KEEPALIVE_MS);
	s.on("secureConnect", () => {
		const raw = s.getPeerCertificate()?.raw;
		const seen = raw ? crypto.createHash("sha256").update(raw).digest("hex") : undefined;
		if (seen !== t.fingerprint) {
			// `end`, not `destroy`: our last handshake message still goes out, so the server sees
			// a finished handshake and then a close, with not one byte of ours in between (and
			// the hub can log "closed before its hello").
			s.end();
			setTimeout(() => s.destroy(), 2000).unref();
			h.untrusted(
				`the server at ${describeTarget(t)} is not the hub this pi trusts: its certificate is sha256:${seen ?? "(none)"}, ` +
					`the pinned one sha256:${t.fingerprint}. Nothing was sent. If the hub's certificate was made anew, ` +
					`copy the new fingerprint from \`pi-telegram remote-config\` on the hub's machine.`,
			);
			return;
		}
		h.ready();
	});
	return s;
}
