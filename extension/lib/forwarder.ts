/**
 * pi's events to the hub: each forwarded event does the turn bookkeeping first (so it carries the
 * right turn id), is reduced to its RPC shape (`events.ts`) and sent as
 * `{"type":"event","turn_id":…,"event":…}`; some also send `state` or start a queued turn.
 */
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { type ForwardedEvent, reduceEvent } from "./events.ts";
import type { Outbox } from "./link.ts";
import { modelRef, type Session } from "./session.ts";
import type { TurnRunner } from "./turns.ts";
import type { Json } from "./wire.ts";

export class Forwarder {
	private readonly s: Session;
	private readonly turns: TurnRunner;
	private readonly out: Outbox;
	/** The extension-side agent_end has no `willRetry`: it is sent once the next event shows it. */
	private heldAgentEnd: { turnId: string | null } | undefined;

	constructor(s: Session, turns: TurnRunner, out: Outbox) {
		this.s = s;
		this.turns = turns;
		this.out = out;
	}

	/** Subscribes to every forwarded event (once per extension instance, in the factory). */
	register(pi: ExtensionAPI): void {
		const on = this.s.problems.guard("forwarding a pi event", (event: ForwardedEvent, c: ExtensionContext) => {
			if (!this.s.live) return;
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

	/** Sends a held agent_end, now that the next event tells whether a retry follows. */
	releaseAgentEnd(willRetry: boolean): void {
		const held = this.heldAgentEnd;
		if (!held) return;
		this.heldAgentEnd = undefined;
		this.forward({ type: "agent_end", willRetry }, held.turnId);
	}

	private forward(event: Json, turnId: string | null): void {
		this.out.send(
			{ type: "event", turn_id: turnId, event },
			{ buffer: true, fallback: () => ({ type: "event", turn_id: turnId, event: { type: event.type, truncated: true } }) },
		);
	}

	private onPiEvent(event: ForwardedEvent): void {
		// turn bookkeeping first, so the event carries the right turn id
		if (event.type === "input") {
			const turnId = this.turns.claimInput(event);
			if (turnId !== undefined) {
				const reduced = reduceEvent(event);
				if (reduced) this.forward(reduced, turnId);
				return;
			}
		}
		if (event.type === "agent_start") {
			this.releaseAgentEnd(true);
			this.turns.runStarted();
		} else if (event.type !== "agent_end") {
			this.releaseAgentEnd(false);
		}
		const turnId = this.turns.activeTurnId();
		if (event.type === "message_end") this.turns.messageEnded(event);
		if (event.type === "agent_end") {
			this.heldAgentEnd = { turnId };
			return;
		}
		const reduced = reduceEvent(event);
		if (event.type === "agent_settled") {
			// The turn's result before pi's idle: the hub sends the answer on turn_done, and
			// going through the idle first cost the answer the hub's handling of both. The next
			// queued turn starts on a timer, after this event is out.
			this.turns.settled(Boolean(event.aborted));
			if (reduced) this.forward(reduced, turnId);
			return;
		}
		if (reduced) this.forward(reduced, turnId);
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
				this.turns.scheduleDispatch(); // sends the state too
				return;
			default:
				return;
		}
	}
}
