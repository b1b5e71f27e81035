/**
 * The Telegram note in the system prompt of runs whose message came from the hub: a pointer to
 * the `telegram-bridge` skill, which holds the guidance itself (pi lists every skill by name
 * and description only; a pointer makes the model read this one when it matters, and costs a
 * couple of lines instead of the skill's hundreds of words on every run).
 */
import type { BeforeAgentStartEvent } from "@earendil-works/pi-coding-agent";
import { SKILL_NAME } from "./skill.ts";

/** The section's tag: pi renders it as `<telegram>…</telegram>`. */
export const NOTE_SECTION = "telegram";

export const TELEGRAM_NOTE = [
	"This run's message came from the person through Telegram (pi-telegram): they read your answer on a phone, not in the terminal.",
	`Read the ${SKILL_NAME} skill before answering if it is not loaded yet.`,
].join("\n");

/**
 * Adds the note to this run's prompt. As a section of pi's structured prompt, pi patches only
 * it in and out between runs (providers keep their cached prefix) and builds the prompt after
 * the run's tool changes; a pi without sections gets the note appended to the whole prompt.
 */
export function addTelegramNote(event: BeforeAgentStartEvent): { systemPrompt: string } | undefined {
	const sections = (event.systemPromptOptions as { sections?: Record<string, string> } | undefined)?.sections;
	if (sections) {
		sections[NOTE_SECTION] = TELEGRAM_NOTE;
		return undefined;
	}
	return { systemPrompt: `${event.systemPrompt}\n\n<${NOTE_SECTION}>\n${TELEGRAM_NOTE}\n</${NOTE_SECTION}>` };
}
