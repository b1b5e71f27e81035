import { reduceEvent } from "./events.js";
import { modelRef } from "./session.js";
export class Forwarder {
    s;
    turns;
    out;
    heldAgentEnd;
    constructor(s, turns, out) {
        this.s = s;
        this.turns = turns;
        this.out = out;
    }
    register(pi) {
        const on = this.s.problems.guard("forwarding a pi event", (event, c) => {
            if (!this.s.live)
                return;
            this.s.ctx = c;
            this.onPiEvent(event);
        });
        pi.on("agent_start", on);
        pi.on("agent_end", on);
        pi.on("agent_settled", on);
        pi.on("turn_start", on);
        pi.on("turn_end", on);
        pi.on("message_start", on);
        pi.on("message_update", on);
        pi.on("message_end", on);
        pi.on("tool_execution_start", on);
        pi.on("tool_execution_update", on);
        pi.on("tool_execution_end", on);
        pi.on("session_before_compact", on);
        pi.on("session_compact", on);
        pi.on("session_compact_failed", on);
        pi.on("session_info_changed", on);
        pi.on("model_select", on);
        pi.on("thinking_level_select", on);
        pi.on("input", on);
    }
    releaseAgentEnd(willRetry) {
        const held = this.heldAgentEnd;
        if (!held)
            return;
        this.heldAgentEnd = undefined;
        this.forward({ type: "agent_end", willRetry }, held.turnId);
    }
    forward(event, turnId) {
        this.out.send({ type: "event", turn_id: turnId, event }, { buffer: true, fallback: () => ({ type: "event", turn_id: turnId, event: { type: event.type, truncated: true } }) });
    }
    onPiEvent(event) {
        if (event.type === "input") {
            const turnId = this.turns.claimInput(event);
            if (turnId !== undefined) {
                const reduced = reduceEvent(event);
                if (reduced)
                    this.forward(reduced, turnId);
                return;
            }
        }
        if (event.type === "agent_start") {
            this.releaseAgentEnd(true);
            this.turns.runStarted();
        }
        else if (event.type !== "agent_end") {
            this.releaseAgentEnd(false);
        }
        const turnId = this.turns.activeTurnId();
        if (event.type === "message_end")
            this.turns.messageEnded(event);
        if (event.type === "agent_end") {
            this.heldAgentEnd = { turnId };
            return;
        }
        const reduced = reduceEvent(event);
        if (event.type === "agent_settled") {
            this.turns.settled(Boolean(event.aborted));
            if (reduced)
                this.forward(reduced, turnId);
            return;
        }
        if (reduced)
            this.forward(reduced, turnId);
        switch (event.type) {
            case "agent_start":
                this.out.sendState({ idle: false });
                return;
            case "model_select":
                this.out.sendState({ model: modelRef(event.model) });
                return;
            case "thinking_level_select":
                this.out.sendState({ thinking_level: event.level ?? null });
                return;
            case "session_info_changed":
                this.out.sendState({ session_name: event.name ?? null });
                return;
            case "session_compact":
            case "session_compact_failed":
                this.turns.scheduleDispatch();
                return;
            default:
                return;
        }
    }
}
