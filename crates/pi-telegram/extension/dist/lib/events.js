import { modelRef } from "./session.js";
export function reduceEvent(e) {
    switch (e.type) {
        case "agent_start":
            return { type: "agent_start" };
        case "agent_end":
            return undefined;
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
            const ame = { ...e.assistantMessageEvent };
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
            const c = e.compactionEntry ?? {};
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
export function assistantText(message) {
    if (!("content" in message))
        return "";
    const content = message.content;
    if (typeof content === "string")
        return content;
    if (!Array.isArray(content))
        return "";
    return content
        .filter((c) => !!c && c.type === "text" && typeof c.text === "string")
        .map((c) => c.text)
        .join("");
}
