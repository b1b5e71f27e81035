/**
 * Which machine this pi runs on, in the hub's words (`crates/hub/src/machine.rs`): the hub
 * holds what it tells a pi of another machine to its disk first, since that pi outlives a
 * crash of the hub's machine. A socket forwarded over SSH looks local; this tells them apart.
 */
import * as fs from "node:fs";
import * as os from "node:os";

let cached: string | undefined;

/** `/etc/machine-id` (or dbus's copy), else `host:<hostname>`. */
export function thisMachine(): string {
	if (cached !== undefined) return cached;
	for (const p of ["/etc/machine-id", "/var/lib/dbus/machine-id"]) {
		try {
			const id = fs.readFileSync(p, "utf8").trim();
			if (id !== "" && id.length <= 128) return (cached = id);
		} catch {
			// Not there (macOS, some containers): the next source.
		}
	}
	return (cached = `host:${os.hostname()}`);
}
