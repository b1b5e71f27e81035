/**
 * pi's extension events reduced to the shapes `pi --mode rpc` prints (docs/wire-protocol.md,
 * "Instance → hub"): the extension-side events also carry cumulative snapshots and the rebuilt
 * context, which must never go over the wire on every update.
 */
import type {
	AgentEndEvent,
	AgentSettledEvent,
	AgentStartEvent,
	InputEvent,
	MessageEndEvent,
	MessageStartEvent,
	MessageUpdateEvent,
	ModelSelectEvent,
	SessionBeforeCompactEvent,
	SessionCompactEvent,
	SessionCompactFailedEvent,
	SessionInfoChangedEvent,
	ThinkingLevelSelectEvent,
	ToolExecutionEndEvent,
	ToolExecutionStartEvent,
	ToolExecutionUpdateEvent,
	TurnEndEvent,
	TurnStartEvent,
} from "@earendil-works/pi-coding-agent";
import { modelRef } from "./session.ts";
import type { Json } from "./wire.ts";

/** The events forwarded to the hub (compaction becomes compaction_start/end). */
export type ForwardedEvent =
	| AgentStartEvent
	| AgentEndEvent
	| AgentSettledEvent
	| TurnStartEvent
	| TurnEndEvent
	| MessageStartEvent
	| MessageUpdateEvent
	| MessageEndEvent
	| ToolExecutionStartEvent
	| ToolExecutionUpdateEvent
	| ToolExecutionEndEvent
	| SessionBeforeCompactEvent
	| SessionCompactEvent
	| SessionCompactFailedEvent
	| SessionInfoChangedEvent
	| ModelSelectEvent
	| ThinkingLevelSelectEvent
	| InputEvent;

/** The RPC shape of an event, or undefined for events that are not forwarded as they come. */
export function reduceEvent(e: ForwardedEvent): Json | undefined {
	switch (e.type) {
		case "agent_start":
			return { type: "agent_start" };
		case "agent_end":
			return undefined; // sent by the forwarder once `willRetry` is known
		case "agent_settled":
			return { type: "agent_settled", aborted: Boolean(e.aborted) };
		case "turn_start":
			return { type: "turn_start", turnIndex: e.turnIndex, timestamp: e.timestamp };
		case "turn_end":
			return {
				type: "turn_end",
				turnIndex: e.turnIndex,
				outcome: e.outcome,
				message: e.message,
				toolResults: e.toolResults ?? [],
			};
		case "message_start":
		case "message_end":
			return { type: e.type, message: e.message };
		case "message_update": {
			const ame: Json = { ...e.assistantMessageEvent };
			delete ame.partial;
			return { type: "message_update", assistantMessageEvent: ame };
		}
		case "tool_execution_start":
		case "tool_execution_update":
		case "tool_execution_end":
			return { ...e };
		case "session_before_compact":
			return { type: "compaction_start", reason: e.reason };
		case "session_compact": {
			// pi's type says compactionEntry is always there; the extension never trusted that
			const c: Partial<SessionCompactEvent["compactionEntry"]> = e.compactionEntry ?? {};
			return {
				type: "compaction_end",
				reason: e.reason,
				result: {
					summary: c.summary,
					firstKeptEntryId: c.firstKeptEntryId ?? null,
					tokensBefore: c.tokensBefore,
					details: c.details,
				},
				aborted: false,
				willRetry: Boolean(e.willRetry),
			};
		}
		case "session_compact_failed":
			return {
				type: "compaction_end",
				reason: e.reason,
				aborted: Boolean(e.aborted),
				willRetry: Boolean(e.willRetry),
				...(e.errorMessage !== undefined ? { errorMessage: e.errorMessage } : {}),
			};
		case "session_info_changed":
			return { type: "session_info_changed", name: e.name ?? null };
		case "model_select":
			return {
				type: "model_select",
				model: modelRef(e.model),
				previousModel: modelRef(e.previousModel),
				source: e.source,
			};
		case "thinking_level_select":
			return { type: "thinking_level_select", level: e.level, previousLevel: e.previousLevel };
		case "input": {
			const images = Array.isArray(e.images) ? e.images.length : 0;
			return {
				type: "input",
				text: e.text,
				source: e.source,
				...(e.streamingBehavior ? { streamingBehavior: e.streamingBehavior } : {}),
				...(images ? { imageCount: images } : {}),
			};
		}
		default:
			return undefined;
	}
}

/** The text of an assistant message: its text parts joined (as pi's get_last_assistant_text). */
export function assistantText(message: MessageEndEvent["message"]): string {
	if (!("content" in message)) return "";
	const content: unknown = message.content;
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.filter((c): c is { type: "text"; text: string } => !!c && c.type === "text" && typeof c.text === "string")
		.map((c) => c.text)
		.join("");
}
