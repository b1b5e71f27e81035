import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
export const DEFAULT_PROFILE = "default";
export function agentDir() {
    const fromEnv = process.env.PI_CODING_AGENT_DIR;
    if (fromEnv)
        return path.resolve(fromEnv);
    return path.join(os.homedir(), ".pi", "agent");
}
export function isProfileName(name) {
    return /^[a-z0-9]{1,32}$/.test(name);
}
export function profilePaths(profile) {
    const dir = path.join(agentDir(), "telegram", profile);
    return {
        dir,
        socket: path.join(dir, "hub.sock"),
        secret: path.join(dir, "hub.secret"),
        log: path.join(dir, "hub.log"),
        stopped: path.join(dir, "hub.stopped"),
    };
}
export function ensurePrivateDir(dir) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
}
export function lastLine(file) {
    try {
        const fd = fs.openSync(file, "r");
        try {
            const size = fs.fstatSync(fd).size;
            const len = Math.min(size, 16384);
            const buf = Buffer.alloc(len);
            fs.readSync(fd, buf, 0, len, size - len);
            const lines = buf
                .toString("utf8")
                .replace(/\x1b\[[0-9;]*[A-Za-z]/g, "")
                .split("\n")
                .map((l) => l.trim())
                .filter((l) => l.length > 0);
            return lines[lines.length - 1];
        }
        finally {
            fs.closeSync(fd);
        }
    }
    catch {
        return undefined;
    }
}
