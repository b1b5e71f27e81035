/**
 * Where things live, by the same rules as the hub (`crates/hub/src/paths.rs`):
 * `<agent-dir>` = `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`; a profile's private folder is
 * `<agent-dir>/telegram/<profile>/` with `hub.sock`, `hub.secret`, `hub.log` and `hub.stopped` (left
 * by `pi-telegram stop` or Ctrl-C on `serve`: the hub was stopped on purpose).
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export const DEFAULT_PROFILE = "default";

export function agentDir(): string {
	const fromEnv = process.env.PI_CODING_AGENT_DIR;
	if (fromEnv) return path.resolve(fromEnv);
	return path.join(os.homedir(), ".pi", "agent");
}

/** `[a-z0-9]{1,32}` */
export function isProfileName(name: string): boolean {
	return /^[a-z0-9]{1,32}$/.test(name);
}

export interface ProfilePaths {
	dir: string;
	socket: string;
	secret: string;
	log: string;
	stopped: string;
}

export function profilePaths(profile: string): ProfilePaths {
	const dir = path.join(agentDir(), "telegram", profile);
	return {
		dir,
		socket: path.join(dir, "hub.sock"),
		secret: path.join(dir, "hub.secret"),
		log: path.join(dir, "hub.log"),
		stopped: path.join(dir, "hub.stopped"),
	};
}

/** Creates a folder (and parents) with mode 0700. */
export function ensurePrivateDir(dir: string): void {
	fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/** The last non-empty line of a file (at most its last 16 KiB are read), without ANSI colours. */
export function lastLine(file: string): string | undefined {
	try {
		const fd = fs.openSync(file, "r");
		try {
			const size = fs.fstatSync(fd).size;
			const len = Math.min(size, 16384);
			const buf = Buffer.alloc(len);
			fs.readSync(fd, buf, 0, len, size - len);
			const lines = buf
				.toString("utf8")
				// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escapes
				.replace(/\x1b\[[0-9;]*[A-Za-z]/g, "")
				.split("\n")
				.map((l) => l.trim())
				.filter((l) => l.length > 0);
			return lines[lines.length - 1];
		} finally {
			fs.closeSync(fd);
		}
	} catch {
		return undefined;
	}
}
