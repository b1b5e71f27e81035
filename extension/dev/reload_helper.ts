/** A second extension for smoke.py: `/dev-reload` runs pi's reload (RPC mode has no /reload). */
import type { ExtensionAPI, ExtensionCommandContext } from "@earendil-works/pi-coding-agent";

export default function reloadHelper(pi: ExtensionAPI): void {
	pi.registerCommand("dev-reload", {
		description: "reload extensions (smoke test helper)",
		handler: async (_args: string, c: ExtensionCommandContext) => {
			await c.reload();
		},
	});
}
