/**
 * The /telegram-* commands of a connectable pi, and the inert ones of a hub-spawned child.
 */
import * as path from "node:path";
import type { ExtensionAPI, ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import { forget, remember, rememberedProfile } from "./connections.ts";
import type { InstanceLink } from "./link.ts";
import { errorText } from "./log.ts";
import { DEFAULT_PROFILE, isProfileName } from "./paths.ts";
import { hubBinary, ownVersion } from "./release.ts";
import type { Session } from "./session.ts";
import { telegramSetup } from "./setup.ts";
import type { ToolCalls } from "./tools.ts";
import type { TurnRunner } from "./turns.ts";

export const COMMAND_NAMES = ["telegram-connect", "telegram-disconnect", "telegram-status", "telegram-setup"] as const;

/**
 * The command the hub's /new and /sessions run in this pi (only a command handler may replace
 * pi's session): `new` or `switch <session file>`. Not meant to be typed.
 */
export const SESSION_COMMAND = "telegram-session";

/** The project's remembered profile; a connections.json that cannot be read is reported. */
export function remembered(s: Session, cwd: string): string | undefined {
	try {
		return rememberedProfile(cwd);
	} catch (e) {
		s.problems.record("reading connections.json", e);
		return undefined;
	}
}

export function registerCommands(
	pi: ExtensionAPI,
	s: Session,
	link: InstanceLink,
	turns: TurnRunner,
	tools: () => ToolCalls,
): void {
	/** Runs a command's body; a throw is shown as the command's failure. */
	const command =
		(name: string, body: (args: string, c: ExtensionCommandContext) => Promise<void>) =>
		async (args: string, c: ExtensionCommandContext): Promise<void> => {
			try {
				await body(args, c);
			} catch (e) {
				s.notify(`${name} failed: ${errorText(e)}`, "error", c);
			}
		};

	pi.registerCommand("telegram-connect", {
		description: "Connect this pi to the pi-telegram hub (starts the hub when needed): /telegram-connect [profile]",
		handler: command("telegram-connect", async (args, c) => {
			s.ctx = c;
			s.live = true;
			const arg = (args ?? "").trim();
			const profile = arg || link.hub?.profile || remembered(s, c.cwd) || DEFAULT_PROFILE;
			if (!isProfileName(profile)) {
				s.notify(`"${profile}" is not a profile name (1-32 lowercase letters or digits)`, "error", c);
				return;
			}
			try {
				remember(c.cwd, profile);
			} catch (e) {
				s.notify(`could not remember this project: ${errorText(e)}`, "warning", c);
			}
			if (link.hub && link.hub.profile !== profile) link.close("disconnect");
			const h = link.hub ?? link.open(profile, true);
			h.autoStart = true;
			link.updateFooter();
			if (!h.connected) s.notify(`telegram: connecting to the hub of profile ${profile}…`, "info", c);
			const outcome = await h.connectNow();
			if (link.hub !== h || !s.live || outcome.silent) return;
			link.updateFooter();
			s.notify(`telegram: ${outcome.message}`, outcome.ok ? "info" : "error", c);
		}),
	});

	pi.registerCommand("telegram-disconnect", {
		description: "Disconnect this pi from the pi-telegram hub and forget this project",
		handler: command("telegram-disconnect", async (_args, c) => {
			s.ctx = c;
			const profile = link.hub?.profile ?? remembered(s, c.cwd);
			if (!profile) {
				s.notify("telegram: this pi is not connected", "info", c);
				return;
			}
			const ok = await c.ui.confirm(
				"Disconnect from Telegram?",
				`This pi stops taking messages from Telegram (profile ${profile}), and ${path.resolve(c.cwd)} is no longer reconnected automatically.`,
			);
			if (!ok) return;
			link.close("disconnect");
			try {
				forget(c.cwd);
			} catch (e) {
				s.notify(`could not forget this project: ${errorText(e)}`, "warning", c);
			}
			link.updateFooter();
			s.notify(`telegram: disconnected from the hub of profile ${profile}`, "info", c);
		}),
	});

	pi.registerCommand("telegram-status", {
		description: "Show the Telegram connection: state, profile, hub pid, instance id, queued turns",
		handler: command("telegram-status", async (_args, c) => {
			s.ctx = c;
			const known = remembered(s, c.cwd);
			const hub = link.hub;
			const lines: string[] = [];
			if (!hub) {
				lines.push("telegram: not connected");
				if (known) lines.push(`remembered profile: ${known}`);
				else lines.push("run /telegram-connect [profile] to connect this project");
			} else {
				lines.push(hub.connected ? "telegram: connected" : `telegram: ${hub.halted ?? hub.detail}`);
				lines.push(`profile: ${hub.profile} (${hub.where})`);
				const hubRelease = hub.welcome ? (hub.welcome.hub_version ?? "unknown") : undefined;
				lines.push(`hub pid: ${hub.welcome?.hub_pid ?? "-"}${hubRelease ? `, release ${hubRelease}` : ""}`);
				lines.push(`instance id: ${hub.welcome?.instance_id ?? "-"}`);
				lines.push(`remembered for this project: ${known === hub.profile ? "yes" : "no"}`);
				if (hub.buffered > 0) lines.push(`lines waiting for the hub: ${hub.buffered}`);
			}
			lines.push(`extension: pi-telegram ${ownVersion()}`);
			// Which binary a start from this pi runs, so a person can tell an npm install from a
			// cargo one (and a stale one on PATH) without a shell.
			const bin = hubBinary();
			lines.push("bin" in bin ? `hub binary: ${bin.bin} (from ${bin.source})` : `hub binary: none (${bin.problem})`);
			lines.push(...turns.statusLines());
			const waiting = tools().waiting;
			if (waiting > 0) lines.push(`tool calls waiting for the hub: ${waiting}`);
			const problems = s.problems.list();
			if (problems.length > 0) {
				lines.push(`recent problems (${problems.length}, the last ones):`);
				lines.push(...problems.slice(-3).map((p) => `  ${p}`));
			}
			s.notify(lines.join("\n"), "info", c);
		}),
	});

	pi.registerCommand(SESSION_COMMAND, {
		description: "pi-telegram: a new or resumed session, asked for from Telegram (/new, /sessions)",
		handler: command(SESSION_COMMAND, async (args, c) => {
			const [verb, ...rest] = (args ?? "").trim().split(" ");
			if (verb === "new") {
				await c.newSession({ parentSession: c.sessionManager.getSessionFile() });
			} else if (verb === "switch" && rest.length > 0) {
				await c.switchSession(rest.join(" "));
			} else {
				s.notify(`${SESSION_COMMAND}: use "new" or "switch <session file>"`, "error", c);
			}
		}),
	});

	pi.registerCommand("telegram-setup", {
		description: "Set up the Telegram bot (token from @BotFather) and get the pairing code: /telegram-setup [profile]",
		handler: command("telegram-setup", async (args, c) =>
			telegramSetup(s, args, c, { profile: link.hub?.profile, connected: link.connected }),
		),
	});
}

/** Commands of a pi the hub spawned: they only say that the extension is not connectable here. */
export function registerInertCommands(pi: ExtensionAPI, why: string): void {
	for (const name of COMMAND_NAMES) {
		pi.registerCommand(name, {
			description: "pi-telegram (inactive: this pi was started by the hub)",
			handler: async (_args: string, c: ExtensionCommandContext) => {
				if (!c.hasUI) return;
				try {
					c.ui.notify(`telegram: this pi was started by the pi-telegram hub (${why}); the extension is inactive here`, "info");
				} catch (e) {
					// nothing else to show it on: the command's failure is pi's to report
					throw new Error(`telegram: could not show the notice: ${errorText(e)}`);
				}
			},
		});
	}
}
