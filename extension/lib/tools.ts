/**
 * The pi tools `telegram_attach` and `telegram_message`. The extension does not talk to Telegram:
 * each call goes to the hub as `{"type":"tool_call","id","tool","args"}` over this extension's hub
 * connection (instance or tools role), and the hub's `{"type":"response","id","ok","data":{"text"}}`
 * becomes the tool's result (`ok:false` -> a tool error with the hub's `error`). Attach paths
 * are made absolute here; the hub checks and reads the files.
 */
import { randomUUID } from "node:crypto";
import * as os from "node:os";
import * as path from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import type { Static } from "typebox";
import { type ClientMessage, type HubResponse, isJson, type Json, type ToolName } from "./wire.ts";
import { upload } from "./files.ts";

/** How long a tool call waits for the hub's answer. */
export const TOOL_CALL_TIMEOUT_MS = 120_000;

/** Where tool calls go: a hub connection, as it is now. */
export interface ToolChannel {
	/** Why a call cannot be sent now, or undefined when it can. */
	unavailable(): string | undefined;
	/** Sends now; false when it could not be written. */
	send(msg: ClientMessage): boolean;
	/** The hub turn the current run belongs to (instance role), else undefined (not sent). */
	turnId?(): string | null;
	/** Why this channel cannot carry out `tool` at all, or undefined when it can. */
	refuses?(tool: ToolName): string | undefined;
	/** The hub is on another machine: files go as bytes (lib/files.ts). */
	filesAsBytes?(): boolean;
	/** Resolves when the channel has room for more lines. */
	drained?(): Promise<void>;
}

interface Pending {
	tool: ToolName;
	resolve(text: string): void;
	reject(e: Error): void;
}

/** Tool calls waiting for the hub's answer, over one channel. */
export class ToolCalls {
	private readonly channel: ToolChannel;
	private pending = new Map<string, Pending>();

	constructor(channel: ToolChannel) {
		this.channel = channel;
	}

	/** Sends a call and resolves with the hub's text, or rejects with the reason it failed. */
	call(tool: ToolName, args: Json, signal: AbortSignal | undefined): Promise<string> {
		const why = this.channel.unavailable() ?? this.channel.refuses?.(tool);
		if (why) return Promise.reject(new Error(why));
		if (signal?.aborted) return Promise.reject(new Error(`${tool} was cancelled`));
		const id = randomUUID();
		return new Promise<string>((resolve, reject) => {
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
			if (!sent) this.pending.get(id)?.reject(new Error(this.channel.unavailable() ?? "not connected to Telegram"));
		});
	}

	/** Whether files must be uploaded (the hub is on another machine). */
	filesAsBytes(): boolean {
		return this.channel.filesAsBytes?.() ?? false;
	}

	/** Uploads `paths` (absolute) to the hub; their ids for `args.uploads`. */
	async upload(paths: string[], signal: AbortSignal | undefined): Promise<string[]> {
		const why = this.channel.unavailable() ?? this.channel.refuses?.("telegram_attach");
		if (why) throw new Error(why);
		return upload(
			paths,
			(m) => this.channel.send(m),
			() => this.channel.drained?.() ?? Promise.resolve(),
			signal,
		);
	}

	/** The hub's `response`: true when it answered one of our calls. */
	onResponse(m: HubResponse): boolean {
		const p = this.pending.get(m.id);
		if (!p) return false;
		if (m.ok) {
			p.resolve(isJson(m.data) && typeof m.data.text === "string" ? m.data.text : "done");
		} else {
			p.reject(new Error(m.error ?? `${p.tool} failed (the hub gave no reason)`));
		}
		return true;
	}

	/** The connection is gone: calls still waiting cannot be answered any more. */
	failAll(reason: string): void {
		for (const p of [...this.pending.values()]) {
			p.reject(new Error(`${reason}: the hub did not answer ${p.tool}, which may or may not have been carried out`));
		}
	}

	get waiting(): number {
		return this.pending.size;
	}
}

// ------------------------------------------------------------------------------ the tools

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
} as const;

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
} as const;

type AttachArgs = Static<typeof ATTACH_PARAMETERS>;
type MessageArgs = Static<typeof MESSAGE_PARAMETERS>;

/** A path the model gave, made absolute: `~` is the home folder, a leading `@` is dropped (as pi's tools do). */
export function absolutePath(p: string, cwd: string): string {
	let s = p.trim();
	if (s.startsWith("@")) s = s.slice(1);
	if (s === "~") s = os.homedir();
	else if (s.startsWith("~/")) s = path.join(os.homedir(), s.slice(2));
	return path.resolve(cwd, s);
}

/** The arguments the model gave, without the ones it left out. */
function given(args: Json): Json {
	const out: Json = {};
	for (const [k, v] of Object.entries(args)) if (v !== undefined) out[k] = v;
	return out;
}

/** Registers both tools; each call goes through `calls()` (the channel current at call time). */
export function registerTools(pi: ExtensionAPI, calls: () => ToolCalls): void {
	pi.registerTool({
		name: "telegram_attach",
		label: "Telegram Attach",
		description:
			"Send files from this machine to the person on Telegram (pi-telegram). During a run that answers a Telegram " +
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
		async execute(_toolCallId, params: AttachArgs, signal, _onUpdate, ctx) {
			const paths = Array.isArray(params.paths) ? params.paths : [];
			if (paths.length === 0) throw new Error("telegram_attach needs at least one path");
			if (paths.some((p) => typeof p !== "string" || p.trim() === "")) throw new Error("telegram_attach: a path is empty");
			const absolute = paths.map((p) => absolutePath(p, ctx.cwd));
			const c = calls();
			// A hub on another machine cannot read this disk: the files go to it first.
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
		description:
			"Send a Markdown message to the person on Telegram (pi-telegram) right now, before this run ends: a progress " +
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
		async execute(_toolCallId, params: MessageArgs, signal) {
			if (typeof params.text !== "string" || params.text.trim() === "") throw new Error("telegram_message needs a text");
			const args = given({ text: params.text, chat_id: params.chat_id, thread_id: params.thread_id, thread: params.thread });
			const text = await calls().call("telegram_message", args, signal);
			return { content: [{ type: "text", text }], details: undefined };
		},
	});
}
