import { randomUUID } from "node:crypto";
import * as os from "node:os";
import * as path from "node:path";
import { isJson } from "./wire.js";
import { upload } from "./files.js";
export const TOOL_CALL_TIMEOUT_MS = 120_000;
export class ToolCalls {
    channel;
    pending = new Map();
    constructor(channel) {
        this.channel = channel;
    }
    call(tool, args, signal) {
        const why = this.channel.unavailable() ?? this.channel.refuses?.(tool);
        if (why)
            return Promise.reject(new Error(why));
        if (signal?.aborted)
            return Promise.reject(new Error(`${tool} was cancelled`));
        const id = randomUUID();
        return new Promise((resolve, reject) => {
            const cleanup = () => {
                clearTimeout(timer);
                signal?.removeEventListener("abort", onAbort);
                this.pending.delete(id);
            };
            const onAbort = () => {
                cleanup();
                reject(new Error(`${tool} was cancelled (the hub may still carry it out)`));
            };
            const timer = setTimeout(() => {
                cleanup();
                reject(new Error(`the pi-telegram hub did not answer ${tool} within ${TOOL_CALL_TIMEOUT_MS / 1000} s; it may or may not have been carried out`));
            }, TOOL_CALL_TIMEOUT_MS);
            timer.unref?.();
            signal?.addEventListener("abort", onAbort, { once: true });
            this.pending.set(id, {
                tool,
                resolve: (text) => {
                    cleanup();
                    resolve(text);
                },
                reject: (e) => {
                    cleanup();
                    reject(e);
                },
            });
            const turnId = this.channel.turnId?.();
            const sent = this.channel.send({
                type: "tool_call",
                id,
                tool,
                args,
                ...(turnId !== undefined ? { turn_id: turnId } : {}),
            });
            if (!sent)
                this.pending.get(id)?.reject(new Error(this.channel.unavailable() ?? "not connected to Telegram"));
        });
    }
    filesAsBytes() {
        return this.channel.filesAsBytes?.() ?? false;
    }
    async upload(paths, signal) {
        const why = this.channel.unavailable() ?? this.channel.refuses?.("telegram_attach");
        if (why)
            throw new Error(why);
        return upload(paths, (m) => this.channel.send(m), () => this.channel.drained?.() ?? Promise.resolve(), signal);
    }
    onResponse(m) {
        const p = this.pending.get(m.id);
        if (!p)
            return false;
        if (m.ok) {
            p.resolve(isJson(m.data) && typeof m.data.text === "string" ? m.data.text : "done");
        }
        else {
            p.reject(new Error(m.error ?? `${p.tool} failed (the hub gave no reason)`));
        }
        return true;
    }
    failAll(reason) {
        for (const p of [...this.pending.values()]) {
            p.reject(new Error(`${reason}: the hub did not answer ${p.tool}, which may or may not have been carried out`));
        }
    }
    get waiting() {
        return this.pending.size;
    }
}
const ATTACH_PARAMETERS = {
    type: "object",
    properties: {
        paths: {
            type: "array",
            items: { type: "string", minLength: 1 },
            minItems: 1,
            description: "Files to send, absolute or relative to the working directory.",
        },
        caption: { type: "string", description: "Optional text shown with the files (Markdown)." },
        chat_id: { type: "integer", description: "Only to send somewhere else than this pi's chat: the Telegram chat id." },
        thread_id: { type: "integer", description: "With chat_id: the topic (message thread) id in that chat." },
    },
    required: ["paths"],
};
const MESSAGE_PARAMETERS = {
    type: "object",
    properties: {
        text: { type: "string", minLength: 1, description: "The message, in Markdown." },
        chat_id: { type: "integer", description: "Only to send somewhere else than this pi's chat: the Telegram chat id." },
        thread_id: { type: "integer", description: "With chat_id: the topic (message thread) id in that chat." },
        thread: {
            type: "string",
            description: "Instead of chat_id/thread_id: the name of another pi's Telegram thread to post the message in.",
        },
    },
    required: ["text"],
};
export function absolutePath(p, cwd) {
    let s = p.trim();
    if (s.startsWith("@"))
        s = s.slice(1);
    if (s === "~")
        s = os.homedir();
    else if (s.startsWith("~/"))
        s = path.join(os.homedir(), s.slice(2));
    return path.resolve(cwd, s);
}
function given(args) {
    const out = {};
    for (const [k, v] of Object.entries(args))
        if (v !== undefined)
            out[k] = v;
    return out;
}
export function registerTools(pi, calls) {
    pi.registerTool({
        name: "telegram_attach",
        label: "Telegram Attach",
        description: "Send files from this machine to the person on Telegram (pi-telegram). During a run that answers a Telegram " +
            "message, the files go out with your answer to it; otherwise they are sent to this pi's Telegram chat now. " +
            "Paths are absolute or relative to the working directory, and each file must already exist. " +
            "chat_id and thread_id send elsewhere; leave them out to reach the person where they talk to this pi.",
        promptSnippet: "Send files from this machine to the person on Telegram",
        promptGuidelines: [
            "Use telegram_attach when the person on Telegram asks for a file (a report, a screenshot, a log, a build artifact) or when a file you made is the best answer; write the file first, then pass its path.",
            "After telegram_attach, say in your answer what you sent; do not paste the file's content as well.",
        ],
        parameters: ATTACH_PARAMETERS,
        executionMode: "sequential",
        async execute(_toolCallId, params, signal, _onUpdate, ctx) {
            const paths = Array.isArray(params.paths) ? params.paths : [];
            if (paths.length === 0)
                throw new Error("telegram_attach needs at least one path");
            if (paths.some((p) => typeof p !== "string" || p.trim() === ""))
                throw new Error("telegram_attach: a path is empty");
            const absolute = paths.map((p) => absolutePath(p, ctx.cwd));
            const c = calls();
            const files = c.filesAsBytes() ? { uploads: await c.upload(absolute, signal) } : { paths: absolute };
            const args = given({
                ...files,
                caption: params.caption,
                chat_id: params.chat_id,
                thread_id: params.thread_id,
            });
            const text = await c.call("telegram_attach", args, signal);
            return { content: [{ type: "text", text }], details: undefined };
        },
    });
    pi.registerTool({
        name: "telegram_message",
        label: "Telegram Message",
        description: "Send a Markdown message to the person on Telegram (pi-telegram) right now, before this run ends: a progress " +
            "note during long work, a question that cannot wait, or a message the person asked you to send. Your final " +
            "answer reaches Telegram anyway when the run answers a Telegram message, so never repeat it with this tool. " +
            "With `thread`, the message goes to another pi's Telegram thread (by its name) instead.",
        promptSnippet: "Send a Markdown message to the person on Telegram now (progress notes, or to another pi's thread)",
        promptGuidelines: [
            "Use telegram_message for short progress notes during long work that came from Telegram, or when the person asks you to message them (or another pi's thread) on Telegram.",
            "Do not use telegram_message for the final answer to a Telegram message: that answer is delivered to Telegram anyway.",
        ],
        parameters: MESSAGE_PARAMETERS,
        executionMode: "sequential",
        async execute(_toolCallId, params, signal) {
            if (typeof params.text !== "string" || params.text.trim() === "")
                throw new Error("telegram_message needs a text");
            const args = given({ text: params.text, chat_id: params.chat_id, thread_id: params.thread_id, thread: params.thread });
            const text = await calls().call("telegram_message", args, signal);
            return { content: [{ type: "text", text }], details: undefined };
        },
    });
}
