/**
 * pi-telegram extension: connects a live pi session to the pi-telegram hub (the Rust daemon that
 * is the only Telegram client) over the hub's Unix socket, so the person can drive this pi from
 * Telegram. Protocol: docs/wire-protocol.md. No npm dependencies. See README.md.
 *
 * This file only wires the modules in lib/ together. One copy runs per pi process (`claimProcess`);
 * then, by the environment the hub sets on the pi children it spawns:
 * - `PI_TELEGRAM_CHILD_TOKEN` set: tools-only mode (`lib/child.ts`);
 * - `PI_TELEGRAM_CHILD=1`: inert (the hub drives the child over RPC);
 * - otherwise a connectable instance: /telegram-connect etc., hub turns, events, the tools.
 * In every mode it offers pi the `telegram-bridge` skill (`lib/skill.ts`) and points the model to
 * it in runs whose message came from Telegram (`lib/note.ts`): a hub turn here, every run of a
 * child (the hub sends all of its prompts). The tools leave the model's view while the hub
 * cannot be reached (`lib/tool-gate.ts`).
 *
 * Lifecycle (pi's rules): nothing is opened in the factory; the connection starts at
 * `session_start` (when the project is remembered in connections.json, or on /telegram-connect)
 * and stops at `session_shutdown`. `/reload`, `/new`, `/resume` and `/fork` create a new instance
 * of this extension; only the turn bookkeeping (`lib/state.ts`) outlives one.
 */
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { CHILD_TOKEN_ENV, startToolsChild } from "./lib/child.ts";
import { registerCommands, registerInertCommands, remembered } from "./lib/commands.ts";
import { Forwarder } from "./lib/forwarder.ts";
import { InstanceLink } from "./lib/link.ts";
import { addTelegramNote } from "./lib/note.ts";
import { Requests } from "./lib/requests.ts";
import { Session } from "./lib/session.ts";
import { contributeSkill } from "./lib/skill.ts";
import { claimProcess } from "./lib/state.ts";
import { ToolGate } from "./lib/tool-gate.ts";
import { registerTools, ToolCalls } from "./lib/tools.ts";
import { Inbox } from "./lib/files.ts";
import { TurnRunner } from "./lib/turns.ts";
import { UiPromptWatch } from "./lib/ui-prompt.ts";
import type { HubMessage } from "./lib/wire.ts";

export default function piTelegram(pi: ExtensionAPI): void {
	const release = claimProcess(() => {
		// A stale runtime (after /reload, /new, …) throws on any API call; `on` has no other effect.
		try {
			pi.on("session_shutdown", () => undefined)();
			return false;
		} catch {
			return true;
		}
	});
	// Another copy of this extension already runs in this process (installed in the agent dir
	// and passed with -e, say): this one stays out of the way entirely.
	if (!release) return;

	const s = new Session(pi);
	// Only the copy holding the claim offers it, so pi hears of the skill once.
	contributeSkill(pi, s.problems);
	const token = process.env[CHILD_TOKEN_ENV];
	if (token) {
		startToolsChild(pi, s, token, release);
		return;
	}
	if (process.env.PI_TELEGRAM_CHILD === "1") {
		// The hub spawned this pi and talks to it over RPC: connecting it here as well would
		// register the instance twice. Stay inert, but every prompt still comes from Telegram.
		registerInertCommands(pi, "PI_TELEGRAM_CHILD=1");
		pi.on(
			"before_agent_start",
			s.problems.guard("adding the Telegram note to the system prompt", (event) => addTelegramNote(event)),
		);
		pi.on("session_shutdown", () => release());
		return;
	}

	const gate = new ToolGate(pi);
	const link: InstanceLink = new InstanceLink(s, {
		helloTurns: () => turns.helloTurns(),
		onWelcome: (w) => {
			turns.afterWelcome(w.store_id);
			prompts.afterWelcome();
			s.problems.guard("showing the Telegram tools again", () => gate.set(true))();
		},
		onMessage: (m) => route(m),
		onDisconnected: () => tools.failAll("the connection to the pi-telegram hub was lost"),
	});
	const turns = new TurnRunner(s, link);
	const forwarder = new Forwarder(s, turns, link);
	const prompts = new UiPromptWatch(s, link);
	const requests = new Requests(s, link);
	const tools = new ToolCalls({
		unavailable: () => link.unavailable(),
		refuses: (tool) => link.refuses(tool),
		send: (msg) => link.send(msg),
		turnId: () => turns.activeTurnId(),
		filesAsBytes: () => link.filesAsBytes(),
		drained: () => link.drained(),
	});
	// Files the person sent, from a hub on another machine.
	const inbox = new Inbox();

	/** What the hub says, after the welcome. */
	const route = (m: HubMessage): void => {
		switch (m.type) {
			case "prompt":
				// Its files came before it: it names them by their paths here.
				turns.onPrompt({ ...m, text: inbox.localize(m.text), context: inbox.localize(m.context) });
				return;
			case "file": {
				const failed = inbox.onPart(m);
				if (failed) s.problems.record("receiving a file from the hub", new Error(failed));
				return;
			}
			case "abort":
				requests.abort(m);
				return;
			case "get_state":
				requests.getState(m);
				return;
			case "get_stats":
			case "get_models":
			case "set_model":
			case "get_thinking_levels":
			case "set_thinking_level":
			case "get_commands":
			case "compact":
			case "new_session":
			case "get_sessions":
			case "switch_session":
				void requests.answer(m);
				return;
			case "notify":
				s.notify(m.text, m.level);
				requests.respond(m.id, true);
				return;
			case "set_status":
				link.setHubStatus(m.text);
				requests.respond(m.id, true);
				return;
			case "steer":
				// Into the run pi is doing now; idle, pi starts a run with it (the hub steers
				// only while a turn of its own runs).
				s.problems.guard("steering pi", () => pi.sendUserMessage(m.text, { deliverAs: "steer" }))();
				requests.respond(m.id, true);
				return;
			case "done_ack":
				if (m.turn_id !== undefined) turns.doneAck(m.turn_id);
				requests.respond(m.id, true);
				return;
			case "error":
				s.notify(`telegram hub: ${m.message}`, "error");
				return;
			case "response":
				tools.onResponse(m);
				return;
		}
	};

	forwarder.register(pi);
	prompts.register(pi);
	registerTools(pi, () => tools);
	registerCommands(pi, s, link, turns, () => tools);

	pi.on("before_agent_start", (event) => {
		s.problems.guard("hiding or showing the Telegram tools", () => gate.set(link.usable()))();
		return s.problems.guard("adding the Telegram note to the system prompt", () =>
			turns.startsHubTurn() ? addTelegramNote(event) : undefined,
		)();
	});

	pi.on(
		"session_start",
		s.problems.guard("starting the session", (event, c) => {
			s.live = true;
			s.ctx = c;
			s.reason = String(event.reason ?? "startup");
			s.problems.guard("reading which Telegram tools were hidden", () => gate.resume(c.sessionManager.getBranch()))();
			link.resetFooter();
			// print/json runs are one-shot: they never join the hub by themselves
			if (c.mode === "print" || c.mode === "json") return;
			const profile = remembered(s, c.cwd);
			if (profile) link.open(profile, true).start();
			link.updateFooter();
			if (turns.hasQueued()) turns.scheduleDispatch();
		}),
	);

	const shutdown = s.problems.guard("ending the session", (quit: boolean) => {
		forwarder.releaseAgentEnd(false);
		turns.shutdown();
		link.close(quit ? "quit" : "shutdown");
		s.live = false;
		s.ctx = undefined;
	});
	pi.on("session_shutdown", (event) => {
		shutdown(event.reason === "quit");
		release();
	});
}
