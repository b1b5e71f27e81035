import * as fs from "node:fs";
import * as path from "node:path";
import { agentDir } from "./paths.js";
const KEEP = 20;
export function errorText(e) {
    return e instanceof Error ? e.message : String(e);
}
export class Problems {
    recent = [];
    debugFile;
    constructor() {
        this.debugFile = process.env.PI_TELEGRAM_DEBUG ? path.join(agentDir(), "telegram", "extension-debug.log") : undefined;
    }
    record(where, e) {
        const line = `${new Date().toISOString()} ${where}: ${errorText(e)}`;
        this.keep(line);
        if (!this.debugFile)
            return;
        try {
            fs.mkdirSync(path.dirname(this.debugFile), { recursive: true, mode: 0o700 });
            fs.appendFileSync(this.debugFile, `${line}\n`, { mode: 0o600 });
        }
        catch (err) {
            this.keep(`${new Date().toISOString()} debug log ${this.debugFile}: ${errorText(err)}`);
        }
    }
    list() {
        return this.recent;
    }
    guard(where, fn) {
        return (...args) => {
            try {
                return fn(...args);
            }
            catch (e) {
                this.record(where, e);
                return undefined;
            }
        };
    }
    keep(line) {
        this.recent.push(line);
        if (this.recent.length > KEEP)
            this.recent.splice(0, this.recent.length - KEEP);
    }
}
