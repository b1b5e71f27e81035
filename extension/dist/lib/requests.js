import { SESSION_COMMAND } from "./commands.js";
import { errorText } from "./log.js";
import { modelRef } from "./session.js";
const SESSIONS_LISTED = 500;
const FIRST_MESSAGE_CHARS = 1000;
const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];
function sessionManagerClass(c) {
    const ctor = c.sessionManager.constructor;
    if (typeof ctor?.list !== "function")
        throw new Error("this pi does not list its sessions (SessionManager.list)");
    return ctor;
}
function num(v) {
    return typeof v === "number" && Number.isFinite(v) ? v : 0;
}
function addUsage(t, u) {
    t.input += num(u.input);
    t.output += num(u.output);
    t.cacheRead += num(u.cacheRead);
    t.cacheWrite += num(u.cacheWrite);
    t.cost += num(u.cost?.total);
}
function sessionUsage(c) {
    const totals = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 };
    let latest = null;
    for (const e of c.sessionManager.getEntries()) {
        let usage;
        if (e.type === "usage")
            usage = e.usage;
        else if ((e.type === "compaction" || e.type === "branch_summary") && e.usage)
            usage = e.usage;
        else if (e.type === "message") {
            const m = e.message;
            if (m.role === "assistant" && m.usage) {
                usage = m.usage;
                latest = m.usage;
            }
            else if (m.role === "toolResult" && m.usage)
                usage = m.usage;
        }
        if (usage)
            addUsage(totals, usage);
    }
    return { totals, latest };
}
function isThinkingLevel(level) {
    return THINKING_LEVELS.includes(level);
}
export class Requests {
    s;
    out;
    constructor(s, out) {
        this.s = s;
        this.out = out;
    }
    respond(id, ok, data, error) {
        if (id === undefined)
            return;
        this.out.send({
            type: "response",
            id,
            ok,
            ...(data !== undefined ? { data } : {}),
            ...(error !== undefined ? { error } : {}),
        });
    }
    abort(m) {
        try {
            this.s.ctx?.abort();
            this.respond(m.id, true);
        }
        catch (e) {
            this.respond(m.id, false, undefined, errorText(e));
        }
    }
    getState(m) {
        this.respond(m.id, true, this.s.stateFields());
    }
    async answer(m) {
        const c = this.s.ctx;
        const pi = this.s.pi;
        const fail = (e) => this.respond(m.id, false, undefined, errorText(e));
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
                    const ref = (x) => ({
                        provider: String(x.provider ?? ""),
                        id: String(x.id ?? ""),
                        name: String(x.name ?? x.id ?? ""),
                    });
                    const available = (c?.modelRegistry.getAvailable() ?? []).map(ref);
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
                    if (!model)
                        return fail(`no model ${m.provider}/${m.model_id}`);
                    const ok = await pi.setModel(model);
                    if (!ok)
                        return fail(`no credentials for ${m.provider}`);
                    this.respond(m.id, true, { model: modelRef(model) });
                    return;
                }
                case "get_thinking_levels": {
                    const levels = c?.model?.reasoning ? ["off", "minimal", "low", "medium", "high"] : ["off"];
                    this.respond(m.id, true, { levels, current: pi.getThinkingLevel() ?? null });
                    return;
                }
                case "set_thinking_level":
                    if (!isThinkingLevel(m.level))
                        return fail(`unknown thinking level "${m.level}"`);
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
                    if (!c)
                        return fail("pi has no session");
                    const list = await sessionManagerClass(c).list(c.cwd, c.sessionManager.getSessionDir());
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
                    if (!c)
                        return fail("pi has no session");
                    if (!c.isIdle())
                        return fail("pi is working: /abort first, or wait for its answer");
                    const args = m.type === "new_session" ? "new" : `switch ${m.path}`;
                    this.respond(m.id, true, { cancelled: false });
                    pi.sendUserMessage(`/${SESSION_COMMAND} ${args}`, { expandPromptTemplates: true });
                    return;
                }
                case "compact":
                    if (!c)
                        return fail("pi has no session");
                    c.compact({
                        onComplete: (result) => this.respond(m.id, true, { tokensBefore: result?.tokensBefore ?? null, summary: result?.summary ?? null }),
                        onError: (e) => fail(e),
                    });
                    return;
            }
        }
        catch (e) {
            fail(e);
        }
    }
}
