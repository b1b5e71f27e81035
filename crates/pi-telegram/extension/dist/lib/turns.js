import { assistantText } from "./events.js";
import { ackCompleted, addCompleted, globalState, markReceived, RECEIVED_CAP } from "./state.js";
const START_WATCHDOG_MS = 30_000;
const COMMAND_SETTLE_MS = 1000;
const QUEUE_POLL_MS = 2000;
const HELLO_COMPLETED_BUDGET = 700 * 1024;
const TURN_DONE_MAX_BYTES = 1000 * 1024;
export class TurnRunner {
    s;
    out;
    G = globalState();
    dispatchTimer;
    watchdog;
    helloCompleted = new Set();
    constructor(s, out) {
        this.s = s;
        this.out = out;
    }
    helloTurns() {
        const completed = [];
        let size = 0;
        for (const d of this.G.completed) {
            const n = Buffer.byteLength(JSON.stringify(d));
            if (size + n > HELLO_COMPLETED_BUDGET)
                continue;
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
    afterWelcome(storeId) {
        const G = this.G;
        if (storeId && G.storeId && G.storeId !== storeId) {
            G.received.length = 0;
            G.completed.length = 0;
        }
        if (storeId)
            G.storeId = storeId;
        for (const d of G.completed)
            if (!this.helloCompleted.has(d.turn_id))
                this.sendTurnDone(d);
    }
    onPrompt(m) {
        const G = this.G;
        if (m.droppedImages > 0) {
            this.s.problems.record(`hub turn ${m.turn_id}`, `${m.droppedImages} of its images are not {type:"image",data,mimeType} and were left out`);
        }
        if (G.received.includes(m.turn_id)) {
            const done = G.completed.find((d) => d.turn_id === m.turn_id);
            const open = G.queue.some((t) => t.turn_id === m.turn_id) || G.starting?.turn_id === m.turn_id || G.active?.turn_id === m.turn_id;
            this.out.send({ type: "ack", turn_id: m.turn_id, disposition: done || open ? "duplicate" : "finished" });
            if (done)
                this.sendTurnDone(done);
            return;
        }
        markReceived(G, m.turn_id);
        const startNow = G.queue.length === 0 && this.canStartNow();
        this.out.send({ type: "ack", turn_id: m.turn_id, disposition: startNow ? "started" : "queued" });
        const text = `${m.context}${m.text}`;
        G.queue.push({ turn_id: m.turn_id, text, ...(m.images.length > 0 ? { images: m.images } : {}) });
        if (startNow)
            this.dispatch();
        else
            this.scheduleDispatch(QUEUE_POLL_MS);
    }
    doneAck(turnId) {
        ackCompleted(this.G, turnId);
    }
    claimInput(event) {
        const s = this.G.starting;
        if (!s || event.source !== "extension" || s.inputSeen || event.text !== s.text)
            return undefined;
        s.inputSeen = true;
        return s.turn_id;
    }
    runStarted() {
        const s = this.G.starting;
        if (!s)
            return;
        this.G.starting = undefined;
        this.clearWatchdog();
        this.G.active = { turn_id: s.turn_id, text: s.text, lastText: "", error: null };
    }
    activeTurnId() {
        return this.G.active?.turn_id ?? null;
    }
    messageEnded(event) {
        const a = this.G.active;
        const message = event.message;
        if (!a || message.role !== "assistant")
            return;
        const text = assistantText(message);
        const stop = message.stopReason;
        if (stop === "stop" || text.trim().length > 0)
            a.lastText = text;
        a.error = stop === "error" ? String(message.errorMessage ?? "error") : null;
    }
    settled(aborted) {
        this.finishActive(aborted);
        this.scheduleDispatch();
    }
    startsHubTurn() {
        return this.s.live && this.G.starting !== undefined;
    }
    shutdown() {
        const G = this.G;
        this.finishActive(true);
        if (G.starting) {
            const { turn_id, text, images } = G.starting;
            G.queue.unshift({ turn_id, text, ...(images ? { images } : {}) });
            G.starting = undefined;
        }
        this.clearWatchdog();
        if (this.dispatchTimer)
            clearTimeout(this.dispatchTimer);
        this.dispatchTimer = undefined;
    }
    hasQueued() {
        return this.G.queue.length > 0;
    }
    statusLines() {
        const G = this.G;
        const lines = [`queued turns: ${G.queue.length}`];
        if (G.active)
            lines.push(`running turn: ${G.active.turn_id}`);
        if (G.completed.length > 0)
            lines.push(`results not yet acknowledged by the hub: ${G.completed.length}`);
        return lines;
    }
    scheduleDispatch(delayMs = 0) {
        if (this.dispatchTimer)
            clearTimeout(this.dispatchTimer);
        this.dispatchTimer = setTimeout(this.s.problems.guard("starting a queued hub turn", () => {
            this.dispatchTimer = undefined;
            if (!this.s.live)
                return;
            if (!this.dispatch()) {
                if (delayMs === 0)
                    this.out.sendState();
                if (this.G.queue.length > 0)
                    this.scheduleDispatch(QUEUE_POLL_MS);
            }
        }), delayMs);
        this.dispatchTimer.unref?.();
    }
    canStartNow() {
        const c = this.s.ctx;
        if (!c || !this.s.live || this.G.starting || this.G.active)
            return false;
        try {
            return c.isIdle() && !c.hasPendingMessages();
        }
        catch (e) {
            this.s.problems.record("asking pi whether it is idle", e);
            return false;
        }
    }
    dispatch() {
        const G = this.G;
        if (G.queue.length === 0 || !this.canStartNow())
            return false;
        const turn = G.queue.shift();
        if (!turn)
            return false;
        const starting = { ...turn, inputSeen: false, at: Date.now() };
        G.starting = starting;
        try {
            if (turn.images && turn.images.length > 0) {
                this.s.pi.sendUserMessage([{ type: "text", text: turn.text }, ...turn.images], { expandPromptTemplates: false });
            }
            else {
                this.s.pi.sendUserMessage(turn.text, { expandPromptTemplates: turn.text.startsWith("/") });
            }
        }
        catch (e) {
            this.s.problems.record(`starting hub turn ${turn.turn_id}`, e);
            if (G.starting === starting)
                G.starting = undefined;
            G.queue.unshift(turn);
            return false;
        }
        this.clearWatchdog();
        if (this.runsExtensionCommand(turn.text, turn.images)) {
            this.watchdog = setTimeout(this.s.problems.guard("a command's end", () => this.commandRan(starting)), COMMAND_SETTLE_MS);
            this.watchdog.unref?.();
            return true;
        }
        this.watchdog = setTimeout(this.s.problems.guard("the start watchdog", () => {
            this.watchdog = undefined;
            if (G.starting !== starting)
                return;
            G.starting = undefined;
            const done = {
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
        }), START_WATCHDOG_MS);
        this.watchdog.unref?.();
        return true;
    }
    runsExtensionCommand(text, images) {
        if (!text.startsWith("/") || (images && images.length > 0))
            return false;
        const name = text.slice(1).split(/\s/, 1)[0];
        try {
            return this.s.pi.getCommands().some((c) => c.source === "extension" && c.name === name);
        }
        catch (e) {
            this.s.problems.record("listing pi's commands", e);
            return false;
        }
    }
    commandRan(starting) {
        this.watchdog = undefined;
        const G = this.G;
        if (G.starting !== starting)
            return;
        G.starting = undefined;
        const done = { turn_id: starting.turn_id, text: "", aborted: false, error: null, handled: true };
        addCompleted(G, done);
        this.sendTurnDone(done);
        this.scheduleDispatch();
    }
    clearWatchdog() {
        if (this.watchdog)
            clearTimeout(this.watchdog);
        this.watchdog = undefined;
    }
    finishActive(aborted) {
        const a = this.G.active;
        if (!a)
            return;
        this.G.active = undefined;
        const done = { turn_id: a.turn_id, text: a.lastText, aborted, error: a.error };
        addCompleted(this.G, done);
        this.sendTurnDone(done);
    }
    sendTurnDone(d) {
        let msg = { type: "turn_done", ...d };
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
