/**
 * `<agent-dir>/telegram/connections.json`: which projects (absolute cwd) are connected to which
 * profile, so `/reload`, `/new`, `/resume` and a fresh pi in the same project reconnect by
 * themselves. `{"version":1,"projects":{"<cwd>":{"profile":"default"}}}`, written atomically, 0600.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { errorText } from "./log.ts";
import { agentDir, ensurePrivateDir, isProfileName } from "./paths.ts";

interface ConnectionsFile {
	version: 1;
	projects: Record<string, { profile: string; [k: string]: unknown }>;
	[k: string]: unknown;
}

export function connectionsFile(): string {
	return path.join(agentDir(), "telegram", "connections.json");
}

/**
 * The file's contents; a missing or empty file is an empty list. A file that is not a JSON object
 * throws (with what to do about it) instead of being treated as empty, which the next `remember`
 * would overwrite.
 */
function load(): ConnectionsFile {
	const file = connectionsFile();
	let text: string;
	try {
		text = fs.readFileSync(file, "utf8");
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code === "ENOENT") return { version: 1, projects: {} };
		throw new Error(`cannot read ${file}: ${errorText(e)}`);
	}
	if (text.trim() === "") return { version: 1, projects: {} };
	let raw: unknown;
	try {
		raw = JSON.parse(text);
	} catch (e) {
		throw new Error(`${file} is not valid JSON (${errorText(e)}): fix or delete it`);
	}
	if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new Error(`${file} is not a JSON object: fix or delete it`);
	const obj = raw as Record<string, unknown>;
	if (obj.projects === undefined) return { ...obj, version: 1, projects: {} };
	if (!obj.projects || typeof obj.projects !== "object" || Array.isArray(obj.projects)) {
		throw new Error(`"projects" in ${file} is not an object: fix or delete it`);
	}
	return { ...obj, version: 1, projects: obj.projects as ConnectionsFile["projects"] };
}

function save(data: ConnectionsFile): void {
	const file = connectionsFile();
	ensurePrivateDir(path.dirname(file));
	const tmp = `${file}.${process.pid}.${Date.now().toString(36)}.tmp`;
	const fd = fs.openSync(tmp, "w", 0o600);
	try {
		fs.writeFileSync(fd, `${JSON.stringify(data, null, 2)}\n`);
		fs.fsyncSync(fd);
	} finally {
		fs.closeSync(fd);
	}
	try {
		fs.chmodSync(tmp, 0o600);
		fs.renameSync(tmp, file);
	} catch (e) {
		let left = "";
		try {
			fs.unlinkSync(tmp);
		} catch (cleanup) {
			left = ` (and ${tmp} is left behind: ${errorText(cleanup)})`;
		}
		throw new Error(`cannot write ${file}: ${errorText(e)}${left}`);
	}
}

/** The remembered profile of a project, if any. */
export function rememberedProfile(cwd: string): string | undefined {
	const entry = load().projects[path.resolve(cwd)];
	const profile = entry?.profile;
	return typeof profile === "string" && isProfileName(profile) ? profile : undefined;
}

export function remember(cwd: string, profile: string): void {
	const data = load();
	const key = path.resolve(cwd);
	if (data.projects[key]?.profile === profile) return;
	data.projects[key] = { ...(data.projects[key] ?? {}), profile };
	save(data);
}

export function forget(cwd: string): void {
	const data = load();
	const key = path.resolve(cwd);
	if (!(key in data.projects)) return;
	delete data.projects[key];
	save(data);
}
