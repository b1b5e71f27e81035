/**
 * The hub's requests about pi itself (docs/wire-protocol.md, "Hub → instance"): the menu's
 * statistics, models and thinking levels, switching them, pi's commands, compaction, aborting,
 * and pi's state. Each request with an `id` gets exactly one `response`.
 */
import type { ExtensionAPI, ExtensionContext, SessionManager } from "@earendil-works/pi-coding-agent";
import { SESSION_COMMAND } from "./commands.ts";
import { errorText } from "./log.ts";
import type { Outbox } from "./link.ts";
import { modelRef, type Session } from "./session.ts";
import type { Abort, GetState, PiRequest } from "./wire.ts";

type ThinkingLevel = ReturnType<ExtensionAPI["getThinkingLevel"]>;

/** How many saved sessions `get_sessions` lists, and how much of each first message: the
 * hub's own list of a headless pi's sessions holds as many (docs/wire-protocol.md). */
const SESSIONS_LISTED = 500;
const FIRST_MESSAGE_CHARS = 1000;
const THINKING_LEVELS: readonly ThinkingLevel[] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

/**
 * pi's `SessionManager` class, taken from the session's own instance rather than imported: the
 * extension runs as plain JavaScript that Node loads by itself (dist/, see README "Memory"), where
 * pi's package cannot be resolved, and a value import of it would make pi's loader transpile the
 * whole extension instead (loading Babel: about 40 MB).
 */
function sessionManagerClass(c: ExtensionContext): typeof SessionManager {
	const ctor = (c.sessionManager as object).constructor as Partial<typeof SessionManager> | undefined;
	if (typeof ctor?.list !== "function") throw new Error("this pi does not list its sessions (SessionManager.list)");
	return ctor as typeof SessionManager;
}

/** Tokens as pi counts them; `cost` in dollars. */
interface UsageTotals {
	input: number;
	output: number;
	cacheRead: number;
	cacheWrite: number;
	cost: number;
}

type UsageLike = { input?: unknown; output?: unknown; cacheRead?: unknown; cacheWrite?: unknown; cost?: unknown };

function num(v: unknown): number {
	return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

function addUsage(t: UsageTotals, u: UsageLike): void {
	t.input += num(u.input);
	t.output += num(u.output);
	t.cacheRead += num(u.cacheRead);
	t.cacheWrite += num(u.cacheWrite);
	t.cost += num((u.cost as { total?: unknown } | undefined)?.total);
}

/**
 * The session's token totals and cost, counted as pi's own session stats count them (RPC
 * `get_session_stats`, which extensions cannot call): every assistant message, tool result with a
 * usage, `usage` entry, compaction and branch summary; and the latest assistant message's usage
 * (the latest model request: its cache hit rate).
 */
function sessionUsage(c: ExtensionContext): { totals: UsageTotals; latest: UsageLike | null } {
	const totals: UsageTotals = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 };
	let latest: UsageLike | null = null;
	for (const e of c.sessionManager.getEntries()) {
		let usage: UsageLike | undefined;
		if (e.type === "usage") usage = e.usage;
		else if ((e.type === "compaction" || e.type === "branch_summary") && e.usage) usage = e.usage;
		else if (e.type === "message") {
			const m = e.message as { role?: string; usage?: UsageLike };
			if (m.role === "assistant" && m.usage) {
				usage = m.usage;
				latest = m.usage;
			} else if (m.role === "toolResult" && m.usage) usage = m.usage;
		}
		if (usage) addUsage(totals, usage);
	}
	return { totals, latest };
}

function isThinkingLevel(level: string): level is ThinkingLevel {
	return (THINKING_LEVELS as readonly string[]).includes(level);
}

export class Requests {
	private readonly s: Session;
	private readonly out: Outbox;

	constructor(s: Session, out: Outbox) {
		this.s = s;
		this.out = out;
	}

	/** Answers a request that carried an `id`; requests without one get no answer. */
	respond(id: string | undefined, ok: boolean, data?: unknown, error?: string): void {
		if (id === undefined) return;
		this.out.send({
			type: "response",
			id,
			ok,
			...(data !== undefined ? { data } : {}),
			...(error !== undefined ? { error } : {}),
		});
	}

	abort(m: Abort): void {
		try {
			this.s.ctx?.abort();
			this.respond(m.id, true);
		} catch (e) {
			this.respond(m.id, false, undefined, errorText(e));
		}
	}

	getState(m: GetState): void {
		this.respond(m.id, true, this.s.stateFields());
	}

	/** The menu, /model, /thinking, /compact and the commands list. */
	async answer(m: PiRequest): Promise<void> {
		const c = this.s.ctx;
		const pi = this.s.pi;
		const fail = (e: unknown) => this.respond(m.id, false, undefined, errorText(e));
		try {
			switch (m.type) {
				case "get_stats": {
					const usage = c?.getContextUsage();
					const spent = c ? sessionUsage(c) : null;
					const t = spent?.totals;
					const l = spent?.latest;
					this.respond(m.id, true, {
						model: modelRef(c?.model),
						thinking_level: pi.getThinkingLevel() ?? null,
						context: usage ? { tokens: usage.tokens, contextWindow: usage.contextWindow, percent: usage.percent } : null,
						cost: t ? t.cost : null,
						tokens: t
							? {
									input: t.input,
									output: t.output,
									cacheRead: t.cacheRead,
									cacheWrite: t.cacheWrite,
									total: t.input + t.output + t.cacheRead + t.cacheWrite,
								}
							: null,
						latest: l
							? { input: num(l.input), output: num(l.output), cacheRead: num(l.cacheRead), cacheWrite: num(l.cacheWrite) }
							: null,
					});
					return;
				}
				case "get_models": {
					const ref = (x: { provider?: unknown; id?: unknown; name?: unknown }) => ({
						provider: String(x.provider ?? ""),
						id: String(x.id ?? ""),
						name: String(x.name ?? x.id ?? ""),
					});
					const available = (c?.modelRegistry.getAvailable() ?? []).map(ref);
					// pi's own scope (`--models`, `enabledModels`); empty: every available model is usable.
					const scoped = (c?.scopedModels ?? []).map((s) => ref(s.model));
					this.respond(m.id, true, {
						models: scoped.length > 0 ? scoped : available,
						current: modelRef(c?.model),
						scoped: scoped.length > 0,
						available: available.length,
					});
					return;
				}
				case "set_model": {
					const model = c?.modelRegistry.find(m.provider, m.model_id);
					if (!model) return fail(`no model ${m.provider}/${m.model_id}`);
					const ok = await pi.setModel(model);
					if (!ok) return fail(`no credentials for ${m.provider}`);
					this.respond(m.id, true, { model: modelRef(model) });
					return;
				}
				case "get_thinking_levels": {
					// pi clamps a level to what the model supports; these are the levels it offers.
					const levels = c?.model?.reasoning ? ["off", "minimal", "low", "medium", "high"] : ["off"];
					this.respond(m.id, true, { levels, current: pi.getThinkingLevel() ?? null });
					return;
				}
				case "set_thinking_level":
					if (!isThinkingLevel(m.level)) return fail(`unknown thinking level "${m.level}"`);
					pi.setThinkingLevel(m.level);
					this.respond(m.id, true, { level: pi.getThinkingLevel() ?? null });
					return;
				case "get_commands": {
					const commands = pi.getCommands().map((x) => ({
						name: String(x.name ?? ""),
						description: typeof x.description === "string" ? x.description : null,
						source: String(x.source ?? ""),
					}));
					this.respond(m.id, true, { commands });
					return;
				}
				case "get_sessions": {
					if (!c) return fail("pi has no session");
					// Where this pi keeps its sessions (a --session-dir or PI_CODING_AGENT_SESSION_DIR too).
					const list = await sessionManagerClass(c).list(c.cwd, c.sessionManager.getSessionDir());
					// As many as the hub's headless list holds; the menu pages them.
					const sessions = list.slice(0, SESSIONS_LISTED).map((x) => ({
						path: x.path,
						name: x.name ?? null,
						first_message: Array.from(String(x.firstMessage ?? "")).slice(0, FIRST_MESSAGE_CHARS).join(""),
						modified_ms: x.modified.getTime(),
					}));
					this.respond(m.id, true, { sessions, current: c.sessionManager.getSessionFile() ?? null });
					return;
				}
				case "new_session":
				case "switch_session": {
					// Only a command handler may replace the session: run ours. pi replaces the
					// session after this answer, and the extension connects again.
					if (!c) return fail("pi has no session");
					if (!c.isIdle()) return fail("pi is working: /abort first, or wait for its answer");
					const args = m.type === "new_session" ? "new" : `switch ${m.path}`;
					this.respond(m.id, true, { cancelled: false });
					pi.sendUserMessage(`/${SESSION_COMMAND} ${args}`, { expandPromptTemplates: true });
					return;
				}
				case "compact":
					if (!c) return fail("pi has no session");
					c.compact({
						onComplete: (result) =>
							this.respond(m.id, true, { tokensBefore: result?.tokensBefore ?? null, summary: result?.summary ?? null }),
						onError: (e) => fail(e),
					});
					return;
			}
		} catch (e) {
			fail(e);
		}
	}
}
