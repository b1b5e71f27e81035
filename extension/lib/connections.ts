/**
 * `<agent-dir>/telegram/connections.json`: which projects (absolute cwd) are connected to which
 * profile, so `/reload`, `/new`, `/resume` and a fresh pi in the same project reconnect by
 * themselves. `{"version":1,"projects":{"<cwd>":{"profile":"default"}}}`, written atomically, 0600.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { agentDir, ensurePrivateDir, isProfileName } from "./paths.ts";

interface ConnectionsFile {
	version: 1;
	projects: Record<string, { profile: string; [k: string]: unknown }>;
	[k: string]: unknown;
}

export function connectionsFile(): string {
	return path.join(agentDir(), "telegram", "connections.json");
}

function load(): ConnectionsFile {
	try {
		const raw = JSON.parse(fs.readFileSync(connectionsFile(), "utf8"));
		if (raw && typeof raw === "object" && raw.projects && typeof raw.projects === "object") {
			return { ...raw, version: 1, projects: raw.projects };
		}
	} catch {
		// missing or malformed: start empty
	}
	return { version: 1, projects: {} };
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
		try {
			fs.unlinkSync(tmp);
		} catch {}
		throw e;
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
