import * as path from "node:path";
import { forget, remember, rememberedProfile } from "./connections.js";
import { errorText } from "./log.js";
import { DEFAULT_PROFILE, isProfileName } from "./paths.js";
import { hubBinary, ownVersion } from "./release.js";
import { telegramSetup } from "./setup.js";
export const COMMAND_NAMES = ["telegram-connect", "telegram-disconnect", "telegram-status", "telegram-setup"];
export const SESSION_COMMAND = "telegram-session";
export function remembered(s, cwd) {
    try {
        return rememberedProfile(cwd);
    }
    catch (e) {
        s.problems.record("reading connections.json", e);
        return undefined;
    }
}
export function registerCommands(pi, s, link, turns, tools) {
    const command = (name, body) => async (args, c) => {
        try {
            await body(args, c);
        }
        catch (e) {
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
            }
            catch (e) {
                s.notify(`could not remember this project: ${errorText(e)}`, "warning", c);
            }
            if (link.hub && link.hub.profile !== profile)
                link.close("disconnect");
            const h = link.hub ?? link.open(profile, true);
            h.autoStart = true;
            link.updateFooter();
            if (!h.connected)
                s.notify(`telegram: connecting to the hub of profile ${profile}…`, "info", c);
            const outcome = await h.connectNow();
            if (link.hub !== h || !s.live || outcome.silent)
                return;
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
            const ok = await c.ui.confirm("Disconnect from Telegram?", `This pi stops taking messages from Telegram (profile ${profile}), and ${path.resolve(c.cwd)} is no longer reconnected automatically.`);
            if (!ok)
                return;
            link.close("disconnect");
            try {
                forget(c.cwd);
            }
            catch (e) {
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
            const lines = [];
            if (!hub) {
                lines.push("telegram: not connected");
                if (known)
                    lines.push(`remembered profile: ${known}`);
                else
                    lines.push("run /telegram-connect [profile] to connect this project");
            }
            else {
                lines.push(hub.connected ? "telegram: connected" : `telegram: ${hub.halted ?? hub.detail}`);
                lines.push(`profile: ${hub.profile} (${hub.where})`);
                const hubRelease = hub.welcome ? (hub.welcome.hub_version ?? "unknown") : undefined;
                lines.push(`hub pid: ${hub.welcome?.hub_pid ?? "-"}${hubRelease ? `, release ${hubRelease}` : ""}`);
                lines.push(`instance id: ${hub.welcome?.instance_id ?? "-"}`);
                lines.push(`remembered for this project: ${known === hub.profile ? "yes" : "no"}`);
                if (hub.buffered > 0)
                    lines.push(`lines waiting for the hub: ${hub.buffered}`);
            }
            lines.push(`extension: pi-telegram ${ownVersion()}`);
            const bin = hubBinary();
            lines.push("bin" in bin ? `hub binary: ${bin.bin} (from ${bin.source})` : `hub binary: none (${bin.problem})`);
            lines.push(...turns.statusLines());
            const waiting = tools().waiting;
            if (waiting > 0)
                lines.push(`tool calls waiting for the hub: ${waiting}`);
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
            }
            else if (verb === "switch" && rest.length > 0) {
                await c.switchSession(rest.join(" "));
            }
            else {
                s.notify(`${SESSION_COMMAND}: use "new" or "switch <session file>"`, "error", c);
            }
        }),
    });
    pi.registerCommand("telegram-setup", {
        description: "Set up the Telegram bot (token from @BotFather) and get the pairing code: /telegram-setup [profile]",
        handler: command("telegram-setup", async (args, c) => telegramSetup(s, args, c, { profile: link.hub?.profile, connected: link.connected })),
    });
}
export function registerInertCommands(pi, why) {
    for (const name of COMMAND_NAMES) {
        pi.registerCommand(name, {
            description: "pi-telegram (inactive: this pi was started by the hub)",
            handler: async (_args, c) => {
                if (!c.hasUI)
                    return;
                try {
                    c.ui.notify(`telegram: this pi was started by the pi-telegram hub (${why}); the extension is inactive here`, "info");
                }
                catch (e) {
                    throw new Error(`telegram: could not show the notice: ${errorText(e)}`);
                }
            },
        });
    }
}
