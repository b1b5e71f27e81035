/**
 * Our tools are offered to the model only while they can work: while the hub cannot be reached,
 * `telegram_attach` and `telegram_message` leave pi's active tools (a model that sees them
 * calls them, and each call only fails), and they come back when the link does.
 *
 * Only our two names are ever touched, and only those of them that were active when they were
 * hidden come back: a tool the person turned off (or never allowed, `--tools`) stays off.
 * Which ones we hid is kept where each of pi's ways of carrying the loadout over can find it:
 * process-global for /new, /reload, /resume and /fork (the loadout carries over, the extension
 * instance does not), and a session entry for a later pi resuming the session (pi restores a
 * removed tool as removed).
 *
 * The decision is taken when a run starts, not at every flicker of the link: a hub restart
 * mid-run would otherwise change the model's tools, and its prompt, twice; a call meanwhile
 * fails with the reason. A link that comes back shows the tools at once, since a run may be
 * under way and may use them.
 */
import type { ExtensionAPI, SessionEntry } from "@earendil-works/pi-coding-agent";
import { globalState } from "./state.ts";
import type { ToolName } from "./wire.ts";

export const TOOL_NAMES: readonly ToolName[] = ["telegram_attach", "telegram_message"];
const OURS: ReadonlySet<string> = new Set(TOOL_NAMES);

/** The session entry recording which of our tools are hidden by us (`{hidden: string[]}`). */
export const HIDDEN_ENTRY = "pi-telegram-tools";

export type ToolsApi = Pick<ExtensionAPI, "getActiveTools" | "setActiveTools" | "appendEntry">;

export class ToolGate {
	private readonly pi: ToolsApi;
	private readonly G = globalState();

	constructor(pi: ToolsApi) {
		this.pi = pi;
	}

	/** session_start: adds what an earlier pi hid in this session (its latest entry). */
	resume(branch: readonly SessionEntry[]): void {
		for (let i = branch.length - 1; i >= 0; i--) {
			const e = branch[i];
			if (e?.type !== "custom" || e.customType !== HIDDEN_ENTRY) continue;
			const data = e.data as { hidden?: unknown } | undefined;
			const names = Array.isArray(data?.hidden) ? data.hidden.filter((n): n is string => typeof n === "string" && OURS.has(n)) : [];
			this.G.hiddenTools = union(this.G.hiddenTools ?? [], names);
			return;
		}
	}

	/** Our tools hidden now by us. */
	get hidden(): readonly string[] {
		return this.G.hiddenTools ?? [];
	}

	/** Hides or shows our tools for `usable` (can a call reach the hub now?). */
	set(usable: boolean): void {
		if (usable) this.show();
		else this.hide();
	}

	private hide(): void {
		const active = this.pi.getActiveTools();
		const ours = active.filter((n) => OURS.has(n));
		if (ours.length === 0) return;
		this.G.hiddenTools = union(this.hidden, ours);
		this.pi.setActiveTools(active.filter((n) => !OURS.has(n)));
		this.pi.appendEntry(HIDDEN_ENTRY, { hidden: this.G.hiddenTools });
	}

	private show(): void {
		const back = this.hidden;
		if (back.length === 0) return;
		this.G.hiddenTools = [];
		const active = this.pi.getActiveTools();
		this.pi.setActiveTools(union(active, back));
		this.pi.appendEntry(HIDDEN_ENTRY, { hidden: [] });
	}
}

function union(a: readonly string[], b: readonly string[]): string[] {
	return [...new Set([...a, ...b])];
}
