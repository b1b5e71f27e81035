/**
 * pi waiting for the person at its terminal: an extension's dialog (`ctx.ui.select`, `confirm`,
 * `input`, `editor`, `custom`) blocks pi, and pi says so with `ui_prompt_start`/`ui_prompt_end`
 * (nested prompts are one span). The hub is told (`ui_prompt`) so the person learns it on the
 * phone; after a reconnect, a span still open is told again.
 *
 * pi's extension API has no way for one extension to answer another's dialog: the person answers
 * at the terminal. (A headless pi's dialogs are answered from Telegram: the hub speaks pi's RPC.)
 */
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import type { Outbox } from "./link.ts";
import type { Session } from "./session.ts";

interface Waiting {
	kind: string;
	title: string | undefined;
}

export class UiPromptWatch {
	private readonly s: Session;
	private readonly out: Outbox;
	private waiting: Waiting | undefined;

	constructor(s: Session, out: Outbox) {
		this.s = s;
		this.out = out;
	}

	register(pi: ExtensionAPI): void {
		pi.on(
			"ui_prompt_start",
			this.s.problems.guard("telling the hub pi waits at the terminal", (event) => {
				this.waiting = { kind: String(event.kind), title: typeof event.title === "string" ? event.title : undefined };
				this.tell();
			}),
		);
		pi.on(
			"ui_prompt_end",
			this.s.problems.guard("telling the hub pi no longer waits", () => {
				if (!this.waiting) return;
				this.waiting = undefined;
				this.out.send({ type: "ui_prompt", waiting: false });
			}),
		);
	}

	/** After a welcome: a prompt still open is told to the new connection. */
	afterWelcome(): void {
		if (this.waiting) this.tell();
	}

	private tell(): void {
		const w = this.waiting;
		if (!w) return;
		this.out.send({ type: "ui_prompt", waiting: true, kind: w.kind, ...(w.title ? { title: w.title } : {}) });
	}
}
