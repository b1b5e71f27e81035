//! Which keys of `telegram.json` this hub reads, so that a file written for the reference
//! system (or with a typo) says plainly what is not used: one warning per such key, none for a
//! key that works. Unknown keys stay in the file untouched; the warning only names them.

use serde_json::{Map, Value};

/// Keys read at the top level and in a profile.
const SHARED: &[&str] = &[
    "apiBase",
    "pairing",
    "pacing",
    "historyRetentionDays",
    "fileRetentionDays",
    "threadRetentionDays",
    "threadTitle",
    "workspaces",
    "people",
    "memberControls",
    "staleAfterMinutes",
    "notifications",
    "assistant",
    "voice",
    "time",
    "threads",
    "inboundHandlers",
    "attachmentHandlers",
    "outboundHandlers",
    "piBinary",
    "hubBinary",
    "inboundFileMaxBytes",
    "outboundAttachmentMaxBytes",
    // The bot's identity: `botUsername`, `botId` and `lastUpdateId` are the reference's
    // runtime records, read and kept.
    "botToken",
    "botUsername",
    "botId",
    "allowedUserId",
    "lastUpdateId",
];

/// Keys of the objects under a known key.
const NESTED: &[(&str, &[&str])] = &[
    (
        "assistant",
        &[
            "rendering",
            "draftPreviews",
            "activity",
            "proactivePush",
            "timeInjection",
            "reactions",
        ],
    ),
    ("voice", &["replyMode", "sendTranscript"]),
    ("time", &["interval"]),
    ("threads", &["automaticCleanup"]),
    (
        "remote",
        &["listen", "connect", "socket", "fingerprint", "secret"],
    ),
];

/// Keys the reference system documents that this hub does not use, and what to do instead.
const REFERENCE_ONLY: &[(&str, &str)] = &[
    (
        "followerProbeTimeoutMs",
        "the reference's follower bus; here every pi talks to the hub directly, with no \
         followers to probe",
    ),
    (
        "assistant.activityVerbosity",
        "the reference's older name; set assistant.activity (quiet, thinking, tools, verbose)",
    ),
    (
        "proactivePush",
        "at the top level the reference ignores it too; set assistant.proactivePush",
    ),
];

/// One warning per key of `doc` (the whole file) this hub does not use.
pub fn unused(doc: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in doc {
        if key == "profiles" {
            let Some(profiles) = value.as_object() else {
                continue;
            };
            for (name, p) in profiles {
                if let Some(p) = p.as_object() {
                    scope(&format!("profiles.{name}."), p, true, &mut out);
                }
            }
            continue;
        }
        one(key, value, "", false, &mut out);
    }
    out
}

fn scope(prefix: &str, obj: &Map<String, Value>, profile: bool, out: &mut Vec<String>) {
    for (key, value) in obj {
        one(key, value, prefix, profile, out);
    }
}

fn one(key: &str, value: &Value, prefix: &str, profile: bool, out: &mut Vec<String>) {
    let known = SHARED.contains(&key) || (profile && key == "remote");
    if !known {
        out.push(warning(&format!("{prefix}{key}"), key));
        return;
    }
    let Some((_, subkeys)) = NESTED.iter().find(|(k, _)| *k == key) else {
        return;
    };
    let Some(obj) = value.as_object() else {
        return;
    };
    for sub in obj.keys().filter(|s| !subkeys.contains(&s.as_str())) {
        out.push(warning(
            &format!("{prefix}{key}.{sub}"),
            &format!("{key}.{sub}"),
        ));
    }
}

/// The warning for `path` (as written), whose key without the profile is `bare`.
fn warning(path: &str, bare: &str) -> String {
    match REFERENCE_ONLY.iter().find(|(k, _)| *k == bare) {
        Some((_, instead)) => format!("{path} is not used by this hub: {instead}"),
        None => {
            format!("{path} is not a setting this hub knows; it is ignored (and kept in the file)")
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// Every key the reference 0.42 documents for telegram.json, as it writes them.
    fn reference_file() -> Value {
        json!({
            "profiles": { "default": {
                "botToken": "123:AA", "botUsername": "my_bot", "botId": 123,
                "allowedUserId": 42, "lastUpdateId": 7
            }},
            "inboundHandlers": [], "attachmentHandlers": [], "outboundHandlers": [],
            "assistant": {
                "draftPreviews": true, "rendering": "rich", "activity": "verbose",
                "timeInjection": "interval", "activityVerbosity": "verbose"
            },
            "voice": { "replyMode": "manual" },
            "time": { "interval": 1_800_000 },
            "threads": { "automaticCleanup": true },
            "followerProbeTimeoutMs": 5000
        })
    }

    #[test]
    fn the_references_file_warns_only_for_what_is_not_used_here() {
        let doc = reference_file();
        let warnings = unused(doc.as_object().unwrap());
        assert_eq!(warnings.len(), 2, "{warnings:#?}");
        assert!(warnings[0].starts_with("assistant.activityVerbosity is not used by this hub: "));
        assert!(warnings[1].starts_with("followerProbeTimeoutMs is not used by this hub: "));
    }

    #[test]
    fn a_typo_is_named_with_its_place() {
        let doc = json!({
            "profiles": { "work": { "botToken": "1:A", "remote": { "lisen": "0.0.0.0:1" }, "pacng": {} } },
            "notification": "all",
            "remote": {}
        });
        let mut warnings = unused(doc.as_object().unwrap());
        warnings.sort();
        assert_eq!(
            warnings,
            [
                "notification is not a setting this hub knows; it is ignored (and kept in the file)",
                "profiles.work.pacng is not a setting this hub knows; it is ignored (and kept in the file)",
                "profiles.work.remote.lisen is not a setting this hub knows; it is ignored (and kept in the file)",
                "remote is not a setting this hub knows; it is ignored (and kept in the file)",
            ]
        );
    }
}
