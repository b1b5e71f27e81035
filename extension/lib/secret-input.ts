/**
 * A one-line input whose text is never shown (a bot token): pi's `ui.input` echoes what is
 * typed, so in the terminal the token is read with this component through `ui.custom`. Each
 * character shows as `•`; Enter gives the text, Escape gives nothing; a bracketed paste is
 * taken whole.
 */
const PASTE_START = "\x1b[200~";
const PASTE_END = "\x1b[201~";

/**
 * A key press as the terminal sends it, legacy or with the kitty keyboard protocol
 * (`ESC [ code [; mods] u`, which pi turns on): its code point, or undefined for anything else
 * (arrows, function keys: ignored).
 */
function keyCode(data: string): number | undefined {
	if (data.length === 1) return data.charCodeAt(0);
	const kitty = /^\x1b\[(\d+)(?:;\d+)?u$/.exec(data);
	if (kitty) return Number(kitty[1]);
	return undefined;
}

export class SecretInput {
	private readonly title: string;
	private readonly done: (value: string | undefined) => void;
	private value = "";
	private paste: string | undefined;

	constructor(title: string, done: (value: string | undefined) => void) {
		this.title = title;
		this.done = done;
	}

	render(width: number): string[] {
		const dots = "•".repeat(Math.min(this.value.length, Math.max(1, width - 4)));
		return [this.title.slice(0, width), `> ${dots}`, "(Enter to save, Escape to cancel; the text is not shown)".slice(0, width)];
	}

	handleInput(data: string): void {
		if (this.paste !== undefined || data.includes(PASTE_START)) {
			this.paste = (this.paste ?? "") + data.replace(PASTE_START, "");
			const end = this.paste.indexOf(PASTE_END);
			if (end === -1) return;
			this.value += this.paste.slice(0, end).replace(/[\r\n]/g, "");
			this.paste = undefined;
			return;
		}
		const code = keyCode(data);
		if (code === 13 || code === 10) {
			this.done(this.value);
		} else if (code === 27) {
			this.done(undefined);
		} else if (code === 127 || code === 8) {
			this.value = [...this.value].slice(0, -1).join("");
		} else if (code !== undefined && code >= 32 && data.startsWith("\x1b")) {
			this.value += String.fromCodePoint(code);
		} else if (!data.startsWith("\x1b") && /^[^\x00-\x1f\x7f]+$/.test(data)) {
			// Typed characters (several at once when the terminal is quick).
			this.value += data;
		}
	}

	invalidate(): void {}
}
