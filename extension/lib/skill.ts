/**
 * The `telegram-bridge` skill (`skills/telegram-bridge/SKILL.md` of this package): how to answer
 * a person on Telegram. An installed package lists it through `pi.skills` in package.json, but
 * pi reads that only for packages: a pi started with `-e .../dist/index.js` (the hub's headless
 * children, a one-off run) learns of it only from this extension's `resources_discover`.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import type { Problems } from "./log.ts";

export const SKILL_NAME = "telegram-bridge";

/**
 * The folder holding the skill's SKILL.md, found from this module: `lib/` in the sources and
 * `dist/lib/` once compiled sit at different depths under the package root.
 */
export function skillDir(from: string = path.dirname(fileURLToPath(import.meta.url))): string | undefined {
	for (const up of ["..", path.join("..", "..")]) {
		const dir = path.resolve(from, up, "skills", SKILL_NAME);
		if (fs.existsSync(path.join(dir, "SKILL.md"))) return dir;
	}
	return undefined;
}

/** What the skill contribution needs of pi. */
export type SkillApi = Pick<ExtensionAPI, "on" | "getCommands">;

/**
 * Offers the skill to pi at each resource discovery, unless pi already has a skill of that
 * name: the package's own listing of it (another copy of these files, which pi would report as
 * a name collision; the very same file pi drops silently either way).
 */
export function contributeSkill(pi: SkillApi, problems: Problems, dir: string | undefined = skillDir()): void {
	pi.on(
		"resources_discover",
		problems.guard("offering the telegram-bridge skill", () => {
			if (!dir) {
				problems.record("the telegram-bridge skill", "skills/telegram-bridge/SKILL.md is missing from the extension's folder");
				return undefined;
			}
			const known = pi.getCommands().some((c) => c.source === "skill" && c.name === `skill:${SKILL_NAME}`);
			return known ? undefined : { skillPaths: [dir] };
		}),
	);
}
