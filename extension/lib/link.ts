/**
 * The hub link of a connectable pi (the `instance` role): which connection is current (it changes
 * with /telegram-connect and /telegram-disconnect), sending through it, and the footer. What the
 * hub says is handed to `LinkHooks.onMessage`; the hello's turn fields come from the turn runner.
 */
import { HubConnection, type SendOptions, type WelcomeInfo } from "./connection.ts";
import type { Session } from "./session.ts";
import { isRemote } from "./transport.ts";
import type { ByeReason, ClientMessage, HubMessage, InstanceHelloFields, StateFields, ToolName } from "./wire.ts";

/** Sending to the hub: what the turn runner, the forwarder and the request answers need. */
export interface Outbox {
	/** Sends now when connected, else buffers (`buffer`) or drops. Returns whether it was written. */
	send(msg: ClientMessage, opts?: SendOptions): boolean;
	/** Sends `state` with pi's state now (`over` wins). */
	sendState(over?: Partial<StateFields>): void;
}

export interface LinkHooks {
	/** The hello's turn fields (built at each attempt). */
	helloTurns(): Pick<InstanceHelloFields, "received_turns" | "completed_turns" | "store_id">;
	/** After a welcome, before buffered lines go out. */
	onWelcome(welcome: WelcomeInfo): void;
	onMessage(msg: HubMessage): void;
	/** The connection was lost or closed (pending tool calls cannot be answered any more). */
	onDisconnected(): void;
}

const STATUS_KEY = "telegram";

export class InstanceLink implements Outbox {
	private readonly s: Session;
	private readonly hooks: LinkHooks;
	/** The current connection, if this pi is connected or connecting. */
	hub: HubConnection | undefined;
	/** Footer text the hub set with `set_status` (shown while connected). */
	private hubStatus: string | undefined;
	/** What the footer shows now; null: unknown (set it on the next update). */
	private lastFooter: string | undefined | null = null;

	constructor(s: Session, hooks: LinkHooks) {
		this.s = s;
		this.hooks = hooks;
	}

	/** Opens a connection to `profile` (the caller starts it or calls connectNow). */
	open(profile: string, autoStart: boolean): HubConnection {
		const hub = new HubConnection(
			profile,
			{
				hello: () => ({ role: "instance", ...this.s.stateFields(), ...this.hooks.helloTurns() }),
				onWelcome: (w) => this.hooks.onWelcome(w),
				onMessage: (m) => this.s.problems.guard(`handling the hub's ${m.type}`, this.hooks.onMessage)(m),
				onStatus: () => {
					if (this.hub !== hub) return;
					if (!hub.connected) {
						this.hubStatus = undefined;
						this.hooks.onDisconnected();
					}
					this.updateFooter();
				},
				notify: (text, level) => this.s.notify(text, level),
				problem: (where, e) => this.s.problems.record(where, e),
			},
			{ role: "instance", autoStart },
		);
		this.hub = hub;
		return hub;
	}

	/** Closes the current connection, if any, saying why to the hub. */
	close(bye: ByeReason): void {
		const hub = this.hub;
		this.hub = undefined;
		this.hubStatus = undefined;
		hub?.stop(bye);
		this.hooks.onDisconnected();
	}

	get connected(): boolean {
		return this.hub?.connected ?? false;
	}

	send(msg: ClientMessage, opts?: SendOptions): boolean {
		return this.hub?.send(msg, opts) ?? false;
	}

	sendState(over: Partial<StateFields> = {}): void {
		if (!this.hub) return;
		this.hub.send({ type: "state", ...this.s.stateFields(over) });
	}

	/** The hub's `set_status` (undefined clears it). */
	setHubStatus(text: string | undefined): void {
		this.hubStatus = text;
		this.updateFooter();
	}

	/** A new session: the footer is set again on the next update. */
	resetFooter(): void {
		this.lastFooter = null;
	}

	updateFooter(): void {
		const c = this.s.ctx;
		if (!c) return;
		const hub = this.hub;
		const text = hub ? (hub.connected && this.hubStatus !== undefined ? this.hubStatus : hub.statusText()) : undefined;
		if (text === this.lastFooter) return;
		this.lastFooter = text;
		try {
			c.ui.setStatus(STATUS_KEY, text);
		} catch (e) {
			this.s.problems.record("setting the footer", e);
		}
	}

	/** The hub is on another machine and takes files as bytes (its welcome said so). */
	filesAsBytes(): boolean {
		return this.hub?.welcome?.files === "bytes";
	}

	/** Resolves when the connection has room for more lines (see `HubConnection.drained`). */
	drained(): Promise<void> {
		return this.hub?.drained() ?? Promise.resolve();
	}

	/** Whether a tool call can reach the hub now (or is about to: see `HubConnection.unreachable`). */
	usable(): boolean {
		const hub = this.hub;
		return hub !== undefined && !hub.unreachable;
	}

	/** Why a tool call cannot reach Telegram now, or undefined when it can. */
	unavailable(): string | undefined {
		const hub = this.hub;
		if (!hub) return "not connected to Telegram: run /telegram-connect";
		if (hub.connected) return undefined;
		return `not connected to Telegram (${hub.halted ?? hub.detail}): run /telegram-connect`;
	}

	/**
	 * Why a tool cannot work over this link at all. The hub reads attached files from its own
	 * disk: from a pi on another machine a path names nothing there, or another file. (A hub
	 * behind TLS refuses it too; one behind a forwarded socket cannot tell.)
	 */
	refuses(tool: ToolName): string | undefined {
		const hub = this.hub;
		if (tool !== "telegram_attach" || !hub || !isRemote(hub.target) || this.filesAsBytes()) return undefined;
		return "telegram_attach cannot send files from a pi on another machine: the hub reads files from its own disk. Send text with telegram_message instead, or run this pi on the hub's machine";
	}
}
