/**
 * Where the extension's own failures go. Event handlers and timers never throw into pi; what
 * they catch is recorded here: the last few are shown by /telegram-status, and with
 * `PI_TELEGRAM_DEBUG=1` each is also appended to `<agent-dir>/telegram/extension-debug.log`.
 * One `Problems` per extension instance (nothing here outlives a /reload).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { agentDir } from "./paths.ts";

const KEEP = 20;

export function errorText(e: unknown): string {
	return e instanceof Error ? e.message : String(e);
}

export class Problems {
	private recent: string[] = [];
	private readonly debugFile: string | undefined;

	constructor() {
		this.debugFile = process.env.PI_TELEGRAM_DEBUG ? path.join(agentDir(), "telegram", "extension-debug.log") : undefined;
	}

	/** Records a failure of `where` (a short name of what was being done). */
	record(where: string, e: unknown): void {
		const line = `${new Date().toISOString()} ${where}: ${errorText(e)}`;
		this.keep(line);
		if (!this.debugFile) return;
		try {
			fs.mkdirSync(path.dirname(this.debugFile), { recursive: true, mode: 0o700 });
			fs.appendFileSync(this.debugFile, `${line}\n`, { mode: 0o600 });
		} catch (err) {
			this.keep(`${new Date().toISOString()} debug log ${this.debugFile}: ${errorText(err)}`);
		}
	}

	/** The most recent failures, oldest first. */
	list(): readonly string[] {
		return this.recent;
	}

	/** Runs `fn`; a throw is recorded and becomes `undefined`. */
	guard<A extends unknown[], R>(where: string, fn: (...args: A) => R): (...args: A) => R | undefined {
		return (...args: A): R | undefined => {
			try {
				return fn(...args);
			} catch (e) {
				this.record(where, e);
				return undefined;
			}
		};
	}

	private keep(line: string): void {
		this.recent.push(line);
		if (this.recent.length > KEEP) this.recent.splice(0, this.recent.length - KEEP);
	}
}
