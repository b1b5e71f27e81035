import * as fs from "node:fs";
import * as path from "node:path";
import { errorText } from "./log.js";
import { agentDir, ensurePrivateDir, isProfileName } from "./paths.js";
export function connectionsFile() {
    return path.join(agentDir(), "telegram", "connections.json");
}
function load() {
    const file = connectionsFile();
    let text;
    try {
        text = fs.readFileSync(file, "utf8");
    }
    catch (e) {
        if (e.code === "ENOENT")
            return { version: 1, projects: {} };
        throw new Error(`cannot read ${file}: ${errorText(e)}`);
    }
    if (text.trim() === "")
        return { version: 1, projects: {} };
    let raw;
    try {
        raw = JSON.parse(text);
    }
    catch (e) {
        throw new Error(`${file} is not valid JSON (${errorText(e)}): fix or delete it`);
    }
    if (!raw || typeof raw !== "object" || Array.isArray(raw))
        throw new Error(`${file} is not a JSON object: fix or delete it`);
    const obj = raw;
    if (obj.projects === undefined)
        return { ...obj, version: 1, projects: {} };
    if (!obj.projects || typeof obj.projects !== "object" || Array.isArray(obj.projects)) {
        throw new Error(`"projects" in ${file} is not an object: fix or delete it`);
    }
    return { ...obj, version: 1, projects: obj.projects };
}
function save(data) {
    const file = connectionsFile();
    ensurePrivateDir(path.dirname(file));
    const tmp = `${file}.${process.pid}.${Date.now().toString(36)}.tmp`;
    const fd = fs.openSync(tmp, "w", 0o600);
    try {
        fs.writeFileSync(fd, `${JSON.stringify(data, null, 2)}\n`);
        fs.fsyncSync(fd);
    }
    finally {
        fs.closeSync(fd);
    }
    try {
        fs.chmodSync(tmp, 0o600);
        fs.renameSync(tmp, file);
    }
    catch (e) {
        let left = "";
        try {
            fs.unlinkSync(tmp);
        }
        catch (cleanup) {
            left = ` (and ${tmp} is left behind: ${errorText(cleanup)})`;
        }
        throw new Error(`cannot write ${file}: ${errorText(e)}${left}`);
    }
}
export function rememberedProfile(cwd) {
    const entry = load().projects[path.resolve(cwd)];
    const profile = entry?.profile;
    return typeof profile === "string" && isProfileName(profile) ? profile : undefined;
}
export function remember(cwd, profile) {
    const data = load();
    const key = path.resolve(cwd);
    if (data.projects[key]?.profile === profile)
        return;
    data.projects[key] = { ...(data.projects[key] ?? {}), profile };
    save(data);
}
export function forget(cwd) {
    const data = load();
    const key = path.resolve(cwd);
    if (!(key in data.projects))
        return;
    delete data.projects[key];
    save(data);
}
