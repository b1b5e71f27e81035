import { CHILD_TOKEN_ENV, startToolsChild } from "./lib/child.js";
import { registerCommands, registerInertCommands, remembered } from "./lib/commands.js";
import { Forwarder } from "./lib/forwarder.js";
import { InstanceLink } from "./lib/link.js";
import { addTelegramNote } from "./lib/note.js";
import { Requests } from "./lib/requests.js";
import { Session } from "./lib/session.js";
import { contributeSkill } from "./lib/skill.js";
import { claimProcess } from "./lib/state.js";
import { ToolGate } from "./lib/tool-gate.js";
import { registerTools, ToolCalls } from "./lib/tools.js";
import { Inbox } from "./lib/files.js";
import { TurnRunner } from "./lib/turns.js";
import { UiPromptWatch } from "./lib/ui-prompt.js";
export default function piTelegram(pi) {
    const release = claimProcess(() => {
        try {
            pi.on("session_shutdown", () => undefined)();
            return false;
        }
        catch {
            return true;
        }
    });
    if (!release)
        return;
    const s = new Session(pi);
    contributeSkill(pi, s.problems);
    const token = process.env[CHILD_TOKEN_ENV];
    if (token) {
        startToolsChild(pi, s, token, release);
        return;
    }
    if (process.env.PI_TELEGRAM_CHILD === "1") {
        registerInertCommands(pi, "PI_TELEGRAM_CHILD=1");
        pi.on("before_agent_start", s.problems.guard("adding the Telegram note to the system prompt", (event) => addTelegramNote(event)));
        pi.on("session_shutdown", () => release());
        return;
    }
    const gate = new ToolGate(pi);
    const link = new InstanceLink(s, {
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
    const inbox = new Inbox();
    const route = (m) => {
        switch (m.type) {
            case "prompt":
                turns.onPrompt({ ...m, text: inbox.localize(m.text), context: inbox.localize(m.context) });
                return;
            case "file": {
                const failed = inbox.onPart(m);
                if (failed)
                    s.problems.record("receiving a file from the hub", new Error(failed));
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
                s.problems.guard("steering pi", () => pi.sendUserMessage(m.text, { deliverAs: "steer" }))();
                requests.respond(m.id, true);
                return;
            case "done_ack":
                if (m.turn_id !== undefined)
                    turns.doneAck(m.turn_id);
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
        return s.problems.guard("adding the Telegram note to the system prompt", () => turns.startsHubTurn() ? addTelegramNote(event) : undefined)();
    });
    pi.on("session_start", s.problems.guard("starting the session", (event, c) => {
        s.live = true;
        s.ctx = c;
        s.reason = String(event.reason ?? "startup");
        s.problems.guard("reading which Telegram tools were hidden", () => gate.resume(c.sessionManager.getBranch()))();
        link.resetFooter();
        if (c.mode === "print" || c.mode === "json")
            return;
        const profile = remembered(s, c.cwd);
        if (profile)
            link.open(profile, true).start();
        link.updateFooter();
        if (turns.hasQueued())
            turns.scheduleDispatch();
    }));
    const shutdown = s.problems.guard("ending the session", (quit) => {
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
