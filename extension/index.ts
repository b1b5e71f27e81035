/**
 * pi-telegram extension: connects a live pi session to the pi-telegram hub (the Rust daemon that
 * is the only Telegram client) over the hub's Unix socket, so the person can drive this pi from
 * Telegram. Protocol: docs/wire-protocol.md (instance role). No npm dependencies.
 *
 * Commands: /telegram-connect [profile], /telegram-disconnect, /telegram-status,
 * /telegram-setup [profile]. See README.md.
 *
 * Lifecycle (pi's rules): nothing is opened in the factory; the connection starts at
 * `session_start` (when the project is remembered in connections.json, or on /telegram-connect)
 * and stops at `session_shutdown`. `/reload`, `/new`, `/resume` and `/fork` create a new instance
 * of this extension; the turn bookkeeping that must survive lives on `globalThis.__piTelegram`.
 */
import { execFile } from "node:child_process";
import * as path from "node:path";
import type { ExtensionAPI, ExtensionCommandContext, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { forget, remember, rememberedProfile } from "./lib/connections.ts";
import { assistantText, reduceEvent } from "./lib/events.ts";
import { HubClient } from "./lib/hub.ts";
import { DEFAULT_PROFILE, hubBinary, INSTALL_HINT, isProfileName } from "./lib/paths.ts";
import { ackCompleted, addCompleted, globalState, markReceived, RECEIVED_CAP, type TurnDone } from "./lib/state.ts";
import type { Json } from "./lib/wire.ts";

// biome-ignore lint/suspicious/noExplicitAny: pi's event payloads are handled structurally
type AnyEvent = any;
type Level = "info" | "warning" | "error";

const STATUS_KEY = "telegram";

/** Appended to the system prompt of runs started by a hub turn. */
const TELEGRAM_NOTE = [
	"",
	"",
	"## Telegram",
	"The user's message in this run came from the person through Telegram (pi-telegram): they are away from the terminal",
	"and read your answer on a phone. Make the final answer self-contained and concise: summarize what you did and what",
	"they need to know, since they do not see tool output or the terminal.",
].join("\n");

/** Events forwarded to the hub (the extension-side names; compaction becomes compaction_start/end). */
const FORWARDED = [
	"agent_start",
	"agent_end",
	"agent_settled",
	"turn_start",
	"turn_end",
	"message_start",
	"message_update",
	"message_end",
	"tool_execution_start",
	"tool_execution_update",
	"tool_execution_end",
	"session_before_compact",
	"session_compact",
	"session_compact_failed",
	"session_info_changed",
	"model_select",
	"thinking_level_select",
	"input",
] as const;

/**
 * How long a hub turn handed to pi may take to start its run before it is reported as failed.
 * pi awaits every extension's `input` handler, then checks the model and its auth, before
 * `agent_start`; a prompt that fails there (no API key, say) or is swallowed by another
 * extension's input handler is invisible to extensions, so only time tells.
 */
const START_WATCHDOG_MS = 30_000;
/** While hub turns wait in the local queue, how often pi is checked for idleness. */
const QUEUE_POLL_MS = 2000;
/** Budget of the hello's `completed_turns` (the rest follow as `turn_done` after the welcome). */
const HELLO_COMPLETED_BUDGET = 700 * 1024;
/** A `turn_done` line stays below the 1 MiB line limit with room to spare. */
const TURN_DONE_MAX_BYTES = 1000 * 1024;

export default function piTelegram(pi: ExtensionAPI): void {
	// The hub spawned this pi as a headless `pi --mode rpc` instance and talks to it over RPC:
	// connecting it here as well would register the instance twice. Stay inert.
	if (process.env.PI_TELEGRAM_CHILD === "1") {
		registerInertCommands(pi);
		return;
	}

	const G = globalState();
	let ctx: ExtensionContext | undefined;
	let sessionReason = "startup";
	let hub: HubClient | undefined;
	/** Footer text the hub set with `set_status` (shown while connected). */
	let hubStatus: string | undefined;
	let lastFooter: string | undefined | null = null;
	/** The extension-side agent_end has no `willRetry`: it is sent once the next event shows it. */
	let heldAgentEnd: { turnId: string | null } | undefined;
	let dispatchTimer: NodeJS.Timeout | undefined;
	let watchdog: NodeJS.Timeout | undefined;
	let live = false;

	// ---------------------------------------------------------------- helpers

	const safe =
		<A extends unknown[], R>(fn: (...args: A) => R) =>
		(...args: A): R | undefined => {
			try {
				return fn(...args);
			} catch {
				return undefined;
			}
		};

	const notify = (text: string, level: Level = "info", c: ExtensionContext | undefined = ctx) => {
		try {
			if (c?.hasUI) c.ui.notify(text, level);
		} catch {
			// a stale ctx (after /new etc.) throws: nothing to show it on
		}
	};

	const updateFooter = () => {
		if (!ctx) return;
		const text = hub ? (hub.connected && hubStatus !== undefined ? hubStatus : hub.statusText()) : undefined;
		if (text === lastFooter) return;
		lastFooter = text;
		try {
			ctx.ui.setStatus(STATUS_KEY, text);
		} catch {}
	};

	// the hub reads provider and id as strings (never null)
	const modelOf = (m: AnyEvent): Json | null =>
		m && typeof m === "object" ? { provider: String(m.provider ?? ""), id: String(m.id ?? "") } : null;

	/** The hello's state fields. */
	const stateFields = (over: Json = {}): Json => {
		const c = ctx;
		const get = <T>(f: () => T, d: T): T => {
			try {
				return f();
			} catch {
				return d;
			}
		};
		return {
			pid: process.pid,
			cwd: c ? path.resolve(c.cwd) : process.cwd(),
			mode: get(() => c?.mode ?? null, null),
			reason: sessionReason,
			session_id: get(() => c?.sessionManager.getSessionId() ?? null, null),
			session_file: get(() => c?.sessionManager.getSessionFile() ?? null, null),
			session_name: get(() => pi.getSessionName() ?? null, null),
			model: get(() => modelOf(c?.model), null),
			thinking_level: get(() => pi.getThinkingLevel() ?? null, null),
			idle: get(() => (c ? c.isIdle() : true), true),
			pending: get(() => (c ? c.hasPendingMessages() : false), false),
			...over,
		};
	};

	const sendState = (over: Json = {}) => {
		hub?.send({ type: "state", ...stateFields(over) });
	};

	/** Turns reported in the last hello; the others are sent as `turn_done` after the welcome. */
	let helloCompleted = new Set<string>();

	const hello = (): Json => {
		const completed: TurnDone[] = [];
		let size = 0;
		for (const d of G.completed) {
			const n = Buffer.byteLength(JSON.stringify(d));
			if (size + n > HELLO_COMPLETED_BUDGET) continue;
			size += n;
			completed.push(d);
		}
		helloCompleted = new Set(completed.map((d) => d.turn_id));
		return {
			...stateFields(),
			received_turns: G.received.slice(-RECEIVED_CAP),
			completed_turns: completed,
		};
	};

	/** Sends a result; a text too long for one line (1 MiB) is cut to fit. */
	const sendTurnDone = (d: TurnDone) => {
		let msg: Json = { type: "turn_done", ...d };
		let bytes = Buffer.byteLength(JSON.stringify(msg));
		let keep = d.text.length;
		while (bytes > TURN_DONE_MAX_BYTES && keep > 0) {
			keep = Math.floor((keep * TURN_DONE_MAX_BYTES) / bytes * 0.95);
			msg = { ...msg, text: `${d.text.slice(0, keep)}\n…[cut: the answer is longer than the hub protocol allows]` };
			bytes = Buffer.byteLength(JSON.stringify(msg));
		}
		hub?.send(msg);
	};

	const newHub = (profile: string, autoStart: boolean) =>
		new HubClient(
			profile,
			{
				hello,
				onWelcome: () => {
					// completed turns that did not fit in the hello
					for (const d of G.completed) if (!helloCompleted.has(d.turn_id)) sendTurnDone(d);
				},
				onMessage: (m) => safe(onHubMessage)(m),
				onStatus: () => {
					if (!hub?.connected) hubStatus = undefined;
					updateFooter();
				},
				notify: (text, level) => notify(text, level),
			},
			{ autoStart },
		);

	const forward = (event: Json, turnId: string | null) => {
		hub?.send(
			{ type: "event", turn_id: turnId, event },
			{ buffer: true, fallback: () => ({ type: "event", turn_id: turnId, event: { type: event.type, truncated: true } }) },
		);
	};

	/** Sends a held agent_end, now that the next event tells whether a retry follows. */
	const releaseAgentEnd = (willRetry: boolean) => {
		const held = heldAgentEnd;
		if (!held) return;
		heldAgentEnd = undefined;
		forward({ type: "agent_end", willRetry }, held.turnId);
	};

	// ---------------------------------------------------------------- turns

	const canStartNow = (): boolean => {
		const c = ctx;
		if (!c || !live || G.starting || G.active) return false;
		try {
			return c.isIdle() && !c.hasPendingMessages();
		} catch {
			return false;
		}
	};

	/** Starts the next queued hub turn when pi is idle. Returns whether one was started. */
	const dispatch = (): boolean => {
		if (G.queue.length === 0 || !canStartNow()) return false;
		const turn = G.queue.shift();
		if (!turn) return false;
		const starting = { ...turn, inputSeen: false, at: Date.now() };
		G.starting = starting;
		try {
			// "/template args" from Telegram runs like typed in pi: templates and commands expand.
			pi.sendUserMessage(turn.text, { expandPromptTemplates: turn.text.startsWith("/") });
		} catch {
			// stale pi (shutting down): try again in the next session
			if (G.starting === starting) G.starting = undefined;
			G.queue.unshift(turn);
			return false;
		}
		if (watchdog) clearTimeout(watchdog);
		watchdog = setTimeout(
			safe(() => {
				watchdog = undefined;
				if (G.starting !== starting) return;
				// pi never started the run: another extension handled the input, or the prompt failed
				G.starting = undefined;
				const done: TurnDone = {
					turn_id: starting.turn_id,
					text: "",
					aborted: false,
					error: starting.inputSeen
						? "pi handled the message without running the agent"
						: "pi did not start a run for the message (see pi for the error)",
				};
				addCompleted(G, done);
				sendTurnDone(done);
				scheduleDispatch();
			}),
			START_WATCHDOG_MS,
		);
		watchdog.unref?.();
		return true;
	};

	/** Tries to start the next queued turn soon; while turns wait, checks again every 2 s. */
	const scheduleDispatch = (delayMs = 0) => {
		if (dispatchTimer) clearTimeout(dispatchTimer);
		dispatchTimer = setTimeout(
			safe(() => {
				dispatchTimer = undefined;
				if (!live) return;
				if (!dispatch()) {
					if (delayMs === 0) sendState();
					// pi can become idle without agent_settled (a manual /compact ends): poll while turns wait
					if (G.queue.length > 0) scheduleDispatch(QUEUE_POLL_MS);
				}
			}),
			delayMs,
		);
		dispatchTimer.unref?.();
	};

	const finishActive = (aborted: boolean) => {
		const a = G.active;
		if (!a) return;
		G.active = undefined;
		const done: TurnDone = { turn_id: a.turn_id, text: a.lastText, aborted, error: a.error };
		addCompleted(G, done);
		sendTurnDone(done);
	};

	const onPrompt = (m: Json) => {
		const turnId = typeof m.turn_id === "string" ? m.turn_id : undefined;
		if (!turnId) return;
		if (G.received.includes(turnId)) {
			hub?.send({ type: "ack", turn_id: turnId, disposition: "duplicate" });
			return;
		}
		markReceived(G, turnId);
		const startNow = G.queue.length === 0 && canStartNow();
		hub?.send({ type: "ack", turn_id: turnId, disposition: startNow ? "started" : "queued" });
		G.queue.push({ turn_id: turnId, text: typeof m.text === "string" ? m.text : String(m.text ?? "") });
		if (startNow) dispatch();
		else scheduleDispatch(QUEUE_POLL_MS);
	};

	const respond = (m: Json, ok: boolean, data?: unknown, error?: string) => {
		if (m.id === undefined || m.id === null) return;
		hub?.send({
			type: "response",
			id: String(m.id),
			ok,
			...(data !== undefined ? { data } : {}),
			...(error !== undefined ? { error } : {}),
		});
	};

	/** The hub's requests about pi itself (the menu, /model, /thinking, /compact, commands). */
	const answerRequest = async (m: Json) => {
		const c = ctx;
		const fail = (e: unknown) => respond(m, false, undefined, e instanceof Error ? e.message : String(e));
		try {
			switch (m.type) {
				case "get_stats": {
					const usage = c?.getContextUsage();
					respond(m, true, {
						model: modelOf(c?.model),
						thinking_level: pi.getThinkingLevel() ?? null,
						context: usage ? { tokens: usage.tokens, contextWindow: usage.contextWindow, percent: usage.percent } : null,
						cost: null,
					});
					return;
				}
				case "get_models": {
					const models = (c?.modelRegistry.getAvailable() ?? []).map((x: AnyEvent) => ({
						provider: String(x.provider ?? ""),
						id: String(x.id ?? ""),
						name: String(x.name ?? x.id ?? ""),
					}));
					respond(m, true, { models, current: modelOf(c?.model) });
					return;
				}
				case "set_model": {
					const model = c?.modelRegistry.find(String(m.provider ?? ""), String(m.model_id ?? ""));
					if (!model) return fail(`no model ${String(m.provider)}/${String(m.model_id)}`);
					const ok = await pi.setModel(model);
					if (!ok) return fail(`no credentials for ${String(m.provider)}`);
					respond(m, true, { model: modelOf(model) });
					return;
				}
				case "get_thinking_levels": {
					// pi clamps a level to what the model supports; these are the levels it offers.
					const reasoning = Boolean((c?.model as AnyEvent)?.reasoning);
					const levels = reasoning ? ["off", "minimal", "low", "medium", "high"] : ["off"];
					respond(m, true, { levels, current: pi.getThinkingLevel() ?? null });
					return;
				}
				case "set_thinking_level":
					pi.setThinkingLevel(String(m.level ?? "off") as AnyEvent);
					respond(m, true, { level: pi.getThinkingLevel() ?? null });
					return;
				case "get_commands": {
					const commands = pi.getCommands().map((x: AnyEvent) => ({
						name: String(x.name ?? ""),
						description: typeof x.description === "string" ? x.description : null,
						source: String(x.source ?? ""),
					}));
					respond(m, true, { commands });
					return;
				}
				case "compact":
					if (!c) return fail("pi has no session");
					c.compact({
						onComplete: (result: AnyEvent) =>
							respond(m, true, { tokensBefore: result?.tokensBefore ?? null, summary: result?.summary ?? null }),
						onError: (e: Error) => fail(e),
					});
					return;
			}
		} catch (e) {
			fail(e);
		}
	};

	const onHubMessage = (m: Json) => {
		switch (m.type) {
			case "prompt":
				onPrompt(m);
				return;
			case "abort": {
				try {
					ctx?.abort();
					respond(m, true);
				} catch (e) {
					respond(m, false, undefined, e instanceof Error ? e.message : String(e));
				}
				return;
			}
			case "get_state":
				respond(m, true, stateFields());
				return;
			case "get_stats":
			case "get_models":
			case "set_model":
			case "get_thinking_levels":
			case "set_thinking_level":
			case "get_commands":
			case "compact":
				void answerRequest(m);
				return;
			case "notify": {
				const level: Level = m.level === "warning" || m.level === "error" ? m.level : "info";
				notify(String(m.text ?? ""), level);
				respond(m, true);
				return;
			}
			case "set_status":
				hubStatus = typeof m.text === "string" ? m.text : undefined;
				updateFooter();
				respond(m, true);
				return;
			case "done_ack":
				if (typeof m.turn_id === "string") ackCompleted(G, m.turn_id);
				respond(m, true);
				return;
			case "error":
				notify(`telegram hub: ${String(m.message ?? "error")}`, "error");
				return;
			default:
				return; // unknown types are ignored (forward compatibility)
		}
	};

	// ---------------------------------------------------------------- pi events

	for (const name of FORWARDED) {
		pi.on(
			name as AnyEvent,
			safe((event: AnyEvent, c: ExtensionContext) => {
				if (!live) return undefined;
				ctx = c;
				onPiEvent(name, event);
				return undefined;
			}) as AnyEvent,
		);
	}

	const onPiEvent = (name: (typeof FORWARDED)[number], event: AnyEvent) => {
		// turn bookkeeping first, so the event carries the right turn id
		if (name === "input") {
			const s = G.starting;
			if (s && event.source === "extension" && !s.inputSeen && event.text === s.text) {
				s.inputSeen = true;
				const reduced = reduceEvent(event);
				if (reduced) forward(reduced, s.turn_id);
				return;
			}
		}
		if (name === "agent_start") {
			releaseAgentEnd(true);
			if (G.starting) {
				const s = G.starting;
				G.starting = undefined;
				if (watchdog) clearTimeout(watchdog);
				watchdog = undefined;
				G.active = { turn_id: s.turn_id, text: s.text, lastText: "", error: null };
			}
		} else if (name !== "agent_end") {
			releaseAgentEnd(false);
		}
		const turnId = G.active?.turn_id ?? null;
		if (name === "message_end" && G.active && event.message?.role === "assistant") {
			const text = assistantText(event.message);
			const stop = event.message.stopReason;
			if (stop === "stop" || text.trim().length > 0) G.active.lastText = text;
			G.active.error = stop === "error" ? String(event.message.errorMessage ?? "error") : null;
		}
		if (name === "agent_end") {
			heldAgentEnd = { turnId };
			return;
		}
		const reduced = reduceEvent(event);
		if (reduced) forward(reduced, turnId);
		switch (name) {
			case "agent_start":
				sendState({ idle: false });
				return;
			case "agent_settled":
				finishActive(Boolean(event.aborted));
				scheduleDispatch(); // sends the state when nothing else starts
				return;
			case "model_select":
				sendState({ model: modelOf(event.model) });
				return;
			case "thinking_level_select":
				sendState({ thinking_level: event.level ?? null });
				return;
			case "session_info_changed":
				sendState({ session_name: event.name ?? null });
				return;
			case "session_compact":
			case "session_compact_failed":
				scheduleDispatch(); // sends the state too
				return;
			default:
				return;
		}
	};

	pi.on(
		"before_agent_start",
		safe((event: AnyEvent) => {
			if (!live || !G.starting) return undefined;
			return { systemPrompt: `${event.systemPrompt}${TELEGRAM_NOTE}` };
		}) as AnyEvent,
	);

	pi.on(
		"session_start",
		safe((event: AnyEvent, c: ExtensionContext) => {
			live = true;
			ctx = c;
			sessionReason = String(event.reason ?? "startup");
			lastFooter = null;
			// print/json runs are one-shot: they never join the hub by themselves
			if (c.mode === "print" || c.mode === "json") return;
			let profile: string | undefined;
			try {
				profile = rememberedProfile(c.cwd);
			} catch {
				profile = undefined;
			}
			if (profile) {
				hub = newHub(profile, true);
				hub.start();
			}
			updateFooter();
			if (G.queue.length > 0) scheduleDispatch();
		}) as AnyEvent,
	);

	pi.on(
		"session_shutdown",
		safe(() => {
			releaseAgentEnd(false);
			// a run cut off without agent_settled still reports its turn
			finishActive(true);
			if (G.starting) {
				// handed to pi but never started: start it again in the next session
				G.queue.unshift({ turn_id: G.starting.turn_id, text: G.starting.text });
				G.starting = undefined;
			}
			if (watchdog) clearTimeout(watchdog);
			if (dispatchTimer) clearTimeout(dispatchTimer);
			watchdog = undefined;
			dispatchTimer = undefined;
			hub?.stop("shutdown");
			hub = undefined;
			hubStatus = undefined;
			live = false;
			ctx = undefined;
		}) as AnyEvent,
	);

	// ---------------------------------------------------------------- commands

	pi.registerCommand("telegram-connect", {
		description: "Connect this pi to the pi-telegram hub (starts the hub when needed): /telegram-connect [profile]",
		handler: async (args: string, c: ExtensionCommandContext) => {
			try {
				ctx = c;
				live = true;
				const arg = (args ?? "").trim();
				let remembered: string | undefined;
				try {
					remembered = rememberedProfile(c.cwd);
				} catch {}
				const profile = arg || hub?.profile || remembered || DEFAULT_PROFILE;
				if (!isProfileName(profile)) {
					notify(`"${profile}" is not a profile name (1-32 lowercase letters or digits)`, "error", c);
					return;
				}
				try {
					remember(c.cwd, profile);
				} catch (e) {
					notify(`could not remember this project: ${e instanceof Error ? e.message : String(e)}`, "warning", c);
				}
				if (hub && hub.profile !== profile) {
					hub.stop("disconnect");
					hub = undefined;
				}
				if (!hub) hub = newHub(profile, true);
				hub.autoStart = true;
				const h = hub;
				updateFooter();
				if (!h.connected) notify(`telegram: connecting to the hub of profile ${profile}…`, "info", c);
				const outcome = await h.connectNow();
				if (hub !== h || !live || outcome.silent) return;
				updateFooter();
				notify(`telegram: ${outcome.message}`, outcome.ok ? "info" : "error", c);
			} catch (e) {
				notify(`telegram-connect failed: ${e instanceof Error ? e.message : String(e)}`, "error", c);
			}
		},
	});

	pi.registerCommand("telegram-disconnect", {
		description: "Disconnect this pi from the pi-telegram hub and forget this project",
		handler: async (_args: string, c: ExtensionCommandContext) => {
			try {
				ctx = c;
				let remembered: string | undefined;
				try {
					remembered = rememberedProfile(c.cwd);
				} catch {}
				const profile = hub?.profile ?? remembered;
				if (!profile) {
					notify("telegram: this pi is not connected", "info", c);
					return;
				}
				const ok = await c.ui.confirm(
					"Disconnect from Telegram?",
					`This pi stops taking messages from Telegram (profile ${profile}), and ${path.resolve(c.cwd)} is no longer reconnected automatically.`,
				);
				if (!ok) return;
				hub?.stop("disconnect");
				hub = undefined;
				hubStatus = undefined;
				try {
					forget(c.cwd);
				} catch (e) {
					notify(`could not forget this project: ${e instanceof Error ? e.message : String(e)}`, "warning", c);
				}
				updateFooter();
				notify(`telegram: disconnected from the hub of profile ${profile}`, "info", c);
			} catch (e) {
				notify(`telegram-disconnect failed: ${e instanceof Error ? e.message : String(e)}`, "error", c);
			}
		},
	});

	pi.registerCommand("telegram-status", {
		description: "Show the Telegram connection: state, profile, hub pid, instance id, queued turns",
		handler: async (_args: string, c: ExtensionCommandContext) => {
			try {
				ctx = c;
				let remembered: string | undefined;
				try {
					remembered = rememberedProfile(c.cwd);
				} catch {}
				const lines: string[] = [];
				if (!hub) {
					lines.push("telegram: not connected");
					if (remembered) lines.push(`remembered profile: ${remembered}`);
					else lines.push("run /telegram-connect [profile] to connect this project");
				} else {
					lines.push(hub.connected ? "telegram: connected" : `telegram: ${hub.halted ?? hub.detail}`);
					lines.push(`profile: ${hub.profile} (${hub.paths.socket})`);
					lines.push(`hub pid: ${hub.welcome?.hub_pid ?? "-"}`);
					lines.push(`instance id: ${hub.welcome?.instance_id ?? "-"}`);
					lines.push(`remembered for this project: ${remembered === hub.profile ? "yes" : "no"}`);
					if (hub.buffered > 0) lines.push(`lines waiting for the hub: ${hub.buffered}`);
				}
				lines.push(`queued turns: ${G.queue.length}`);
				if (G.active) lines.push(`running turn: ${G.active.turn_id}`);
				if (G.completed.length > 0) lines.push(`results not yet acknowledged by the hub: ${G.completed.length}`);
				notify(lines.join("\n"), "info", c);
			} catch (e) {
				notify(`telegram-status failed: ${e instanceof Error ? e.message : String(e)}`, "error", c);
			}
		},
	});

	pi.registerCommand("telegram-setup", {
		description: "Set up the Telegram bot (token from @BotFather) and get the pairing code: /telegram-setup [profile]",
		handler: async (args: string, c: ExtensionCommandContext) => {
			try {
				const profile = (args ?? "").trim() || hub?.profile || DEFAULT_PROFILE;
				if (!isProfileName(profile)) {
					notify(`"${profile}" is not a profile name (1-32 lowercase letters or digits)`, "error", c);
					return;
				}
				const token = (
					await c.ui.input(`Telegram bot token for profile ${profile} (from @BotFather)`, "123456789:AA…")
				)?.trim();
				if (!token) {
					notify("telegram-setup: cancelled", "info", c);
					return;
				}
				const { bin, source } = hubBinary();
				// The token goes through the environment, never the command line (visible in `ps`).
				const res = await run(bin, ["setup", "--profile", profile, "--json"], { TELEGRAM_BOT_TOKEN: token });
				if (res.notFound) {
					notify(`telegram-setup: the hub binary was not found: "${bin}" (from ${source}). To fix it, ${INSTALL_HINT}.`, "error", c);
					return;
				}
				if (res.code !== 0) {
					const why = lastNonEmpty(res.stderr) ?? lastNonEmpty(res.stdout) ?? `exit code ${res.code}`;
					notify(`telegram-setup failed: ${why}`, "error", c);
					return;
				}
				let report: AnyEvent;
				try {
					report = JSON.parse(lastNonEmpty(res.stdout) ?? "");
				} catch {
					notify(`telegram-setup: unexpected output from ${bin}: ${lastNonEmpty(res.stdout) ?? "(none)"}`, "error", c);
					return;
				}
				const bot = `@${String(report.bot_username ?? "?")}`;
				const parts = [`telegram: bot ${bot} is set up for profile ${profile}.`];
				if (report.pairing_code) {
					parts.push(`Pair with it: send /start ${report.pairing_code} to ${bot} in Telegram (the code is valid for 10 minutes).`);
				} else {
					parts.push("Its owner is already paired.");
				}
				if (report.has_topics_enabled === false) {
					parts.push("Tip: turn on Threaded Mode for the bot in @BotFather to get one thread per pi.");
				}
				if (!hub?.connected) parts.push(`Then run /telegram-connect${profile === DEFAULT_PROFILE ? "" : ` ${profile}`}.`);
				notify(parts.join("\n"), "info", c);
			} catch (e) {
				notify(`telegram-setup failed: ${e instanceof Error ? e.message : String(e)}`, "error", c);
			}
		},
	});
}

/** Commands of an inert instance (spawned by the hub): they only say so. */
function registerInertCommands(pi: ExtensionAPI): void {
	for (const name of ["telegram-connect", "telegram-disconnect", "telegram-status", "telegram-setup"]) {
		pi.registerCommand(name, {
			description: "pi-telegram (inactive: this pi was started by the hub)",
			handler: async (_args: string, c: ExtensionCommandContext) => {
				try {
					if (c.hasUI) c.ui.notify("telegram: this pi was started by the pi-telegram hub (PI_TELEGRAM_CHILD=1); the extension is inactive here", "info");
				} catch {}
			},
		});
	}
}

function lastNonEmpty(text: string): string | undefined {
	const lines = text
		.split("\n")
		.map((l) => l.trim())
		.filter((l) => l.length > 0);
	return lines[lines.length - 1];
}

function run(
	bin: string,
	args: string[],
	extraEnv: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string; notFound: boolean }> {
	return new Promise((resolve) => {
		try {
			execFile(
				bin,
				args,
				{ timeout: 60_000, maxBuffer: 1024 * 1024, env: { ...process.env, ...extraEnv, NO_COLOR: "1" } },
				(err, stdout, stderr) => {
					const e = err as (NodeJS.ErrnoException & { code?: number | string }) | null;
					if (e && e.code === "ENOENT") {
						resolve({ code: -1, stdout: "", stderr: "", notFound: true });
						return;
					}
					const code = e ? (typeof e.code === "number" ? e.code : 1) : 0;
					resolve({ code, stdout: String(stdout ?? ""), stderr: String(stderr ?? ""), notFound: false });
				},
			);
		} catch (e) {
			resolve({ code: 1, stdout: "", stderr: e instanceof Error ? e.message : String(e), notFound: false });
		}
	});
}
