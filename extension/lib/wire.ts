/**
 * The hub wire protocol (docs/wire-protocol.md): the framing and every message of the `instance`
 * and `tools` roles, as discriminated unions on `type`.
 *
 * Framing: UTF-8 JSON objects, one per line, `\n`-terminated, an optional `\r` before it ignored,
 * at most 1 MiB a line. Split on `\n` only (never U+2028/2029, so no `readline`).
 *
 * What the hub sends is untrusted JSON: `decodeHubMessage` turns a line into a typed message (or
 * `undefined` for types this extension does not know, which are ignored for forward
 * compatibility), coercing fields the way the extension always has.
 */
import { StringDecoder } from "node:string_decoder";

export const PROTOCOL = 1;
/** Longest line the extension writes, terminator included (the hub reads at most this). */
export const MAX_LINE_BYTES = 1024 * 1024;
/**
 * Longest line the extension reads from the hub: a prompt carries the person's photos as
 * base64 (the hub keeps them under 32 MB, about 43 MB encoded).
 */
export const MAX_HUB_LINE_BYTES = 64 * 1024 * 1024;

export type Json = Record<string, unknown>;

/** Whether `v` is a JSON object (not null, not an array). */
export function isJson(v: unknown): v is Json {
	return typeof v === "object" && v !== null && !Array.isArray(v);
}

// ------------------------------------------------------------------------------ shared shapes

export type Level = "info" | "warning" | "error";

export interface ModelRef {
	provider: string;
	id: string;
}

/** An image of a `prompt` (pi's `ImageContent`). */
export interface WireImage {
	type: "image";
	/** Base64, without a `data:` prefix. */
	data: string;
	mimeType: string;
}

/** The result of a hub turn (`turn_done`, and the hello's `completed_turns`). */
export interface TurnDone {
	turn_id: string;
	text: string;
	aborted: boolean;
	error: string | null;
	/** pi handled the prompt itself, without a run of the model (an extension's command ran). */
	handled?: boolean;
}

/** The hello's state fields; also the `state` message and `get_state`'s answer. */
export interface StateFields {
	pid: number;
	cwd: string;
	mode: string | null;
	reason: string;
	session_id: string | null;
	session_file: string | null;
	session_name: string | null;
	model: ModelRef | null;
	thinking_level: string | null;
	idle: boolean;
	pending: boolean;
}

/** The tools an extension serves over the hub connection (`tool_call`). */
export type ToolName = "telegram_attach" | "telegram_message";

// ------------------------------------------------------------------------------ client -> hub

/** The fields of a hello besides `type`, `protocol` and `secret`, per role. */
export interface InstanceHelloFields extends StateFields {
	role: "instance";
	/** Turn ids this pi process received, most recent last, at most 200. */
	received_turns: string[];
	/** Finished turns the hub has not acknowledged (`done_ack`) yet. */
	completed_turns: TurnDone[];
	/** The hub state (its welcome's `store_id`) those turns are of; absent before a first welcome. */
	store_id?: string;
}

export interface ToolsHelloFields {
	role: "tools";
	/** `PI_TELEGRAM_CHILD_TOKEN`: which hub-spawned child this is. */
	token: string;
	pid: number;
	cwd: string;
}

export type HelloFields = InstanceHelloFields | ToolsHelloFields;

/**
 * `version`: this extension's release (its package.json), which the hub logs. `machine`: the
 * machine this pi runs on (`machine.ts`), so that a hub reached by a forwarded socket knows.
 */
export type Hello = { type: "hello"; protocol: number; secret: string; version: string; machine: string } & HelloFields;

export interface Ack {
	type: "ack";
	turn_id: string;
	/**
	 * `duplicate`: received before and its result is still to come (or is sent again after this
	 * ack); `finished`: received before, answered, and that answer acknowledged by the hub, so no
	 * result comes again.
	 */
	disposition: "started" | "queued" | "duplicate" | "finished";
}

export interface EventMessage {
	type: "event";
	/** The hub turn the run belongs to; null for runs typed in pi. */
	turn_id: string | null;
	/** An RPC-shaped pi event (`events.ts`). */
	event: Json;
}

export interface TurnDoneMessage extends TurnDone {
	type: "turn_done";
}

export interface StateMessage extends StateFields {
	type: "state";
}

export interface Response {
	type: "response";
	id: string;
	ok: boolean;
	data?: unknown;
	error?: string;
}

/** Why the extension leaves: `/telegram-disconnect`, pi quitting (its process ends), or its
 * session being replaced (`/new`, `/resume`, `/fork`, `/reload`: another connects at once).
 * A hub that does not know "quit" takes it as "shutdown". */
export type ByeReason = "disconnect" | "quit" | "shutdown";

/** pi started (`waiting: true`) or stopped waiting for the person at its terminal. */
export interface UiPrompt {
	type: "ui_prompt";
	waiting: boolean;
	kind?: string;
	title?: string;
}

export interface Bye {
	type: "bye";
	reason: ByeReason;
}

export interface ToolCall {
	type: "tool_call";
	/** Unique per connection; the hub answers with a `response` of the same id. */
	id: string;
	tool: ToolName;
	/** The tool's arguments as the model gave them, paths made absolute. */
	args: Json;
	/** Instance role: the hub turn of the run that called the tool, null for a run typed in pi. */
	turn_id?: string | null;
}

/**
 * A piece of a file sent as bytes (the welcome said `files: "bytes"`: pi is on another machine
 * than the hub). Pieces of a file share `id`, come in order (`offset` is where `data` starts)
 * and the last says `done`. Client to hub: an `upload` for `telegram_attach`, which then names
 * its ids in `args.uploads`; hub to client: a `file` the person sent, before the prompt that
 * names it by `path` (on the hub's disk).
 */
export interface FilePart {
	id: string;
	name: string;
	size: number;
	offset: number;
	/** The bytes, base64; at most FILE_PART_BYTES of them. */
	data: string;
	done: boolean;
	path?: string;
}

export interface Upload extends FilePart {
	type: "upload";
}

/** The most bytes one piece carries (the hub's `FILE_PART_BYTES`). */
export const FILE_PART_BYTES = 256 * 1024;

/** A protocol error: the sender closes the connection after it. */
export interface ProtocolError {
	type: "error";
	message: string;
}

/** Everything this extension sends to the hub. */
export type ClientMessage =
	| Hello
	| Ack
	| EventMessage
	| TurnDoneMessage
	| StateMessage
	| Response
	| Bye
	| UiPrompt
	| ToolCall
	| Upload
	| ProtocolError;

// ------------------------------------------------------------------------------ hub -> client

export interface Welcome {
	type: "welcome";
	protocol: unknown;
	hub_pid: number | null;
	instance_id: string | null;
	/** The hub's release (`0.2.0`); null from a hub that does not say (before 0.2). */
	hub_version: string | null;
	/** The hub's state database; turn ids are its own. Null from an older hub. */
	store_id: string | null;
	/** How files cross the connection: "bytes" when pi is on another machine; "paths" else. */
	files: "paths" | "bytes";
}

export interface Refused {
	type: "refused";
	code: string;
	message: string;
}

/** `id` is set when the hub wants a `response`. */
interface Request {
	id: string | undefined;
}

export interface Prompt {
	type: "prompt";
	turn_id: string;
	/** The person's words (and what came with them). */
	text: string;
	/**
	 * Lines the hub puts before `text` for the model (where it comes from, the time, how long
	 * it waited), ending in a blank line; empty for none (a command, an older hub).
	 */
	context: string;
	/** Empty when the prompt has none. */
	images: WireImage[];
	/** Entries of `images` that were not `{type:"image",data,mimeType}` (left out). */
	droppedImages: number;
}

export interface Abort extends Request {
	type: "abort";
}

export interface GetState extends Request {
	type: "get_state";
}

/** The hub's questions and orders about pi itself (menus, /model, /thinking, /compact). */
export type PiRequest =
	| ({ type: "get_stats" } & Request)
	| ({ type: "get_models" } & Request)
	| ({ type: "set_model"; provider: string; model_id: string } & Request)
	| ({ type: "get_thinking_levels" } & Request)
	| ({ type: "set_thinking_level"; level: string } & Request)
	| ({ type: "get_commands" } & Request)
	| ({ type: "compact" } & Request)
	| ({ type: "new_session" } & Request)
	| ({ type: "get_sessions" } & Request)
	| ({ type: "switch_session"; path: string } & Request);

export interface Notify extends Request {
	type: "notify";
	text: string;
	level: Level;
}

export interface SetStatus extends Request {
	type: "set_status";
	/** undefined clears it. */
	text: string | undefined;
}

/** Words for the run pi is doing now (the person's `/steer`). */
export interface Steer extends Request {
	type: "steer";
	text: string;
}

export interface DoneAck extends Request {
	type: "done_ack";
	turn_id: string | undefined;
}

export interface HubError {
	type: "error";
	message: string;
}

/** The hub's answer to a `tool_call`. */
export interface HubResponse {
	type: "response";
	id: string;
	ok: boolean;
	data: unknown;
	error: string | undefined;
}

/** Everything the hub sends after the welcome that this extension knows. */
/** A piece of a file the person sent, for a pi on another machine. */
export interface HubFile extends FilePart {
	type: "file";
	path: string;
}

export type HubMessage =
	| Prompt
	| HubFile
	| Abort
	| GetState
	| PiRequest
	| Notify
	| SetStatus
	| Steer
	| DoneAck
	| HubError
	| HubResponse;

/** What the hub answers to a hello. */
export type Handshake = Welcome | Refused;

// ------------------------------------------------------------------------------ decoding

const str = (v: unknown, dflt = ""): string => (typeof v === "string" ? v : v === undefined || v === null ? dflt : String(v));
const optStr = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
/** A request id: any non-null value, as a string. */
const requestId = (v: unknown): string | undefined => (v === undefined || v === null ? undefined : String(v));

function isImage(v: unknown): v is WireImage {
	return isJson(v) && v.type === "image" && typeof v.data === "string" && typeof v.mimeType === "string";
}

/** The images of a prompt; entries that are not `{type:"image",data,mimeType}` are dropped. */
export function decodeImages(v: unknown): { images: WireImage[]; dropped: number } {
	if (!Array.isArray(v)) return { images: [], dropped: 0 };
	const images = v.filter(isImage).map((i) => ({ type: "image" as const, data: i.data, mimeType: i.mimeType }));
	return { images, dropped: v.length - images.length };
}

/** The hub's answer to a hello, or undefined for anything else (ignored before the welcome). */
export function decodeHandshake(m: Json): Handshake | undefined {
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
	if (m.type === "refused") return { type: "refused", code: str(m.code), message: str(m.message, str(m.code)) };
	return undefined;
}

/**
 * A message from the hub, typed; undefined for unknown types and for messages that cannot be
 * acted on (a prompt without a turn id, a response without an id).
 */
export function decodeHubMessage(m: Json): HubMessage | undefined {
	const id = requestId(m.id);
	switch (m.type) {
		case "prompt": {
			if (typeof m.turn_id !== "string" || m.turn_id === "") return undefined;
			const { images, dropped } = decodeImages(m.images);
			return { type: "prompt", turn_id: m.turn_id, text: str(m.text), context: str(m.context), images, droppedImages: dropped };
		}
		case "file": {
			const ok =
				typeof m.id === "string" &&
				m.id !== "" &&
				typeof m.name === "string" &&
				typeof m.path === "string" &&
				typeof m.size === "number" &&
				typeof m.offset === "number";
			if (!ok) return undefined;
			return {
				type: "file",
				id: m.id as string,
				name: m.name as string,
				path: m.path as string,
				size: m.size as number,
				offset: m.offset as number,
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
			if (typeof m.text !== "string" || m.text === "") return undefined;
			return { type: "steer", id, text: m.text };
		case "done_ack":
			return { type: "done_ack", id, turn_id: optStr(m.turn_id) };
		case "error":
			return { type: "error", message: str(m.message, "error") };
		case "response":
			if (id === undefined) return undefined;
			return { type: "response", id, ok: m.ok === true, data: m.data, error: optStr(m.error) };
		default:
			return undefined;
	}
}

// ------------------------------------------------------------------------------ framing

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
			if (Buffer.byteLength(line) + 1 > MAX_HUB_LINE_BYTES) return { messages, error: "a line is longer than 64 MiB" };
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
		if (this.buf.length >= MAX_HUB_LINE_BYTES || Buffer.byteLength(this.buf) >= MAX_HUB_LINE_BYTES) {
			return { messages, error: "a line is longer than 64 MiB" };
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
 * One wire line for `msg`, `\n` included, never longer than 1 MiB: long strings are cut (images
 * in tool results, huge outputs) until it fits; `fallback` is used when nothing else fits.
 */
export function encodeLine(msg: ClientMessage, fallback?: () => ClientMessage): string {
	let line = `${safeStringify(msg)}\n`;
	if (Buffer.byteLength(line) <= MAX_LINE_BYTES) return line;
	for (const max of [200_000, 50_000, 10_000, 2_000, 500, 100]) {
		line = `${safeStringify(truncateStrings(msg, max) as Json)}\n`;
		if (Buffer.byteLength(line) <= MAX_LINE_BYTES) return line;
	}
	return `${safeStringify(fallback ? fallback() : { type: msg.type, truncated: true })}\n`;
}

function safeStringify(obj: object): string {
	try {
		return wellFormed(JSON.stringify(obj));
	} catch {
		// cycles or bigints: pi's events are plain JSON (RPC mode prints them), so this is a guard only
		return JSON.stringify({ type: String((obj as Json).type ?? "unknown"), unserializable: true });
	}
}

/**
 * `json` (from `JSON.stringify`) with every lone UTF-16 surrogate as U+FFFD. A JavaScript string
 * may hold half a character (a provider streaming an emoji's halves in two chunks, a string cut
 * at a length), which `JSON.stringify` writes as a `\udxxx` escape: not Unicode, and refused by
 * strict JSON readers (older hubs closed the connection over it). It never escapes a whole pair
 * (the character is written as itself), so every such escape not itself escaped (`\\ud800` is
 * text) is a lone half.
 */
export function wellFormed(json: string): string {
	if (!json.includes("\\ud")) return json;
	return json.replace(/\\\\|\\ud[89a-f][0-9a-f]{2}/g, (m) => (m === "\\\\" ? m : "\\ufffd"));
}
