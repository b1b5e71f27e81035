/**
 * Process-global state. `/reload`, `/new`, `/resume` and `/fork` replace the extension instance
 * (the module may even be loaded again), but the pi process and its agent stay; what must survive
 * lives on `globalThis.__piTelegram`.
 */

export interface TurnDone {
	turn_id: string;
	text: string;
	aborted: boolean;
	error: string | null;
}

export interface HubTurn {
	turn_id: string;
	text: string;
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
