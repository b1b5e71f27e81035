import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { errorText } from "./log.js";
import { agentDir, ensurePrivateDir } from "./paths.js";
import { hubBinary, installHint } from "./release.js";
const EARLY_EXIT_MS = 60_000;
export function spawnHub(profile, paths, reports) {
    const agent = agentDir();
    if (!fs.existsSync(agent)) {
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
    let fd;
    try {
        ensurePrivateDir(paths.dir);
        fd = fs.openSync(paths.log, "a", 0o600);
        const child = spawn(bin, ["serve", "--profile", profile], {
            detached: true,
            stdio: ["ignore", fd, fd],
            env: { ...process.env, NO_COLOR: "1", PI_TELEGRAM_STARTED_BY: "extension" },
        });
        child.on("error", (e) => {
            if (e.code === "ENOENT") {
                reports.failed(`the hub binary was not found: "${bin}" (from ${source}). To fix it, ${installHint()}.`);
            }
            else {
                reports.failed(`could not start the hub "${bin}" (from ${source}): ${e.message}`);
            }
        });
        child.on("exit", (code, signal) => {
            if (code === 0 || Date.now() - spawnedAt > EARLY_EXIT_MS)
                return;
            reports.exited(code, signal, child.pid);
        });
        child.unref();
    }
    catch (e) {
        reports.failed(`could not start the hub "${bin}" (from ${source}): ${errorText(e)}`);
    }
    finally {
        if (fd !== undefined) {
            try {
                fs.closeSync(fd);
            }
            catch (e) {
                reports.problem(`closing ${paths.log}`, e);
            }
        }
    }
}
export function otherHubAlive(dir, ours) {
    let text;
    try {
        text = fs.readFileSync(path.join(dir, "hub.lock"), "utf8");
    }
    catch {
        return false;
    }
    const pid = Number.parseInt(text.trim(), 10);
    if (!Number.isInteger(pid) || pid <= 0 || pid === ours)
        return false;
    try {
        process.kill(pid, 0);
        return true;
    }
    catch (e) {
        return e.code === "EPERM";
    }
}
