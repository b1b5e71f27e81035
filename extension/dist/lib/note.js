import { SKILL_NAME } from "./skill.js";
export const NOTE_SECTION = "telegram";
export const TELEGRAM_NOTE = [
    "This run's message came from the person through Telegram (pi-telegram): they read your answer on a phone, not in the terminal.",
    `Read the ${SKILL_NAME} skill before answering if it is not loaded yet.`,
].join("\n");
export function addTelegramNote(event) {
    const sections = event.systemPromptOptions?.sections;
    if (sections) {
        sections[NOTE_SECTION] = TELEGRAM_NOTE;
        return undefined;
    }
    return { systemPrompt: `${event.systemPrompt}\n\n<${NOTE_SECTION}>\n${TELEGRAM_NOTE}\n</${NOTE_SECTION}>` };
}
