import * as path from "node:path";
import { Problems } from "./log.js";
export function modelRef(m) {
    return m && typeof m === "object" ? { provider: String(m.provider ?? ""), id: String(m.id ?? "") } : null;
}
export class Session {
    pi;
    ctx;
    live = false;
    reason = "startup";
    problems = new Problems();
    constructor(pi) {
        this.pi = pi;
    }
    notify(text, level = "info", c = this.ctx) {
        if (!c)
            return;
        try {
            if (c.hasUI)
                c.ui.notify(text, level);
        }
        catch (e) {
            this.problems.record(`showing "${text.slice(0, 80)}"`, e);
        }
    }
    stateFields(over = {}) {
        const c = this.ctx;
        const pi = this.pi;
        const get = (what, f, dflt) => {
            try {
                return f();
            }
            catch (e) {
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
