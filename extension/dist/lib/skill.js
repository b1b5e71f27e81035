import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
export const SKILL_NAME = "telegram-bridge";
export function skillDir(from = path.dirname(fileURLToPath(import.meta.url))) {
    for (const up of ["..", path.join("..", "..")]) {
        const dir = path.resolve(from, up, "skills", SKILL_NAME);
        if (fs.existsSync(path.join(dir, "SKILL.md")))
            return dir;
    }
    return undefined;
}
export function contributeSkill(pi, problems, dir = skillDir()) {
    pi.on("resources_discover", problems.guard("offering the telegram-bridge skill", () => {
        if (!dir) {
            problems.record("the telegram-bridge skill", "skills/telegram-bridge/SKILL.md is missing from the extension's folder");
            return undefined;
        }
        const known = pi.getCommands().some((c) => c.source === "skill" && c.name === `skill:${SKILL_NAME}`);
        return known ? undefined : { skillPaths: [dir] };
    }));
}
