import * as path from "node:path";
import { registerInertCommands } from "./commands.js";
import { HubConnection } from "./connection.js";
import { addTelegramNote } from "./note.js";
import { DEFAULT_PROFILE, isProfileName } from "./paths.js";
import { ToolGate } from "./tool-gate.js";
import { registerTools, ToolCalls } from "./tools.js";
export const CHILD_TOKEN_ENV = "PI_TELEGRAM_CHILD_TOKEN";
export const PROFILE_ENV = "PI_TELEGRAM_PROFILE";
export function startToolsChild(pi, s, token, release) {
    let conn;
    const profile = process.env[PROFILE_ENV] || DEFAULT_PROFILE;
    const calls = new ToolCalls({
        unavailable: () => {
            if (!isProfileName(profile))
                return `${PROFILE_ENV}="${profile}" is not a profile name`;
            if (!conn)
                return "not connected to the pi-telegram hub (the session has not started)";
            if (conn.connected)
                return undefined;
            return `not connected to the pi-telegram hub of profile ${profile} (${conn.halted ?? conn.detail})`;
        },
        send: (msg) => conn?.send(msg) ?? false,
    });
    const gate = new ToolGate(pi);
    registerTools(pi, () => calls);
    registerInertCommands(pi, `${CHILD_TOKEN_ENV} is set`);
    pi.on("before_agent_start", (event) => {
        s.problems.guard("hiding or showing the Telegram tools", () => gate.set(isProfileName(profile) && conn !== undefined && !conn.unreachable))();
        return s.problems.guard("adding the Telegram note to the system prompt", () => addTelegramNote(event))();
    });
    pi.on("session_start", s.problems.guard("starting the tools connection", (_event, c) => {
        s.live = true;
        s.ctx = c;
        s.problems.guard("reading which Telegram tools were hidden", () => gate.resume(c.sessionManager.getBranch()))();
        if (!isProfileName(profile)) {
            s.problems.record("tools connection", `${PROFILE_ENV}="${profile}" is not a profile name`);
            return;
        }
        const cwd = path.resolve(c.cwd);
        conn?.stop();
        const hub = new HubConnection(profile, {
            hello: () => ({ role: "tools", token, pid: process.pid, cwd }),
            onWelcome: () => s.problems.guard("showing the Telegram tools again", () => gate.set(true))(),
            onMessage: (m) => {
                if (m.type === "response")
                    calls.onResponse(m);
                else if (m.type === "error")
                    s.problems.record("the hub", m.message);
            },
            onStatus: () => {
                if (conn === hub && !hub.connected)
                    calls.failAll("the connection to the pi-telegram hub was lost");
            },
            notify: (text) => s.problems.record("tools connection", text),
            problem: (where, e) => s.problems.record(where, e),
        }, { role: "tools" });
        conn = hub;
        hub.start();
    }));
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
