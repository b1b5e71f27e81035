/**
 * Tools-only mode: this pi is a headless `pi --mode rpc` child the hub spawned, and the hub set
 * `PI_TELEGRAM_CHILD_TOKEN`. The hub drives the child over RPC; the extension only serves
 * `telegram_attach` and `telegram_message`, over a connection in the `tools` role
 * (docs/wire-protocol.md): hello with the token at session_start, reconnects like the instance
 * connection, never starts a hub, no events, no prompts, no footer.
 *
 * The profile is `PI_TELEGRAM_PROFILE` (default `default`): its hub.sock and hub.secret.
 */
import * as path from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { registerInertCommands } from "./commands.ts";
import { HubConnection } from "./connection.ts";
import { addTelegramNote } from "./note.ts";
import { DEFAULT_PROFILE, isProfileName } from "./paths.ts";
import type { Session } from "./session.ts";
import { ToolGate } from "./tool-gate.ts";
import { registerTools, ToolCalls } from "./tools.ts";

export const CHILD_TOKEN_ENV = "PI_TELEGRAM_CHILD_TOKEN";
export const PROFILE_ENV = "PI_TELEGRAM_PROFILE";

export function startToolsChild(pi: ExtensionAPI, s: Session, token: string, release: () => void): void {
	let conn: HubConnection | undefined;
	const profile = process.env[PROFILE_ENV] || DEFAULT_PROFILE;
	const calls = new ToolCalls({
		unavailable: () => {
			if (!isProfileName(profile)) return `${PROFILE_ENV}="${profile}" is not a profile name`;
			if (!conn) return "not connected to the pi-telegram hub (the session has not started)";
			if (conn.connected) return undefined;
			return `not connected to the pi-telegram hub of profile ${profile} (${conn.halted ?? conn.detail})`;
		},
		send: (msg) => conn?.send(msg) ?? false,
	});

	const gate = new ToolGate(pi);
	registerTools(pi, () => calls);
	registerInertCommands(pi, `${CHILD_TOKEN_ENV} is set`);

	// The hub sends every prompt of a child: each run's message came from Telegram.
	pi.on("before_agent_start", (event) => {
		s.problems.guard("hiding or showing the Telegram tools", () =>
			gate.set(isProfileName(profile) && conn !== undefined && !conn.unreachable),
		)();
		return s.problems.guard("adding the Telegram note to the system prompt", () => addTelegramNote(event))();
	});

	pi.on(
		"session_start",
		s.problems.guard("starting the tools connection", (_event, c) => {
			s.live = true;
			s.ctx = c;
			s.problems.guard("reading which Telegram tools were hidden", () => gate.resume(c.sessionManager.getBranch()))();
			if (!isProfileName(profile)) {
				s.problems.record("tools connection", `${PROFILE_ENV}="${profile}" is not a profile name`);
				return;
			}
			const cwd = path.resolve(c.cwd);
			conn?.stop();
			const hub = new HubConnection(
				profile,
				{
					hello: () => ({ role: "tools", token, pid: process.pid, cwd }),
					onWelcome: () => s.problems.guard("showing the Telegram tools again", () => gate.set(true))(),
					onMessage: (m) => {
						if (m.type === "response") calls.onResponse(m);
						else if (m.type === "error") s.problems.record("the hub", m.message);
						// the hub sends a tools connection nothing else; anything else is ignored
					},
					onStatus: () => {
						if (conn === hub && !hub.connected) calls.failAll("the connection to the pi-telegram hub was lost");
					},
					// a headless child has nobody to show things to
					notify: (text) => s.problems.record("tools connection", text),
					problem: (where, e) => s.problems.record(where, e),
				},
				{ role: "tools" },
			);
			conn = hub;
			hub.start();
		}),
	);

	const stop = s.problems.guard("stopping the tools connection", () => {
		conn?.stop();
		conn = undefined;
		calls.failAll("pi is shutting down");
		s.live = false;
		s.ctx = undefined;
	});
	pi.on("session_shutdown", () => {
		stop();
		release();
	});
}
