/**
 * One extension instance's view of its pi session: the latest context, whether the session is
 * live (between `session_start` and `session_shutdown`), why it started, and the two ways to
 * tell someone something: `notify` (the person, in pi) and `problems` (log.ts).
 */
import * as path from "node:path";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { Problems } from "./log.ts";
import type { Level, ModelRef, StateFields } from "./wire.ts";

/** A model as the hub reads it: provider and id as strings, never null. */
export function modelRef(m: { provider?: unknown; id?: unknown } | undefined | null): ModelRef | null {
	return m && typeof m === "object" ? { provider: String(m.provider ?? ""), id: String(m.id ?? "") } : null;
}

export class Session {
	readonly pi: ExtensionAPI;
	/** The context of the latest event or command (stale after the session ends). */
	ctx: ExtensionContext | undefined;
	/** Between session_start (or a connect command) and session_shutdown. */
	live = false;
	/** session_start's reason, sent in the hello. */
	reason = "startup";
	readonly problems = new Problems();

	constructor(pi: ExtensionAPI) {
		this.pi = pi;
	}

	/** Shows a notification in pi, when there is a UI to show it on. */
	notify(text: string, level: Level = "info", c: ExtensionContext | undefined = this.ctx): void {
		if (!c) return;
		try {
			if (c.hasUI) c.ui.notify(text, level);
		} catch (e) {
			// a stale ctx (after /new etc.) throws: there is nothing to show it on
			this.problems.record(`showing "${text.slice(0, 80)}"`, e);
		}
	}

	/** The hello's state fields, read from pi now (`over` wins). */
	stateFields(over: Partial<StateFields> = {}): StateFields {
		const c = this.ctx;
		const pi = this.pi;
		const get = <T>(what: string, f: () => T, dflt: T): T => {
			try {
				return f();
			} catch (e) {
				this.problems.record(`reading ${what}`, e);
				return dflt;
			}
		};
		return {
			pid: process.pid,
			cwd: c ? path.resolve(c.cwd) : process.cwd(),
			mode: get("the mode", () => c?.mode ?? null, null),
			reason: this.reason,
			session_id: get("the session id", () => c?.sessionManager.getSessionId() ?? null, null),
			session_file: get("the session file", () => c?.sessionManager.getSessionFile() ?? null, null),
			session_name: get("the session name", () => pi.getSessionName() ?? null, null),
			model: get("the model", () => modelRef(c?.model), null),
			thinking_level: get("the thinking level", () => pi.getThinkingLevel() ?? null, null),
			idle: get("idleness", () => (c ? c.isIdle() : true), true),
			pending: get("pending messages", () => (c ? c.hasPendingMessages() : false), false),
			...over,
		};
	}
}
