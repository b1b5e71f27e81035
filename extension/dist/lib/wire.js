import { StringDecoder } from "node:string_decoder";
export const PROTOCOL = 1;
export const MAX_LINE_BYTES = 1024 * 1024;
export const MAX_HUB_LINE_BYTES = 64 * 1024 * 1024;
export function isJson(v) {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}
export const FILE_PART_BYTES = 256 * 1024;
const str = (v, dflt = "") => (typeof v === "string" ? v : v === undefined || v === null ? dflt : String(v));
const optStr = (v) => (typeof v === "string" ? v : undefined);
const requestId = (v) => (v === undefined || v === null ? undefined : String(v));
function isImage(v) {
    return isJson(v) && v.type === "image" && typeof v.data === "string" && typeof v.mimeType === "string";
}
export function decodeImages(v) {
    if (!Array.isArray(v))
        return { images: [], dropped: 0 };
    const images = v.filter(isImage).map((i) => ({ type: "image", data: i.data, mimeType: i.mimeType }));
    return { images, dropped: v.length - images.length };
}
export function decodeHandshake(m) {
    if (m.type === "welcome") {
        return {
            type: "welcome",
            protocol: m.protocol,
            hub_pid: typeof m.hub_pid === "number" ? m.hub_pid : null,
            instance_id: typeof m.instance_id === "string" ? m.instance_id : null,
            hub_version: typeof m.hub_version === "string" ? m.hub_version : null,
            store_id: typeof m.store_id === "string" && m.store_id !== "" ? m.store_id : null,
            files: m.files === "bytes" ? "bytes" : "paths",
        };
    }
    if (m.type === "refused")
        return { type: "refused", code: str(m.code), message: str(m.message, str(m.code)) };
    return undefined;
}
export function decodeHubMessage(m) {
    const id = requestId(m.id);
    switch (m.type) {
        case "prompt": {
            if (typeof m.turn_id !== "string" || m.turn_id === "")
                return undefined;
            const { images, dropped } = decodeImages(m.images);
            return { type: "prompt", turn_id: m.turn_id, text: str(m.text), context: str(m.context), images, droppedImages: dropped };
        }
        case "file": {
            const ok = typeof m.id === "string" &&
                m.id !== "" &&
                typeof m.name === "string" &&
                typeof m.path === "string" &&
                typeof m.size === "number" &&
                typeof m.offset === "number";
            if (!ok)
                return undefined;
            return {
                type: "file",
                id: m.id,
                name: m.name,
                path: m.path,
                size: m.size,
                offset: m.offset,
                data: str(m.data),
                done: m.done === true,
            };
        }
        case "abort":
        case "get_state":
        case "get_stats":
        case "get_models":
        case "get_thinking_levels":
        case "get_commands":
        case "compact":
        case "new_session":
        case "get_sessions":
            return { type: m.type, id };
        case "switch_session":
            return { type: "switch_session", id, path: str(m.path) };
        case "set_model":
            return { type: "set_model", id, provider: str(m.provider), model_id: str(m.model_id) };
        case "set_thinking_level":
            return { type: "set_thinking_level", id, level: str(m.level, "off") };
        case "notify":
            return {
                type: "notify",
                id,
                text: str(m.text),
                level: m.level === "warning" || m.level === "error" ? m.level : "info",
            };
        case "set_status":
            return { type: "set_status", id, text: optStr(m.text) };
        case "steer":
            if (typeof m.text !== "string" || m.text === "")
                return undefined;
            return { type: "steer", id, text: m.text };
        case "done_ack":
            return { type: "done_ack", id, turn_id: optStr(m.turn_id) };
        case "error":
            return { type: "error", message: str(m.message, "error") };
        case "response":
            if (id === undefined)
                return undefined;
            return { type: "response", id, ok: m.ok === true, data: m.data, error: optStr(m.error) };
        default:
            return undefined;
    }
}
export class LineReader {
    decoder = new StringDecoder("utf8");
    buf = "";
    push(chunk) {
        this.buf += typeof chunk === "string" ? chunk : this.decoder.write(chunk);
        const messages = [];
        let nl = this.buf.indexOf("\n");
        while (nl >= 0) {
            let line = this.buf.slice(0, nl);
            this.buf = this.buf.slice(nl + 1);
            if (line.endsWith("\r"))
                line = line.slice(0, -1);
            if (Buffer.byteLength(line) + 1 > MAX_HUB_LINE_BYTES)
                return { messages, error: "a line is longer than 64 MiB" };
            if (line.trim().length > 0) {
                let parsed;
                try {
                    parsed = JSON.parse(line);
                }
                catch {
                    return { messages, error: "a line is not JSON" };
                }
                if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
                    return { messages, error: "a line is not a JSON object" };
                }
                messages.push(parsed);
            }
            nl = this.buf.indexOf("\n");
        }
        if (this.buf.length >= MAX_HUB_LINE_BYTES || Buffer.byteLength(this.buf) >= MAX_HUB_LINE_BYTES) {
            return { messages, error: "a line is longer than 64 MiB" };
        }
        return { messages };
    }
}
function truncateStrings(value, max) {
    if (typeof value === "string") {
        return value.length > max ? `${value.slice(0, max)}…[${value.length - max} characters cut]` : value;
    }
    if (Array.isArray(value))
        return value.map((v) => truncateStrings(v, max));
    if (value && typeof value === "object") {
        const out = {};
        for (const [k, v] of Object.entries(value))
            out[k] = truncateStrings(v, max);
        return out;
    }
    return value;
}
export function encodeLine(msg, fallback) {
    let line = `${safeStringify(msg)}\n`;
    if (Buffer.byteLength(line) <= MAX_LINE_BYTES)
        return line;
    for (const max of [200_000, 50_000, 10_000, 2_000, 500, 100]) {
        line = `${safeStringify(truncateStrings(msg, max))}\n`;
        if (Buffer.byteLength(line) <= MAX_LINE_BYTES)
            return line;
    }
    return `${safeStringify(fallback ? fallback() : { type: msg.type, truncated: true })}\n`;
}
function safeStringify(obj) {
    try {
        return wellFormed(JSON.stringify(obj));
    }
    catch {
        return JSON.stringify({ type: String(obj.type ?? "unknown"), unserializable: true });
    }
}
export function wellFormed(json) {
    if (!json.includes("\\ud"))
        return json;
    return json.replace(/\\\\|\\ud[89a-f][0-9a-f]{2}/g, (m) => (m === "\\\\" ? m : "\\ufffd"));
}
