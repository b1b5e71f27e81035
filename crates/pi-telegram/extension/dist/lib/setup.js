import { execFile } from "node:child_process";
import { errorText } from "./log.js";
import { DEFAULT_PROFILE, isProfileName } from "./paths.js";
import { hubBinary, installHint } from "./release.js";
import { SecretInput } from "./secret-input.js";
const EXIT_UNAUTHORIZED = 5;
export async function telegramSetup(s, args, c, current) {
    const profile = (args ?? "").trim() || current.profile || DEFAULT_PROFILE;
    if (!isProfileName(profile)) {
        s.notify(`"${profile}" is not a profile name (1-32 lowercase letters or digits)`, "error", c);
        return;
    }
    const found = hubBinary();
    if ("problem" in found) {
        s.notify(`telegram-setup: ${found.problem}`, "error", c);
        return;
    }
    const { bin, source } = found;
    const title = `Telegram bot token for profile ${profile} (from @BotFather)`;
    const typed = c.mode === "tui"
        ? await c.ui.custom((_tui, _theme, _keys, done) => new SecretInput(title, done))
        : await c.ui.input(title, "123456789:AA…");
    const token = typed?.trim();
    if (!token) {
        s.notify("telegram-setup: cancelled", "info", c);
        return;
    }
    const res = await run(bin, ["setup", "--profile", profile, "--json"], { TELEGRAM_BOT_TOKEN: token });
    if (res.notFound) {
        s.notify(`telegram-setup: the hub binary was not found: "${bin}" (from ${source}). To fix it, ${installHint()}.`, "error", c);
        return;
    }
    if (res.code === EXIT_UNAUTHORIZED) {
        s.notify("telegram-setup: Telegram refused this token (401 Unauthorized), so nothing was saved. Copy it again from @BotFather (/mybots → your bot → API Token) and run /telegram-setup again.", "error", c);
        return;
    }
    if (res.code !== 0) {
        const why = lastNonEmpty(res.stderr) ?? lastNonEmpty(res.stdout) ?? `exit code ${res.code}`;
        s.notify(`telegram-setup failed: ${why}`, "error", c);
        return;
    }
    let report;
    try {
        const parsed = JSON.parse(lastNonEmpty(res.stdout) ?? "");
        if (!parsed || typeof parsed !== "object")
            throw new Error("not a JSON object");
        report = parsed;
    }
    catch {
        s.notify(`telegram-setup: unexpected output from ${bin}: ${lastNonEmpty(res.stdout) ?? "(none)"}`, "error", c);
        return;
    }
    const bot = `@${String(report.bot_username ?? "?")}`;
    const parts = [`telegram: bot ${bot} is set up for profile ${profile}.`];
    if (report.pairing_code) {
        parts.push(`Pair with it: send /start ${String(report.pairing_code)} to ${bot} in Telegram (the code is valid for 10 minutes).`);
    }
    else {
        parts.push("Its owner is already paired.");
    }
    if (report.has_topics_enabled === false) {
        parts.push("Tip: turn on Threaded Mode for the bot in @BotFather to get one thread per pi.");
    }
    if (!current.connected)
        parts.push(`Then run /telegram-connect${profile === DEFAULT_PROFILE ? "" : ` ${profile}`}.`);
    s.notify(parts.join("\n"), "info", c);
}
function lastNonEmpty(text) {
    const lines = text
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l.length > 0);
    return lines[lines.length - 1];
}
function run(bin, args, extraEnv = {}) {
    return new Promise((resolve) => {
        try {
            execFile(bin, args, { timeout: 60_000, maxBuffer: 1024 * 1024, env: { ...process.env, ...extraEnv, NO_COLOR: "1" } }, (err, stdout, stderr) => {
                const e = err;
                if (e && e.code === "ENOENT") {
                    resolve({ code: -1, stdout: "", stderr: "", notFound: true });
                    return;
                }
                const code = e ? (typeof e.code === "number" ? e.code : 1) : 0;
                resolve({ code, stdout: String(stdout ?? ""), stderr: String(stderr ?? ""), notFound: false });
            });
        }
        catch (e) {
            resolve({ code: 1, stdout: "", stderr: errorText(e), notFound: false });
        }
    });
}
