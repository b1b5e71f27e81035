import * as fs from "node:fs";
import * as os from "node:os";
let cached;
export function thisMachine() {
    if (cached !== undefined)
        return cached;
    for (const p of ["/etc/machine-id", "/var/lib/dbus/machine-id"]) {
        try {
            const id = fs.readFileSync(p, "utf8").trim();
            if (id !== "" && id.length <= 128)
                return (cached = id);
        }
        catch {
        }
    }
    return (cached = `host:${os.hostname()}`);
}
