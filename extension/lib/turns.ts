/**
 * Hub turns in this pi: a `prompt` is acknowledged and started when pi is idle, or queued and
 * started at the next `agent_settled`; its run's result becomes `turn_done`, kept until the hub's
 * `done_ack`. The bookkeeping (received ids, the queue, the starting and the running turn, the
 * unacknowledged results) is process-global (`state.ts`) so it survives /reload, /new, /resume
 * and hub restarts; only the timers belong to this extension instance.
 *
 * The forwarder calls `claimInput`, `runStarted`, `messageEnded` and `settled` as pi's events
 * come, before it forwards them, so each event carries the right turn id.
 */
import type { InputEvent, MessageEndEvent } from "@earendil-works/pi-coding-agent";
import { assistantText } from "./events.ts";
import type { Outbox } from "./link.ts";
import type { Session } from "./session.ts";
import { ackCompleted, addCompleted, type GlobalState, globalState, markReceived, RECEIVED_CAP, type TurnDone } from "./state.ts";
import type { InstanceHelloFields, Prompt, TurnDoneMessage } from "./wire.ts";

/**
 * How long a hub turn handed to pi may take to start its run before it is reported as failed.
 * pi awaits every extension's `input` handler, then checks the model and its auth, before
 * `agent_start`; a prompt that fails there (no API key, say) or is swallowed by another
 * extension's input handler is invisible to extensions, so only time tells.
 */
const START_WATCHDOG_MS = 30_000;
/**
 * How long after a hub turn that runs an extension's command pi must stay without a run for the
 * turn to be done. The command's handler runs without `agent_start` (and without `input`), and
 * its end is invisible to other extensions; a handler that starts a run (`pi.sendUserMessage`)
 * does so at once, and that run's answer is the turn's.
 */
const COMMAND_SETTLE_MS = 1000;
/** While hub turns wait in the local queue, how often pi is checked for idleness. */
const QUEUE_POLL_MS = 2000;
/** Budget of the hello's `completed_turns` (the rest follow as `turn_done` after the welcome). */
const HELLO_COMPLETED_BUDGET = 700 * 1024;
/** A `turn_done` line stays below the 1 MiB line limit with room to spare. */
const TURN_DONE_MAX_BYTES = 1000 * 1024;

export class TurnRunner {
	private readonly s: Session;
	private readonly out: Outbox;
	private readonly G = globalState();
	private dispatchTimer: NodeJS.Timeout | undefined;
	private watchdog: NodeJS.Timeout | undefined;
	/** Turns reported in the last hello; the others are sent as `turn_done` after the welcome. */
	private helloCompleted = new Set<string>();

	constructor(s: Session, out: Outbox) {
		this.s = s;
		this.out = out;
	}

	// ------------------------------------------------------------------ the hub's side

	/** The hello's turn fields. */
	helloTurns(): Pick<InstanceHelloFields, "received_turns" | "completed_turns" | "store_id"> {
		const completed: TurnDone[] = [];
		let size = 0;
		for (const d of this.G.completed) {
			const n = Buffer.byteLength(JSON.stringify(d));
			if (size + n > HELLO_COMPLETED_BUDGET) continue;
			size += n;
			completed.push(d);
		}
		this.helloCompleted = new Set(completed.map((d) => d.turn_id));
		return {
			received_turns: this.G.received.slice(-RECEIVED_CAP),
			completed_turns: completed,
			...(this.G.storeId ? { store_id: this.G.storeId } : {}),
		};
	}

	/**
	 * After a welcome: the completed turns that did not fit in the hello. A hub whose state is
	 * another (started over: its turn ids begin again at t1) is not owed this process's turns:
	 * they are forgotten, or its new t1 would be taken for an old one.
	 */
	afterWelcome(storeId: string | null): void {
		const G = this.G;
		if (storeId && G.storeId && G.storeId !== storeId) {
			G.received.length = 0;
			G.completed.length = 0;
		}
		if (storeId) G.storeId = storeId;
		for (const d of G.completed) if (!this.helloCompleted.has(d.turn_id)) this.sendTurnDone(d);
	}

	onPrompt(m: Prompt): void {
		const G = this.G;
		if (m.droppedImages > 0) {
			this.s.problems.record(`hub turn ${m.turn_id}`, `${m.droppedImages} of its images are not {type:"image",data,mimeType} and were left out`);
		}
		if (G.received.includes(m.turn_id)) {
			// A hub sends a prompt again when its state lost that it had (its machine crashed).
			// Its answer is still to come, waits for the hub's done_ack (sent again now), or was
			// acknowledged and forgotten: then the hub must not wait for it.
			const done = G.completed.find((d) => d.turn_id === m.turn_id);
			const open = G.queue.some((t) => t.turn_id === m.turn_id) || G.starting?.turn_id === m.turn_id || G.active?.turn_id === m.turn_id;
			this.out.send({ type: "ack", turn_id: m.turn_id, disposition: done || open ? "duplicate" : "finished" });
			if (done) this.sendTurnDone(done);
			return;
		}
		markReceived(G, m.turn_id);
		const startNow = G.queue.length === 0 && this.canStartNow();
		this.out.send({ type: "ack", turn_id: m.turn_id, disposition: startNow ? "started" : "queued" });
		// pi gets the hub's lines and the words as one message, as a headless pi does.
		const text = `${m.context}${m.text}`;
		G.queue.push({ turn_id: m.turn_id, text, ...(m.images.length > 0 ? { images: m.images } : {}) });
		if (startNow) this.dispatch();
		else this.scheduleDispatch(QUEUE_POLL_MS);
	}

	/** The hub stored the turn's result. */
	doneAck(turnId: string): void {
		ackCompleted(this.G, turnId);
	}

	// ------------------------------------------------------------------ pi's side

	/**
	 * An `input` event: when it is the starting hub turn's prompt coming back from pi, marks it
	 * seen and returns its turn id.
	 */
	claimInput(event: InputEvent): string | undefined {
		const s = this.G.starting;
		if (!s || event.source !== "extension" || s.inputSeen || event.text !== s.text) return undefined;
		s.inputSeen = true;
		return s.turn_id;
	}

	/** `agent_start`: the starting hub turn (if any) is now the running one. */
	runStarted(): void {
		const s = this.G.starting;
		if (!s) return;
		this.G.starting = undefined;
		this.clearWatchdog();
		this.G.active = { turn_id: s.turn_id, text: s.text, lastText: "", error: null };
	}

	/** The hub turn the current run belongs to. */
	activeTurnId(): string | null {
		return this.G.active?.turn_id ?? null;
	}

	/** `message_end`: an assistant message of a hub turn may be its answer. */
	messageEnded(event: MessageEndEvent): void {
		const a = this.G.active;
		const message = event.message;
		if (!a || message.role !== "assistant") return;
		const text = assistantText(message);
		const stop = message.stopReason;
		if (stop === "stop" || text.trim().length > 0) a.lastText = text;
		a.error = stop === "error" ? String(message.errorMessage ?? "error") : null;
	}

	/** `agent_settled`: the run's hub turn is done; the next queued one may start. */
	settled(aborted: boolean): void {
		this.finishActive(aborted);
		this.scheduleDispatch(); // sends the state when nothing else starts
	}

	/** `before_agent_start`: whether the run starting is a hub turn's (its message came from Telegram). */
	startsHubTurn(): boolean {
		return this.s.live && this.G.starting !== undefined;
	}

	/** `session_shutdown`: report a run cut off, keep a turn that did not start for the next session. */
	shutdown(): void {
		const G = this.G;
		// a run cut off without agent_settled still reports its turn
		this.finishActive(true);
		if (G.starting) {
			// handed to pi but never started: start it again in the next session
			const { turn_id, text, images } = G.starting;
			G.queue.unshift({ turn_id, text, ...(images ? { images } : {}) });
			G.starting = undefined;
		}
		this.clearWatchdog();
		if (this.dispatchTimer) clearTimeout(this.dispatchTimer);
		this.dispatchTimer = undefined;
	}

	/** Whether hub turns wait in the local queue. */
	hasQueued(): boolean {
		return this.G.queue.length > 0;
	}

	/** For /telegram-status. */
	statusLines(): string[] {
		const G = this.G;
		const lines = [`queued turns: ${G.queue.length}`];
		if (G.active) lines.push(`running turn: ${G.active.turn_id}`);
		if (G.completed.length > 0) lines.push(`results not yet acknowledged by the hub: ${G.completed.length}`);
		return lines;
	}

	/** Tries to start the next queued turn soon; while turns wait, checks again every 2 s. */
	scheduleDispatch(delayMs = 0): void {
		if (this.dispatchTimer) clearTimeout(this.dispatchTimer);
		this.dispatchTimer = setTimeout(
			this.s.problems.guard("starting a queued hub turn", () => {
				this.dispatchTimer = undefined;
				if (!this.s.live) return;
				if (!this.dispatch()) {
					if (delayMs === 0) this.out.sendState();
					// pi can become idle without agent_settled (a manual /compact ends): poll while turns wait
					if (this.G.queue.length > 0) this.scheduleDispatch(QUEUE_POLL_MS);
				}
			}),
			delayMs,
		);
		this.dispatchTimer.unref?.();
	}

	// ------------------------------------------------------------------ internals

	private canStartNow(): boolean {
		const c = this.s.ctx;
		if (!c || !this.s.live || this.G.starting || this.G.active) return false;
		try {
			return c.isIdle() && !c.hasPendingMessages();
		} catch (e) {
			this.s.problems.record("asking pi whether it is idle", e);
			return false;
		}
	}

	/** Starts the next queued hub turn when pi is idle. Returns whether one was started. */
	private dispatch(): boolean {
		const G = this.G;
		if (G.queue.length === 0 || !this.canStartNow()) return false;
		const turn = G.queue.shift();
		if (!turn) return false;
		const starting = { ...turn, inputSeen: false, at: Date.now() };
		G.starting = starting;
		try {
			if (turn.images && turn.images.length > 0) {
				// pi joins the text parts into the prompt's text and sends the images with it; an
				// empty text is fine (pi drops empty text blocks before the provider sees them)
				this.s.pi.sendUserMessage([{ type: "text", text: turn.text }, ...turn.images], { expandPromptTemplates: false });
			} else {
				// "/template args" from Telegram runs like typed in pi: templates and commands expand.
				this.s.pi.sendUserMessage(turn.text, { expandPromptTemplates: turn.text.startsWith("/") });
			}
		} catch (e) {
			// stale pi (shutting down): try again in the next session
			this.s.problems.record(`starting hub turn ${turn.turn_id}`, e);
			if (G.starting === starting) G.starting = undefined;
			G.queue.unshift(turn);
			return false;
		}
		this.clearWatchdog();
		if (this.runsExtensionCommand(turn.text, turn.images)) {
			this.watchdog = setTimeout(
				this.s.problems.guard("a command's end", () => this.commandRan(starting)),
				COMMAND_SETTLE_MS,
			);
			this.watchdog.unref?.();
			return true;
		}
		this.watchdog = setTimeout(
			this.s.problems.guard("the start watchdog", () => {
				this.watchdog = undefined;
				if (G.starting !== starting) return;
				// pi never started the run: another extension handled the input, or the prompt failed
				G.starting = undefined;
				const done: TurnDone = {
					turn_id: starting.turn_id,
					text: "",
					aborted: false,
					error: starting.inputSeen
						? "pi handled the message without running the agent"
						: "pi did not start a run for the message (see pi for the error)",
				};
				addCompleted(G, done);
				this.sendTurnDone(done);
				this.scheduleDispatch();
			}),
			START_WATCHDOG_MS,
		);
		this.watchdog.unref?.();
		return true;
	}

	/** Whether `text` (from Telegram: `/name args`) runs one of pi's extension commands. */
	private runsExtensionCommand(text: string, images: unknown[] | undefined): boolean {
		if (!text.startsWith("/") || (images && images.length > 0)) return false;
		const name = text.slice(1).split(/\s/, 1)[0];
		try {
			return this.s.pi.getCommands().some((c) => c.source === "extension" && c.name === name);
		} catch (e) {
			this.s.problems.record("listing pi's commands", e);
			return false;
		}
	}

	/** A hub turn that ran an extension's command and started no run: done, handled by pi. */
	private commandRan(starting: NonNullable<GlobalState["starting"]>): void {
		this.watchdog = undefined;
		const G = this.G;
		if (G.starting !== starting) return; // a run started: its answer is the turn's
		G.starting = undefined;
		const done: TurnDone = { turn_id: starting.turn_id, text: "", aborted: false, error: null, handled: true };
		addCompleted(G, done);
		this.sendTurnDone(done);
		this.scheduleDispatch();
	}

	private clearWatchdog(): void {
		if (this.watchdog) clearTimeout(this.watchdog);
		this.watchdog = undefined;
	}

	private finishActive(aborted: boolean): void {
		const a = this.G.active;
		if (!a) return;
		this.G.active = undefined;
		const done: TurnDone = { turn_id: a.turn_id, text: a.lastText, aborted, error: a.error };
		addCompleted(this.G, done);
		this.sendTurnDone(done);
	}

	/** Sends a result; a text too long for one line (1 MiB) is cut to fit. */
	private sendTurnDone(d: TurnDone): void {
		let msg: TurnDoneMessage = { type: "turn_done", ...d };
		let bytes = Buffer.byteLength(JSON.stringify(msg));
		let keep = d.text.length;
		while (bytes > TURN_DONE_MAX_BYTES && keep > 0) {
			keep = Math.floor(((keep * TURN_DONE_MAX_BYTES) / bytes) * 0.95);
			msg = { ...msg, text: `${d.text.slice(0, keep)}\n…[cut: the answer is longer than the hub protocol allows]` };
			bytes = Buffer.byteLength(JSON.stringify(msg));
		}
		this.out.send(msg);
	}
}
