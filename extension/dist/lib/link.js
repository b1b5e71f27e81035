import { HubConnection } from "./connection.js";
import { isRemote } from "./transport.js";
const STATUS_KEY = "telegram";
export class InstanceLink {
    s;
    hooks;
    hub;
    hubStatus;
    lastFooter = null;
    constructor(s, hooks) {
        this.s = s;
        this.hooks = hooks;
    }
    open(profile, autoStart) {
        const hub = new HubConnection(profile, {
            hello: () => ({ role: "instance", ...this.s.stateFields(), ...this.hooks.helloTurns() }),
            onWelcome: (w) => this.hooks.onWelcome(w),
            onMessage: (m) => this.s.problems.guard(`handling the hub's ${m.type}`, this.hooks.onMessage)(m),
            onStatus: () => {
                if (this.hub !== hub)
                    return;
                if (!hub.connected) {
                    this.hubStatus = undefined;
                    this.hooks.onDisconnected();
                }
                this.updateFooter();
            },
            notify: (text, level) => this.s.notify(text, level),
            problem: (where, e) => this.s.problems.record(where, e),
        }, { role: "instance", autoStart });
        this.hub = hub;
        return hub;
    }
    close(bye) {
        const hub = this.hub;
        this.hub = undefined;
        this.hubStatus = undefined;
        hub?.stop(bye);
        this.hooks.onDisconnected();
    }
    get connected() {
        return this.hub?.connected ?? false;
    }
    send(msg, opts) {
        return this.hub?.send(msg, opts) ?? false;
    }
    sendState(over = {}) {
        if (!this.hub)
            return;
        this.hub.send({ type: "state", ...this.s.stateFields(over) });
    }
    setHubStatus(text) {
        this.hubStatus = text;
        this.updateFooter();
    }
    resetFooter() {
        this.lastFooter = null;
    }
    updateFooter() {
        const c = this.s.ctx;
        if (!c)
            return;
        const hub = this.hub;
        const text = hub ? (hub.connected && this.hubStatus !== undefined ? this.hubStatus : hub.statusText()) : undefined;
        if (text === this.lastFooter)
            return;
        this.lastFooter = text;
        try {
            c.ui.setStatus(STATUS_KEY, text);
        }
        catch (e) {
            this.s.problems.record("setting the footer", e);
        }
    }
    filesAsBytes() {
        return this.hub?.welcome?.files === "bytes";
    }
    drained() {
        return this.hub?.drained() ?? Promise.resolve();
    }
    usable() {
        const hub = this.hub;
        return hub !== undefined && !hub.unreachable;
    }
    unavailable() {
        const hub = this.hub;
        if (!hub)
            return "not connected to Telegram: run /telegram-connect";
        if (hub.connected)
            return undefined;
        return `not connected to Telegram (${hub.halted ?? hub.detail}): run /telegram-connect`;
    }
    refuses(tool) {
        const hub = this.hub;
        if (tool !== "telegram_attach" || !hub || !isRemote(hub.target) || this.filesAsBytes())
            return undefined;
        return "telegram_attach cannot send files from a pi on another machine: the hub reads files from its own disk. Send text with telegram_message instead, or run this pi on the hub's machine";
    }
}
