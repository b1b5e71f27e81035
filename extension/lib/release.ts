/**
 * Which hub binary this extension starts, and of which release.
 *
 * Installed from npm (`pi install npm:pi-telegram`), the package brings the hub for this machine
 * in one of its optionalDependencies (`pi-telegram-linux-x64-gnu`, ...: npm installs the one whose
 * os/cpu/libc match). The binary is looked for there first; then `"hubBinary"` in telegram.json
 * (what `pi-telegram install-extension` writes); then `pi-telegram` on PATH. `$PI_TELEGRAM_BIN`
 * overrides all three.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { agentDir } from "./paths.ts";

/** The platform packages, by Node's `process.platform`-`process.arch`(-libc). */
const PLATFORM_PACKAGES: Readonly<Record<string, string>> = {
	"linux-x64-glibc": "pi-telegram-linux-x64-gnu",
	"linux-x64-musl": "pi-telegram-linux-x64-musl",
	"linux-arm64-glibc": "pi-telegram-linux-arm64-gnu",
	"darwin-arm64": "pi-telegram-darwin-arm64",
	"darwin-x64": "pi-telegram-darwin-x64",
};

/** This machine as the platform packages name it: `linux-x64-glibc`, `darwin-arm64`, ... */
export function platformKey(): string {
	const base = `${process.platform}-${process.arch}`;
	if (process.platform !== "linux") return base;
	// glibc reports its version to Node; musl (Alpine) does not.
	const header = (process.report?.getReport?.() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
	return `${base}-${header?.glibcVersionRuntime ? "glibc" : "musl"}`;
}

/** How the machine and arch read for a person: `linux x64 (musl)`. */
function platformText(key: string): string {
	const [os, arch, libc] = key.split("-");
	return `${os} ${arch}${libc ? ` (${libc})` : ""}`;
}

/** The folder of this extension's package (the one with its package.json). */
function packageDir(): string {
	// dist/lib/release.js (or lib/release.ts when pi loads the sources): two or one levels up.
	let dir = path.dirname(fileURLToPath(import.meta.url));
	for (let i = 0; i < 3; i++) {
		if (fs.existsSync(path.join(dir, "package.json"))) return dir;
		dir = path.dirname(dir);
	}
	return dir;
}

let version: string | undefined;

/** This extension's release: its package.json's `version`. */
export function ownVersion(): string {
	if (version === undefined) {
		try {
			const manifest: unknown = JSON.parse(fs.readFileSync(path.join(packageDir(), "package.json"), "utf8"));
			const v = manifest && typeof manifest === "object" && "version" in manifest ? manifest.version : undefined;
			version = typeof v === "string" ? v : "unknown";
		} catch {
			version = "unknown";
		}
	}
	return version;
}

/** The hub binary to start, where it was found, or why there is none to start. */
export type HubBinary = { bin: string; source: string; packaged: boolean } | { problem: string };

/** The binary of this package's platform package, if that package is installed. */
function packagedBinary(): HubBinary | undefined {
	const name = PLATFORM_PACKAGES[platformKey()];
	if (!name) return undefined;
	let manifest: string;
	try {
		manifest = createRequire(path.join(packageDir(), "package.json")).resolve(`${name}/package.json`);
	} catch {
		return undefined; // not installed (a local install of the extension): the next place
	}
	const bin = path.join(path.dirname(manifest), "bin", "pi-telegram");
	const source = `the ${name} package`;
	try {
		fs.accessSync(bin, fs.constants.X_OK);
	} catch (e) {
		const why = (e as NodeJS.ErrnoException).code === "ENOENT" ? "is missing" : "is not executable";
		return {
			// `pi install` alone keeps an installed package as it is, broken or not.
			problem: `the hub binary of ${source} ${why} (${bin}): reinstall pi-telegram with \`pi remove npm:pi-telegram\`, then \`pi install npm:pi-telegram\``,
		};
	}
	return { bin, source, packaged: true };
}

/** `"hubBinary"` in telegram.json, if set; a file that cannot be read says why. */
function configuredBinary(dir: string): HubBinary | { note: string } | undefined {
	const file = path.join(dir, "telegram.json");
	try {
		const cfg: unknown = JSON.parse(fs.readFileSync(file, "utf8"));
		if (cfg && typeof cfg === "object" && "hubBinary" in cfg && typeof cfg.hubBinary === "string" && cfg.hubBinary) {
			return { bin: cfg.hubBinary, source: `"hubBinary" in ${file}`, packaged: false };
		}
	} catch (e) {
		if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
			return { note: ` (${file} could not be read: ${e instanceof Error ? e.message : String(e)})` };
		}
	}
	return undefined;
}

/** Whether `pi-telegram` is an executable file in a PATH folder. */
function onPath(): boolean {
	for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
		if (!dir) continue;
		try {
			fs.accessSync(path.join(dir, "pi-telegram"), fs.constants.X_OK);
			return true;
		} catch {
			// not in this folder
		}
	}
	return false;
}

/** How to get a hub when none was found, for this machine. */
export function installHint(): string {
	if (PLATFORM_PACKAGES[platformKey()]) {
		return "install pi-telegram with `pi install npm:pi-telegram` (it brings the hub), or build it with `cargo install pi-telegram`";
	}
	return `pi-telegram has no prebuilt hub for ${platformText(platformKey())}: build it with \`cargo install pi-telegram\` (a Rust toolchain is needed) so \`pi-telegram\` is on PATH`;
}

/** The hub binary to start: see the module's docs for the order. */
export function hubBinary(): HubBinary {
	const env = process.env.PI_TELEGRAM_BIN;
	if (env) return { bin: env, source: "PI_TELEGRAM_BIN", packaged: false };
	const packaged = packagedBinary();
	if (packaged) return packaged;
	const configured = configuredBinary(agentDir());
	if (configured && "bin" in configured) return configured;
	const note = configured && "note" in configured ? configured.note : "";
	if (!onPath()) return { problem: `no hub binary was found${note}: ${installHint()}` };
	return { bin: "pi-telegram", source: `PATH${note}`, packaged: false };
}

/** What `bin --version` says its release is, or undefined (it could not say). */
export function binaryVersion(bin: string): Promise<string | undefined> {
	return new Promise((resolve) => {
		try {
			execFile(bin, ["--version"], { timeout: 10_000, env: { ...process.env, NO_COLOR: "1" } }, (err, stdout) => {
				const m = err ? null : /^pi-telegram (\S+)/.exec(String(stdout).trim());
				resolve(m?.[1]);
			});
		} catch {
			resolve(undefined);
		}
	});
}
