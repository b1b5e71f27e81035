import { execFile } from "node:child_process";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { agentDir } from "./paths.js";
const PLATFORM_PACKAGES = {
    "linux-x64-glibc": "pi-telegram-linux-x64-gnu",
    "linux-x64-musl": "pi-telegram-linux-x64-musl",
    "linux-arm64-glibc": "pi-telegram-linux-arm64-gnu",
    "darwin-arm64": "pi-telegram-darwin-arm64",
    "darwin-x64": "pi-telegram-darwin-x64",
};
export function platformKey() {
    const base = `${process.platform}-${process.arch}`;
    if (process.platform !== "linux")
        return base;
    const header = process.report?.getReport?.()?.header;
    return `${base}-${header?.glibcVersionRuntime ? "glibc" : "musl"}`;
}
function platformText(key) {
    const [os, arch, libc] = key.split("-");
    return `${os} ${arch}${libc ? ` (${libc})` : ""}`;
}
function packageDir() {
    let dir = path.dirname(fileURLToPath(import.meta.url));
    for (let i = 0; i < 3; i++) {
        if (fs.existsSync(path.join(dir, "package.json")))
            return dir;
        dir = path.dirname(dir);
    }
    return dir;
}
let version;
export function ownVersion() {
    if (version === undefined) {
        try {
            const manifest = JSON.parse(fs.readFileSync(path.join(packageDir(), "package.json"), "utf8"));
            const v = manifest && typeof manifest === "object" && "version" in manifest ? manifest.version : undefined;
            version = typeof v === "string" ? v : "unknown";
        }
        catch {
            version = "unknown";
        }
    }
    return version;
}
function packagedBinary() {
    const name = PLATFORM_PACKAGES[platformKey()];
    if (!name)
        return undefined;
    let manifest;
    try {
        manifest = createRequire(path.join(packageDir(), "package.json")).resolve(`${name}/package.json`);
    }
    catch {
        return undefined;
    }
    const bin = path.join(path.dirname(manifest), "bin", "pi-telegram");
    const source = `the ${name} package`;
    try {
        fs.accessSync(bin, fs.constants.X_OK);
    }
    catch (e) {
        const why = e.code === "ENOENT" ? "is missing" : "is not executable";
        return {
            problem: `the hub binary of ${source} ${why} (${bin}): reinstall pi-telegram with \`pi remove npm:pi-telegram\`, then \`pi install npm:pi-telegram\``,
        };
    }
    return { bin, source, packaged: true };
}
function configuredBinary(dir) {
    const file = path.join(dir, "telegram.json");
    try {
        const cfg = JSON.parse(fs.readFileSync(file, "utf8"));
        if (cfg && typeof cfg === "object" && "hubBinary" in cfg && typeof cfg.hubBinary === "string" && cfg.hubBinary) {
            return { bin: cfg.hubBinary, source: `"hubBinary" in ${file}`, packaged: false };
        }
    }
    catch (e) {
        if (e.code !== "ENOENT") {
            return { note: ` (${file} could not be read: ${e instanceof Error ? e.message : String(e)})` };
        }
    }
    return undefined;
}
function onPath() {
    for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
        if (!dir)
            continue;
        try {
            fs.accessSync(path.join(dir, "pi-telegram"), fs.constants.X_OK);
            return true;
        }
        catch {
        }
    }
    return false;
}
export function installHint() {
    if (PLATFORM_PACKAGES[platformKey()]) {
        return "install pi-telegram with `pi install npm:pi-telegram` (it brings the hub), or build it with `cargo install pi-telegram`";
    }
    return `pi-telegram has no prebuilt hub for ${platformText(platformKey())}: build it with \`cargo install pi-telegram\` (a Rust toolchain is needed) so \`pi-telegram\` is on PATH`;
}
export function hubBinary() {
    const env = process.env.PI_TELEGRAM_BIN;
    if (env)
        return { bin: env, source: "PI_TELEGRAM_BIN", packaged: false };
    const packaged = packagedBinary();
    if (packaged)
        return packaged;
    const configured = configuredBinary(agentDir());
    if (configured && "bin" in configured)
        return configured;
    const note = configured && "note" in configured ? configured.note : "";
    if (!onPath())
        return { problem: `no hub binary was found${note}: ${installHint()}` };
    return { bin: "pi-telegram", source: `PATH${note}`, packaged: false };
}
export function binaryVersion(bin) {
    return new Promise((resolve) => {
        try {
            execFile(bin, ["--version"], { timeout: 10_000, env: { ...process.env, NO_COLOR: "1" } }, (err, stdout) => {
                const m = err ? null : /^pi-telegram (\S+)/.exec(String(stdout).trim());
                resolve(m?.[1]);
            });
        }
        catch {
            resolve(undefined);
        }
    });
}
