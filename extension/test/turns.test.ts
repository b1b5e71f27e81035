/**
 * extension/lib/turns.ts: the hub turns of one pi (`TurnRunner`) through its public API, with a
 * fake pi (idleness, `sendUserMessage`, `getCommands`), a fake outbox, and Node's mock timers for
 * the dispatch, the queue's poll, the command settle time and the start watchdog.
 */
import assert from "node:assert/strict";
import { beforeEach, describe, type TestContext, test } from "node:test";
import type { InputEvent, MessageEndEvent } from "@earendil-works/pi-coding-agent";
import type { Outbox } from "../lib/link.ts";
import { Problems } from "../lib/log.ts";
import type { Session } from "../lib/session.ts";
import { type GlobalState, globalState } from "../lib/state.ts";
import { TurnRunner } from "../lib/turns.ts";
import type { Ack, ClientMessage, Prompt, TurnDoneMessage, WireImage } from "../lib/wire.ts";

const IMG: WireImage = { type: "image", data: "aGk=", mimeType: "image/png" };

/** What pi does for the runner: its state and what the runner asked of it. */
class FakePi {
	idle = true;
	pending = false;
	idleThrows: Error | undefined;
	sendThrows: Error | undefined;
	commands: { name: string; source: string }[] = [];
	sent: { content: unknown; opts: unknown }[] = [];
}

interface World {
	pi: FakePi;
	s: { live: boolean; ctx: unknown; problems: Problems; pi: unknown };
	/** Everything the runner sent to the hub. */
	out: ClientMessage[];
	/** How many times the runner sent pi's state. */
	states: () => number;
	turns: TurnRunner;
	G: GlobalState;
	tick: (ms: number) => void;
	/** Another extension instance in the same process (after a /reload, /new...). */
	nextRunner: () => TurnRunner;
}

function world(t: TestContext): World {
	t.mock.timers.enable({ apis: ["setTimeout"] });
	const pi = new FakePi();
	const out: ClientMessage[] = [];
	let states = 0;
	const s = {
		live: true,
		ctx: {
			isIdle: () => {
				if (pi.idleThrows) throw pi.idleThrows;
				return pi.idle;
			},
			hasPendingMessages: () => pi.pending,
		},
		problems: new Problems(),
		pi: {
			sendUserMessage: (content: unknown, opts: unknown) => {
				if (pi.sendThrows) throw pi.sendThrows;
				pi.sent.push({ content, opts });
			},
			getCommands: () => pi.commands,
		},
	};
	const outbox: Outbox = {
		send: (m) => {
			out.push(m);
			return true;
		},
		sendState: () => {
			states++;
		},
	};
	const runner = () => new TurnRunner(s as unknown as Session, outbox);
	return {
		pi,
		s,
		out,
		states: () => states,
		turns: runner(),
		G: globalState(),
		tick: (ms) => t.mock.timers.tick(ms),
		nextRunner: runner,
	};
}

function prompt(turn_id: string, text: string, images: WireImage[] = [], droppedImages = 0): Prompt {
	return { type: "prompt", turn_id, text, context: "", images, droppedImages };
}

function assistant(text: string, stopReason = "stop", errorMessage?: string): MessageEndEvent {
	const message = { role: "assistant", content: text ? [{ type: "text", text }] : [], stopReason, ...(errorMessage ? { errorMessage } : {}) };
	return { type: "message_end", message } as unknown as MessageEndEvent;
}

function input(text: string, source = "extension"): InputEvent {
	return { type: "input", text, source } as unknown as InputEvent;
}

/** pi running the hub turn it was handed: its input, agent_start, an answer, agent_settled. */
function runTurn(w: World, text: string, answer: string, aborted = false): void {
	w.turns.claimInput(input(text));
	w.turns.runStarted();
	w.turns.messageEnded(assistant(answer));
	w.turns.settled(aborted);
}

/** What the runner handed to pi, in order. */
const contents = (w: World) => w.pi.sent.map((x) => x.content);
const turnDones = (w: World) => w.out.filter((m): m is TurnDoneMessage => m.type === "turn_done");
const acks = (w: World) => w.out.filter((m): m is Ack => m.type === "ack");

beforeEach(() => {
	// a fresh process: the bookkeeping is process-global (state.ts)
	delete (globalThis as Record<string, unknown>).__piTelegram;
	delete process.env.PI_TELEGRAM_DEBUG;
});

describe("a hub turn", () => {
	test("starts at once in an idle pi; its run's answer is the turn_done, kept until done_ack", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "hi from telegram"));
		assert.deepStrictEqual(w.out, [{ type: "ack", turn_id: "t1", disposition: "started" }]);
		assert.deepStrictEqual(w.pi.sent, [{ content: "hi from telegram", opts: { expandPromptTemplates: false } }]);
		assert.equal(w.turns.hasQueued(), false);

		assert.equal(w.turns.claimInput(input("hi from telegram", "interactive")), undefined, "typed in pi: not the turn's");
		assert.equal(w.turns.claimInput(input("something else")), undefined);
		assert.equal(w.turns.claimInput(input("hi from telegram")), "t1");
		assert.equal(w.turns.claimInput(input("hi from telegram")), undefined, "claimed once");
		assert.equal(w.turns.startsHubTurn(), true, "the run about to start is the hub turn's: it gets the Telegram note");

		w.turns.runStarted();
		assert.equal(w.turns.activeTurnId(), "t1");
		assert.equal(w.turns.startsHubTurn(), false, "a later run (typed in pi, say) is not");
		assert.deepStrictEqual(w.turns.statusLines(), ["queued turns: 0", "running turn: t1"]);
		w.turns.messageEnded(assistant("echo: hi from telegram"));
		w.turns.settled(false);
		const done = { turn_id: "t1", text: "echo: hi from telegram", aborted: false, error: null };
		assert.deepStrictEqual(turnDones(w), [{ type: "turn_done", ...done }]);
		assert.equal(w.turns.activeTurnId(), null);
		assert.deepStrictEqual(w.G.completed, [done]);
		assert.deepStrictEqual(w.turns.statusLines(), ["queued turns: 0", "results not yet acknowledged by the hub: 1"]);

		assert.equal(w.states(), 0);
		w.tick(0);
		assert.equal(w.states(), 1, "nothing else to start: pi's state goes to the hub");
		w.turns.doneAck("t1");
		assert.deepStrictEqual(w.G.completed, []);
		w.tick(60_000);
		assert.equal(w.out.length, 2, "no watchdog, no poll");
	});

	test("waits in the queue while pi is busy, and the queued turns start one by one, in order", (t) => {
		const w = world(t);
		w.pi.idle = false;
		w.turns.onPrompt(prompt("t1", "first"));
		w.turns.onPrompt(prompt("t2", "second"));
		assert.deepStrictEqual(acks(w), [
			{ type: "ack", turn_id: "t1", disposition: "queued" },
			{ type: "ack", turn_id: "t2", disposition: "queued" },
		]);
		assert.deepStrictEqual(w.pi.sent, []);
		assert.equal(w.turns.hasQueued(), true);
		assert.deepStrictEqual(w.turns.statusLines(), ["queued turns: 2"]);
		w.tick(10_000);
		assert.deepStrictEqual(w.pi.sent, [], "still busy");

		// the local run ends
		w.pi.idle = true;
		w.turns.settled(false);
		assert.deepStrictEqual(turnDones(w), [], "a run typed in pi has no turn_done");
		w.tick(0);
		assert.deepStrictEqual(contents(w), ["first"]);
		w.turns.onPrompt(prompt("t3", "third"));
		assert.deepStrictEqual(acks(w)[2], { type: "ack", turn_id: "t3", disposition: "queued" }, "a turn is starting");
		runTurn(w, "first", "one");
		w.tick(0);
		assert.deepStrictEqual(contents(w), ["first", "second"]);
		runTurn(w, "second", "two");
		w.tick(0);
		runTurn(w, "third", "three");
		assert.equal(w.states(), 0, "every dispatch started a turn");
		w.tick(0);
		assert.equal(w.states(), 1);
		assert.deepStrictEqual(
			turnDones(w).map((d) => [d.turn_id, d.text]),
			[
				["t1", "one"],
				["t2", "two"],
				["t3", "three"],
			],
		);
		assert.equal(w.turns.hasQueued(), false);
	});

	test("queued, starts when pi turns idle without agent_settled (the queue is polled every 2 s)", (t) => {
		const w = world(t);
		w.pi.pending = true; // messages waiting in pi count as busy
		w.turns.onPrompt(prompt("t1", "hi"));
		assert.equal(acks(w)[0]?.disposition, "queued");
		w.pi.pending = false;
		w.tick(1999);
		assert.deepStrictEqual(w.pi.sent, []);
		w.tick(1);
		assert.deepStrictEqual(contents(w), ["hi"]);
	});

	test("received twice is only acknowledged again, running, queued or done", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "hi"));
		w.turns.onPrompt(prompt("t1", "hi"));
		runTurn(w, "hi", "echo");
		w.turns.onPrompt(prompt("t1", "hi"));
		w.pi.idle = false;
		w.turns.onPrompt(prompt("t2", "later"));
		w.turns.onPrompt(prompt("t2", "later"));
		assert.deepStrictEqual(
			acks(w).map((a) => [a.turn_id, a.disposition]),
			[
				["t1", "started"],
				["t1", "duplicate"],
				["t1", "duplicate"],
				["t2", "queued"],
				["t2", "duplicate"],
			],
		);
		assert.equal(w.pi.sent.length, 1);
		assert.equal(w.G.queue.length, 1);
	});

	test("a prompt sent again after its answer was acknowledged says finished; one whose answer waits gets it again", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "hi"));
		runTurn(w, "hi", "echo");
		// Not acknowledged yet: the answer is still this process's to give.
		w.turns.onPrompt(prompt("t1", "hi"));
		assert.deepStrictEqual(acks(w).at(-1), { type: "ack", turn_id: "t1", disposition: "duplicate" });
		assert.equal(turnDones(w).length, 2, "the kept answer is sent again");
		w.turns.doneAck("t1");
		// A hub that lost the acknowledgement with its machine asks again: no answer will come.
		w.turns.onPrompt(prompt("t1", "hi"));
		assert.deepStrictEqual(acks(w).at(-1), { type: "ack", turn_id: "t1", disposition: "finished" });
		assert.equal(turnDones(w).length, 2);
		assert.equal(w.pi.sent.length, 1, "pi ran it once");
	});

	test("the hello names the hub state its turns are of; another state's welcome forgets them", (t) => {
		const w = world(t);
		w.G.received.push("t1");
		w.G.completed.push({ turn_id: "t1", text: "old", aborted: false, error: null });
		assert.equal(w.turns.helloTurns().store_id, undefined, "no hub has said yet");
		w.turns.afterWelcome("aaaa");
		w.turns.doneAck("t1");
		w.G.received.push("t2");
		w.G.completed.push({ turn_id: "t2", text: "kept", aborted: false, error: null });
		assert.equal(w.turns.helloTurns().store_id, "aaaa");
		w.turns.afterWelcome("aaaa");
		assert.deepStrictEqual(w.G.received, ["t1", "t2"], "the same state keeps them");
		w.turns.afterWelcome("bbbb");
		assert.deepStrictEqual([w.G.received, w.G.completed], [[], []], "a state started over owes nothing of the old one");
		assert.equal(w.turns.helloTurns().store_id, "bbbb");
		// Its t1 is a new prompt, not the old one.
		w.turns.onPrompt(prompt("t1", "new"));
		assert.equal(acks(w).at(-1)?.disposition, "started");
	});

	test("keeps the last 200 received ids, most recent last, for the hello", (t) => {
		const w = world(t);
		w.pi.idle = false;
		for (let i = 1; i <= 205; i++) w.turns.onPrompt(prompt(`t${i}`, "x"));
		const received = w.turns.helloTurns().received_turns;
		assert.equal(received.length, 200);
		assert.deepStrictEqual([received[0], received[199]], ["t6", "t205"]);
	});

	test("with images: text first, never expanded; images of another shape are recorded", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "/what is this", [IMG], 2));
		assert.deepStrictEqual(w.pi.sent, [{ content: [{ type: "text", text: "/what is this" }, IMG], opts: { expandPromptTemplates: false } }]);
		assert.match(w.s.problems.list()[0] ?? "", /hub turn t1: 2 of its images are not/);
		w.turns.runStarted();
		w.turns.settled(false);
		w.pi.idle = false;
		w.turns.onPrompt(prompt("t2", "", [IMG]));
		w.turns.shutdown(); // never started: it keeps its images for the next session
		assert.deepStrictEqual(w.G.queue, [{ turn_id: "t2", text: "", images: [IMG] }]);
	});

	test("a text starting with / expands prompt templates and commands, as typed in pi", (t) => {
		const w = world(t);
		w.pi.commands = [{ name: "review", source: "prompt" }];
		w.turns.onPrompt(prompt("t1", "/review src"));
		assert.deepStrictEqual(w.pi.sent, [{ content: "/review src", opts: { expandPromptTemplates: true } }]);
		w.tick(1000);
		assert.deepStrictEqual(turnDones(w), [], "a prompt template runs the model: no handled turn_done");
	});
});

describe("a hub turn that does not run the model", () => {
	test("an extension's command without a run is done, handled, after a second", (t) => {
		const w = world(t);
		w.pi.commands = [
			{ name: "telegram-status", source: "extension" },
			{ name: "review", source: "prompt" },
		];
		w.turns.onPrompt(prompt("t1", "/telegram-status now"));
		w.tick(999);
		assert.deepStrictEqual(turnDones(w), []);
		w.tick(1);
		assert.deepStrictEqual(turnDones(w), [{ type: "turn_done", turn_id: "t1", text: "", aborted: false, error: null, handled: true }]);
		assert.deepStrictEqual(w.G.completed, [{ turn_id: "t1", text: "", aborted: false, error: null, handled: true }]);
		assert.equal(w.states(), 1, "then the next turn may start: nothing waits, the state goes out");
	});

	test("an extension's command that starts a run is answered by that run", (t) => {
		const w = world(t);
		w.pi.commands = [{ name: "go", source: "extension" }];
		w.turns.onPrompt(prompt("t1", "/go"));
		w.tick(500);
		// the command's handler sends its own message: another text, but the turn's run
		assert.equal(w.turns.claimInput(input("the command's prompt")), undefined);
		w.turns.runStarted();
		w.tick(5000);
		assert.deepStrictEqual(turnDones(w), []);
		w.turns.messageEnded(assistant("went"));
		w.turns.settled(false);
		assert.deepStrictEqual(turnDones(w), [{ type: "turn_done", turn_id: "t1", text: "went", aborted: false, error: null }]);
	});

	test("pi not starting a run within 30 s fails the turn, and the queue moves on", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "no api key"));
		w.turns.onPrompt(prompt("t2", "swallowed"));
		assert.equal(acks(w)[1]?.disposition, "queued");
		w.tick(29_999);
		assert.deepStrictEqual(turnDones(w), []);
		w.tick(1);
		assert.deepStrictEqual(turnDones(w), [
			{ type: "turn_done", turn_id: "t1", text: "", aborted: false, error: "pi did not start a run for the message (see pi for the error)" },
		]);
		w.tick(0);
		assert.deepStrictEqual(contents(w), ["no api key", "swallowed"]);
		// pi saw the input (another extension's input handler took it), but no run came
		w.turns.claimInput(input("swallowed"));
		w.tick(30_000);
		assert.equal(turnDones(w)[1]?.error, "pi handled the message without running the agent");
		assert.equal(w.G.completed.length, 2);
	});

	test("pi failing to take the message puts the turn back, first, for the next session", (t) => {
		const w = world(t);
		w.pi.idle = false;
		w.turns.onPrompt(prompt("t0", "queued before"));
		w.pi.idle = true;
		w.pi.sendThrows = new Error("stale extension context");
		w.turns.scheduleDispatch();
		w.tick(0);
		assert.match(w.s.problems.list()[0] ?? "", /starting hub turn t0: stale extension context/);
		assert.deepStrictEqual(w.G.queue.map((q) => q.turn_id), ["t0"]);
		assert.equal(w.G.starting, undefined);
		w.turns.shutdown();

		w.pi.sendThrows = undefined;
		const next = w.nextRunner();
		next.scheduleDispatch();
		w.tick(0);
		assert.deepStrictEqual(contents(w), ["queued before"]);
	});
});

describe("a run's end", () => {
	test("aborted: the turn_done says so, with the text so far", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "long"));
		w.turns.claimInput(input("long"));
		w.turns.runStarted();
		w.turns.messageEnded(assistant("partial ans", "aborted"));
		w.turns.settled(true);
		assert.deepStrictEqual(turnDones(w), [{ type: "turn_done", turn_id: "t1", text: "partial ans", aborted: true, error: null }]);
	});

	test("an error is the turn's error; an answer after it (a retry) clears it", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "a"));
		w.turns.runStarted();
		w.turns.messageEnded(assistant("", "error", "429 rate limited"));
		w.turns.settled(false);
		w.tick(0);
		w.turns.onPrompt(prompt("t2", "b"));
		w.turns.runStarted();
		w.turns.messageEnded(assistant("", "error"));
		w.turns.messageEnded(assistant("fine after all"));
		w.turns.settled(false);
		w.tick(0);
		w.turns.onPrompt(prompt("t3", "c"));
		w.turns.runStarted();
		w.turns.messageEnded(assistant("", "error"));
		w.turns.settled(false);
		assert.deepStrictEqual(
			turnDones(w).map((d) => [d.turn_id, d.text, d.error]),
			[
				["t1", "", "429 rate limited"],
				["t2", "fine after all", null],
				["t3", "", "error"],
			],
		);
	});

	test("the answer is the last assistant text: tool steps without text and other messages keep it", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "a"));
		w.turns.runStarted();
		w.turns.messageEnded(assistant("let me look", "toolUse"));
		w.turns.messageEnded(assistant("", "toolUse"));
		w.turns.messageEnded({ type: "message_end", message: { role: "toolResult", content: [{ type: "text", text: "output" }] } } as unknown as MessageEndEvent);
		w.turns.messageEnded({ type: "message_end", message: { role: "user", content: "more" } } as unknown as MessageEndEvent);
		w.turns.settled(false);
		assert.equal(turnDones(w)[0]?.text, "let me look");
	});

	test("a run typed in pi is no hub turn's", (t) => {
		const w = world(t);
		w.turns.runStarted();
		assert.equal(w.turns.activeTurnId(), null);
		w.turns.messageEnded(assistant("local"));
		w.turns.settled(false);
		assert.deepStrictEqual(w.out, []);
		assert.deepStrictEqual(w.G.completed, []);
	});

	test("an answer longer than a line allows is cut to fit, and kept whole", (t) => {
		for (const ch of ["a", "é", "😀"]) {
			delete (globalThis as Record<string, unknown>).__piTelegram;
			const w = world(t);
			const text = ch.repeat(1_500_000 / ch.length);
			w.turns.onPrompt(prompt("t1", "big"));
			w.turns.runStarted();
			w.turns.messageEnded(assistant(text));
			w.turns.settled(false);
			const done = turnDones(w)[0];
			assert.ok(done, ch);
			const bytes = Buffer.byteLength(JSON.stringify(done));
			assert.ok(bytes <= 1000 * 1024 && bytes > 800 * 1024, `${ch}: ${bytes} bytes`);
			assert.ok(done.text.endsWith("\n…[cut: the answer is longer than the hub protocol allows]"), ch);
			assert.ok(text.startsWith(done.text.split("\n")[0] ?? "?"), ch);
			assert.equal(w.G.completed[0]?.text, text, "the kept result is whole");
			t.mock.timers.reset();
		}
	});
});

describe("the hub connection", () => {
	test("the hello carries the results within its budget; the others follow the welcome", (t) => {
		const w = world(t);
		const small = (id: string) => ({ turn_id: id, text: `answer ${id}`, aborted: false, error: null });
		const big = { turn_id: "t2", text: "b".repeat(800 * 1024), aborted: false, error: null };
		w.G.completed.push(small("t1"), big, small("t3"));
		w.G.received.push("t1", "t2", "t3");
		const hello = w.turns.helloTurns();
		assert.deepStrictEqual(hello, { received_turns: ["t1", "t2", "t3"], completed_turns: [small("t1"), small("t3")] });
		w.turns.afterWelcome(null);
		assert.deepStrictEqual(w.out, [{ type: "turn_done", ...big }]);
		w.turns.doneAck("t2");
		w.turns.doneAck("t1");
		assert.deepStrictEqual(w.G.completed, [small("t3")], "the hub acknowledged the hello's t1 and t2");
	});

	test("pi shutting down: a running turn is reported aborted, one not yet started waits for the next session", (t) => {
		const w = world(t);
		w.turns.onPrompt(prompt("t1", "running"));
		w.turns.runStarted();
		w.turns.messageEnded(assistant("so far"));
		w.turns.shutdown();
		assert.deepStrictEqual(turnDones(w), [{ type: "turn_done", turn_id: "t1", text: "so far", aborted: true, error: null }]);

		w.turns.onPrompt(prompt("t2", "handed to pi"));
		w.pi.idle = false;
		w.turns.onPrompt(prompt("t3", "queued"));
		w.turns.shutdown();
		assert.deepStrictEqual(w.G.queue.map((q) => q.turn_id), ["t2", "t3"]);
		assert.equal(w.G.starting, undefined);
		w.tick(60_000);
		assert.equal(turnDones(w).length, 1, "no watchdog, no dispatch after the shutdown");

		// the next session's runner (a /new, a /reload) starts them
		w.pi.idle = true;
		const next = w.nextRunner();
		next.scheduleDispatch();
		w.tick(0);
		assert.deepStrictEqual(contents(w), ["running", "handed to pi", "handed to pi"]);
		assert.equal(next.hasQueued(), true);
		assert.deepStrictEqual(next.statusLines(), ["queued turns: 1", "results not yet acknowledged by the hub: 1"]);
	});

	test("nothing starts while the session is not live, or without a context, or when pi cannot say", (t) => {
		const w = world(t);
		w.s.live = false;
		w.turns.onPrompt(prompt("t1", "a"));
		assert.equal(acks(w)[0]?.disposition, "queued");
		w.tick(10_000);
		assert.deepStrictEqual(w.pi.sent, []);
		assert.equal(w.states(), 0, "a session that is not live sends nothing");

		w.s.live = true;
		const ctx = w.s.ctx;
		w.s.ctx = undefined;
		w.turns.onPrompt(prompt("t2", "b"));
		assert.equal(acks(w)[1]?.disposition, "queued");

		w.s.ctx = ctx;
		w.pi.idleThrows = new Error("stale ctx");
		w.tick(2000);
		assert.deepStrictEqual(w.pi.sent, []);
		assert.match(w.s.problems.list().at(-1) ?? "", /asking pi whether it is idle: stale ctx/);

		w.pi.idleThrows = undefined;
		w.tick(2000);
		assert.deepStrictEqual(contents(w), ["a"]);
	});
});
