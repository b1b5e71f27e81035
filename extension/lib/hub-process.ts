/**
 * Starting the hub: `<bin> serve --profile <p>`, detached, its output appended to hub.log, so it
 * keeps running after pi exits. The connection (`connection.ts`) decides when; this module only
 * spawns and reports what became of the process.
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { errorText } from "./log.ts";
import { agentDir, ensurePrivateDir, type ProfilePaths } from "./paths.ts";
import { hubBinary, installHint } from "./release.ts";

export interface SpawnReports {
	/** The hub could not be started at all (binary missing, not executable, …): why. */
	failed(text: string): void;
	/** The hub exited with an error within a minute of starting. */
	exited(code: number | null, signal: NodeJS.Signals | null, pid: number | undefined): void;
	/** Something went wrong around the spawn that does not stop the hub (recorded only). */
	problem(where: string, e: unknown): void;
}

/** How long after the spawn an exit still counts as "the hub failed to start". */
const EARLY_EXIT_MS = 60_000;

export function spawnHub(profile: string, paths: ProfilePaths, reports: SpawnReports): void {
	const agent = agentDir();
	if (!fs.existsSync(agent)) {
		// Deleted under a running pi (a test's temporary folder, a profile wiped by hand): a hub
		// started here would recreate it and serve nobody.
		reports.failed(`not starting the hub: pi's agent folder ${agent} is gone`);
		return;
	}
	const found = hubBinary();
	if ("problem" in found) {
		reports.failed(`cannot start the hub: ${found.problem}`);
		return;
	}
	const { bin, source } = found;
	const spawnedAt = Date.now();
	let fd: number | undefined;
	try {
		ensurePrivateDir(paths.dir);
		fd = fs.openSync(paths.log, "a", 0o600);
		const child = spawn(bin, ["serve", "--profile", profile], {
			detached: true,
			stdio: ["ignore", fd, fd],
			// The hub records who started it (`pi-telegram status`); with a service installed it
			// starts the service instead of serving beside it.
			env: { ...process.env, NO_COLOR: "1", PI_TELEGRAM_STARTED_BY: "extension" },
		});
		child.on("error", (e: NodeJS.ErrnoException) => {
			if (e.code === "ENOENT") {
				reports.failed(`the hub binary was not found: "${bin}" (from ${source}). To fix it, ${installHint()}.`);
			} else {
				reports.failed(`could not start the hub "${bin}" (from ${source}): ${e.message}`);
			}
		});
		child.on("exit", (code, signal) => {
			if (code === 0 || Date.now() - spawnedAt > EARLY_EXIT_MS) return;
			reports.exited(code, signal, child.pid);
		});
		child.unref();
	} catch (e) {
		reports.failed(`could not start the hub "${bin}" (from ${source}): ${errorText(e)}`);
	} finally {
		if (fd !== undefined) {
			try {
				fs.closeSync(fd);
			} catch (e) {
				reports.problem(`closing ${paths.log}`, e);
			}
		}
	}
}

/**
 * Whether `hub.lock` in `dir` names a live process other than `ours` (the hub records its pid
 * there): two pis started a hub at once, and the other one is coming up.
 */
export function otherHubAlive(dir: string, ours: number | undefined): boolean {
	let text: string;
	try {
		text = fs.readFileSync(path.join(dir, "hub.lock"), "utf8");
	} catch {
		return false; // no lock file: no other hub
	}
	const pid = Number.parseInt(text.trim(), 10);
	if (!Number.isInteger(pid) || pid <= 0 || pid === ours) return false;
	try {
		process.kill(pid, 0);
		return true;
	} catch (e) {
		return (e as NodeJS.ErrnoException).code === "EPERM";
	}
}
