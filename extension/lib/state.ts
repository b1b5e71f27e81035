/**
 * Process-global state. `/reload`, `/new`, `/resume` and `/fork` replace the extension instance
 * (the module may even be loaded again), but the pi process and its agent stay; what must survive
 * lives on `globalThis.__piTelegram`: the turn bookkeeping, the last automatic hub start,
 * which copy of the extension runs in this process (`claimProcess`), and which of our tools it
 * hid from the model. Nothing else in the
 * extension outlives an instance.
 */
import type { TurnDone, WireImage } from "./wire.ts";

export type { TurnDone };

export interface HubTurn {
	turn_id: string;
	text: string;
	/** The prompt's images; absent or empty for a text-only prompt. */
	images?: WireImage[];
}

/** A hub turn whose run is in progress. */
export interface ActiveTurn extends HubTurn {
	/** Text of the last assistant message that counts as the answer. */
	lastText: string;
	/** `errorMessage` of the last assistant message when it stopped with an error. */
	error: string | null;
}

export interface GlobalState {
	version: 1;
	/** Turn ids received (and acknowledged) by this process, most recent last, at most 200. */
	received: string[];
	/** Finished turns the hub has not acknowledged (`done_ack`) yet. Never dropped. */
	completed: TurnDone[];
	/** Hub turns received while pi was busy, started one by one at `agent_settled`. */
	queue: HubTurn[];
	/** A hub turn handed to `pi.sendUserMessage` whose run has not started yet. */
	starting: (HubTurn & { inputSeen: boolean; at: number }) | undefined;
	/** The hub turn the current run belongs to. */
	active: ActiveTurn | undefined;
	/** When this process last started a hub (ms since epoch): at most one automatic start per 30 s. */
	lastAutoStart: number;
	/**
	 * The copy of the extension that runs in this process (see `claimProcess`). Optional: a state
	 * object made by an older version of this module (before a /reload) does not have it.
	 */
	owner?: { isStale(): boolean };
	/**
	 * Our tools this process took out of pi's active ones while the hub was unreachable, to be
	 * put back when it is reachable again (`tool-gate.ts`). Optional, as `owner`.
	 */
	hiddenTools?: string[];
	/**
	 * The hub state (`store_id`) that `received` and `completed` belong to. Optional, as `owner`;
	 * unset until a hub that says it welcomes this process.
	 */
	storeId?: string;
}

export const RECEIVED_CAP = 200;

const KEY = "__piTelegram";

export function globalState(): GlobalState {
	const g = globalThis as unknown as Record<string, GlobalState | undefined>;
	let s = g[KEY];
	if (!s || s.version !== 1) {
		s = {
			version: 1,
			received: [],
			completed: [],
			queue: [],
			starting: undefined,
			active: undefined,
			lastAutoStart: 0,
		};
		g[KEY] = s;
	}
	return s;
}

export function markReceived(s: GlobalState, turnId: string): void {
	s.received.push(turnId);
	if (s.received.length > RECEIVED_CAP) s.received.splice(0, s.received.length - RECEIVED_CAP);
}

export function addCompleted(s: GlobalState, done: TurnDone): void {
	const i = s.completed.findIndex((d) => d.turn_id === done.turn_id);
	if (i >= 0) s.completed.splice(i, 1);
	s.completed.push(done);
}

export function ackCompleted(s: GlobalState, turnId: string): void {
	s.completed = s.completed.filter((d) => d.turn_id !== turnId);
}

/**
 * Claims this process for one copy of the extension: the person may have it installed in the
 * agent dir while the hub also passes it with `-e`, and two copies would connect twice (or
 * register the same tools twice). Returns the release function, or undefined when another live
 * copy holds the claim (then this copy must do nothing). A claim whose holder's pi runtime has
 * gone stale (a /reload, /new, … that did not release it) is taken over.
 */
export function claimProcess(isStale: () => boolean): (() => void) | undefined {
	const s = globalState();
	if (s.owner && !s.owner.isStale()) return undefined;
	const owner = { isStale };
	s.owner = owner;
	return () => {
		if (s.owner === owner) s.owner = undefined;
	};
}
