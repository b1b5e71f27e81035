/**
 * Framing of the hub wire protocol (docs/wire-protocol.md): UTF-8 JSON objects, one per line,
 * `\n`-terminated, an optional `\r` before it ignored, at most 1 MiB a line. Split on `\n` only
 * (never U+2028/2029, so no `readline`).
 */
import { StringDecoder } from "node:string_decoder";

export const PROTOCOL = 1;
/** Longest line, terminator included. */
export const MAX_LINE_BYTES = 1024 * 1024;

export type Json = Record<string, unknown>;

/** Splits a byte stream into JSON-object lines. */
export class LineReader {
	private decoder = new StringDecoder("utf8");
	private buf = "";

	/**
	 * Feeds a chunk; returns the complete messages, or a protocol error (then the caller closes
	 * the connection and drops the reader).
	 */
	push(chunk: Buffer | string): { messages: Json[]; error?: string } {
		this.buf += typeof chunk === "string" ? chunk : this.decoder.write(chunk);
		const messages: Json[] = [];
		let nl = this.buf.indexOf("\n");
		while (nl >= 0) {
			let line = this.buf.slice(0, nl);
			this.buf = this.buf.slice(nl + 1);
			if (line.endsWith("\r")) line = line.slice(0, -1);
			if (Buffer.byteLength(line) + 1 > MAX_LINE_BYTES) return { messages, error: "a line is longer than 1 MiB" };
			if (line.trim().length > 0) {
				let parsed: unknown;
				try {
					parsed = JSON.parse(line);
				} catch {
					return { messages, error: "a line is not JSON" };
				}
				if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
					return { messages, error: "a line is not a JSON object" };
				}
				messages.push(parsed as Json);
			}
			nl = this.buf.indexOf("\n");
		}
		// No terminator yet: a partial line may not grow past the limit (UTF-16 units <= bytes).
		if (this.buf.length >= MAX_LINE_BYTES || Buffer.byteLength(this.buf) >= MAX_LINE_BYTES) {
			return { messages, error: "a line is longer than 1 MiB" };
		}
		return { messages };
	}
}

function truncateStrings(value: unknown, max: number): unknown {
	if (typeof value === "string") {
		return value.length > max ? `${value.slice(0, max)}…[${value.length - max} characters cut]` : value;
	}
	if (Array.isArray(value)) return value.map((v) => truncateStrings(v, max));
	if (value && typeof value === "object") {
		const out: Json = {};
		for (const [k, v] of Object.entries(value as Json)) out[k] = truncateStrings(v, max);
		return out;
	}
	return value;
}

/**
 * One wire line for `obj`, `\n` included, never longer than 1 MiB: long strings are cut (images
 * in tool results, huge outputs) until it fits; `fallback` is used when nothing else fits.
 */
export function encodeLine(obj: Json, fallback?: () => Json): string {
	let line = `${safeStringify(obj)}\n`;
	if (Buffer.byteLength(line) <= MAX_LINE_BYTES) return line;
	for (const max of [200_000, 50_000, 10_000, 2_000, 500, 100]) {
		line = `${safeStringify(truncateStrings(obj, max) as Json)}\n`;
		if (Buffer.byteLength(line) <= MAX_LINE_BYTES) return line;
	}
	return `${safeStringify(fallback ? fallback() : { type: String(obj.type ?? "unknown"), truncated: true })}\n`;
}

function safeStringify(obj: Json): string {
	try {
		return JSON.stringify(obj);
	} catch {
		// cycles or bigints: pi's events are plain JSON (RPC mode prints them), so this is a guard only
		return JSON.stringify({ type: String(obj.type ?? "unknown"), unserializable: true });
	}
}
