//! Upgrades: a database of every earlier schema version opens with this build, its data intact,
//! and a database from a newer version is refused with a clear message and left untouched.
//!
//! `tests/fixtures/v<N>.sql` is a full dump (schema as SQLite stored it, rows, AUTOINCREMENT
//! counters) of a database at schema version N holding the rows of [`ROWS`] that version had.
//! The dumps are text so a review sees what they hold; they are written once by
//! `cargo test -p pi-telegram-store --test upgrade -- --ignored write_missing_fixtures` when a
//! migration is added and never rewritten, so they keep the schema as it was released: the tests check that
//! each fixture's schema is what `migrate_to(N)` makes today (a released migration was not
//! edited) and that upgrading it gives exactly the schema of a new database.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use store::schema::{self, CURRENT};
use store::{
    Connection, Store, StoreError, callbacks, controls, files, flood, incidents, instances,
    journal, kv, lease, outbox, pairing, routes, threads, turns,
};

/// Rows a version's tables held, inserted with that version's columns.
struct Rows {
    /// The first version with these rows.
    since: i64,
    /// The last version with the table (`held` went in version 2).
    until: i64,
    table: &'static str,
    columns: &'static str,
    /// SQL value tuples.
    values: &'static [&'static str],
}

/// Representative rows of every table, from the version that introduced them (or the columns
/// they gained).
const ROWS: &[Rows] = &[
    // 1: journal, kv (offset, owner, bot), pairing, outbox, flood waits, held messages,
    // incidents, the lease.
    Rows {
        since: 1,
        until: i64::MAX,
        table: "kv",
        columns: "key, value",
        values: &[
            "('poll.offset', '1004')",
            "('owner.user_id', '42')",
            "('bot.id', '1000')",
            "('bot.username', 'fixture_bot')",
        ],
    },
    Rows {
        since: 1,
        until: i64::MAX,
        table: "journal",
        columns: "update_id, kind, raw, received_ms, handled_ms, outcome",
        values: &[
            r#"(1001, 'message', '{"update_id":1001,"message":{"message_id":1,"chat":{"id":42,"type":"private"},"from":{"id":42},"text":"hello"}}', 1700000000000, 1700000000050, 'turn')"#,
            r#"(1002, 'message', '{"update_id":1002,"message":{"message_id":2,"chat":{"id":42,"type":"private"},"from":{"id":42},"text":"not handled yet"}}', 1700000000100, NULL, NULL)"#,
            r#"(1003, 'message', '{"update_id":1003,"message":{"message_id":3,"chat":{"id":42,"type":"private"},"from":{"id":42},"text":"kept text"}}', 1700000000200, 1700000000250, 'held')"#,
        ],
    },
    Rows {
        since: 1,
        until: i64::MAX,
        table: "pairing",
        columns: "id, code_hash, created_ms, expires_ms, attempts_left, state",
        values: &[
            "(1, '9f86d081884c7d659a2feaa0c55ad015', 1700000000000, 1700000600000, 2, 'used')",
        ],
    },
    Rows {
        since: 1,
        until: 11,
        table: "outbox",
        columns: "id, created_ms, updated_ms, chat_id, thread_id, method, params, purpose, source_update_id, resend_if_unknown, state, attempts, not_before_ms, sent_message_id, last_error, handling",
        values: &[
            r#"(1, 1700000000060, 1700000000070, 42, NULL, 'sendMessage', '{"chat_id":42,"text":"sent"}', 'reply:help', 1001, 0, 'sent', 1, 0, 501, NULL, NULL)"#,
            r#"(2, 1700000000110, 1700000000110, 42, NULL, 'sendMessage', '{"chat_id":42,"text":"waits"}', 'notice:held', NULL, 0, 'pending', 0, 1700000009000, NULL, 'timeout', NULL)"#,
            r#"(3, 1700000000120, 1700000000130, 42, 7, 'sendMessage', '{"chat_id":42,"text":"unknown"}', 'answer', 1002, 1, 'ambiguous', 2, 0, NULL, 'connection reset', 'not resent')"#,
        ],
    },
    Rows {
        since: 1,
        until: i64::MAX,
        table: "flood_waits",
        columns: "scope, until_ms, retry_after_s, recorded_ms",
        values: &["('chat:42', 1700000005000, 5, 1700000000000)"],
    },
    Rows {
        since: 1,
        until: 1,
        table: "held",
        columns: "update_id, chat_id, thread_id, message_id, received_ms",
        values: &["(1003, 42, NULL, 3, 1700000000200)"],
    },
    Rows {
        since: 1,
        until: i64::MAX,
        table: "incidents",
        columns: "id, at_ms, context, message",
        values: &["(1, 1700000000300, 'send', 'flood wait of 5 s for chat:42')"],
    },
    Rows {
        since: 1,
        until: i64::MAX,
        table: "lease",
        columns: "id, epoch, holder_pid, acquired_ms",
        values: &["(1, 3, 4242, 1700000000000)"],
    },
    // 2: instances, turns, reply routes, buttons; outbox rows speak for an identity and a turn.
    Rows {
        since: 2,
        until: i64::MAX,
        table: "instances",
        columns: "id, identity, transport, pid, cwd, label, session_id, state, connected_ms, gone_ms, gone_reason",
        values: &[
            "('i1', '/home/p/project', 'shim', 4243, '/home/p/project', 'project', 'sess-1', 'gone', 1700000001000, 1700000002000, 'exited')",
            "('i2', '/home/p/project', 'rpc', 4244, '/home/p/project', 'project', NULL, 'idle', 1700000003000, NULL, NULL)",
        ],
    },
    Rows {
        since: 2,
        until: i64::MAX,
        table: "turns",
        columns: "id, source_update_id, chat_id, thread_id, message_id, identity, text, state, instance_id, instance_pid, transport, created_ms, dispatched_ms, acked_ms, done_ms, result_text, aborted, error",
        values: &[
            "(10, 1001, 42, NULL, 1, '/home/p/project', 'hello', 'done', 'i1', 4243, 'shim', 1700000000050, 1700000000060, 1700000000070, 1700000000900, 'an answer', 0, NULL)",
            "(11, 1101, 42, 7, 11, '/home/p/project', 'in flight', 'acked', 'i2', 4244, 'rpc', 1700000003100, 1700000003200, 1700000003300, NULL, NULL, NULL, NULL)",
        ],
    },
    Rows {
        since: 2,
        until: i64::MAX,
        table: "message_routes",
        columns: "chat_id, message_id, identity, turn_id",
        values: &["(42, 501, '/home/p/project', 10)"],
    },
    Rows {
        since: 2,
        until: i64::MAX,
        table: "callbacks",
        columns: "token, owner, action, created_ms, expires_ms",
        values: &[r#"('tk1', 42, '{"select":"/home/p/project"}', 1700000000000, 4102444800000)"#],
    },
    Rows {
        since: 2,
        until: 11,
        table: "outbox",
        columns: "id, created_ms, updated_ms, chat_id, method, params, purpose, source_update_id, resend_if_unknown, state, identity, turn_id",
        values: &[
            r#"(10, 1700000000900, 1700000000900, 42, 'sendMessage', '{"chat_id":42,"text":"an answer"}', 'answer:0', 1001, 1, 'pending', '/home/p/project', 10)"#,
        ],
    },
    // 3: Threaded Mode: bindings, intents, evidence, cleanups.
    Rows {
        since: 3,
        until: i64::MAX,
        table: "bindings",
        columns: "identity, chat_id, thread_id, slot, title, state, instance_id, cwd, epoch, created_ms, updated_ms, offline_since_ms",
        values: &[
            "('/home/p/project', -100123, 77, 'A', 'A · project', 'offline', NULL, '/home/p/project', 3, 1700000000000, 1700000002000, 1700000002000)",
        ],
    },
    Rows {
        since: 3,
        until: i64::MAX,
        table: "intents",
        columns: "id, identity, instance_id, chat_id, cwd, slot, title, epoch, state, thread_id, created_ms, detail",
        values: &[
            "(1, '/home/p/other', 'i2', -100123, '/home/p/other', 'B', 'B · other', 3, 'ambiguous', NULL, 1700000000000, 'the outcome is unknown')",
        ],
    },
    Rows {
        since: 3,
        until: i64::MAX,
        table: "evidence",
        columns: "intent_id, identity, epoch, chat_id, thread_id, recorded_ms",
        values: &["(1, '/home/p/other', 3, -100123, 78, 1700000000500)"],
    },
    Rows {
        since: 3,
        until: i64::MAX,
        table: "cleanups",
        columns: "id, chat_id, thread_id, proof, state, attempts, next_ms, last_error, created_ms, done_ms",
        values: &[
            "(1, -100123, 79, 'disconnected:/home/p/old', 'done', 1, 0, NULL, 1700000000000, 1700000000400)",
            "(2, -100123, 80, 'replaced:/home/p/older', 'pending', 2, 1700000009000, 'timeout', 1700000000000, NULL)",
        ],
    },
    // 4: what an unassigned turn waits for; copies sent again.
    Rows {
        since: 4,
        until: i64::MAX,
        table: "turns",
        columns: "id, source_update_id, chat_id, message_id, identity, waits, text, state, created_ms",
        values: &["(12, 1102, 42, 12, NULL, 'choice', 'which pi?', 'queued', 1700000004000)"],
    },
    Rows {
        since: 4,
        until: 11,
        table: "outbox",
        columns: "id, created_ms, updated_ms, chat_id, method, params, purpose, state, resent, resend_if_unknown",
        values: &[
            r#"(11, 1700000004000, 1700000004100, 42, 'sendMessage', '{"chat_id":42,"text":"again"}', 'answer:1', 'sent', 1, 1)"#,
        ],
    },
    // 5: delivery plans.
    Rows {
        since: 5,
        until: 11,
        table: "outbox",
        columns: "id, created_ms, updated_ms, chat_id, method, params, purpose, state, plan",
        values: &[
            r#"(12, 1700000005000, 1700000005000, 42, 'sendMessage', '{"chat_id":42,"text":"<b>rich</b>","parse_mode":"HTML"}', 'answer:2', 'pending', '{"alternatives":[[{"method":"sendMessage","params":{"text":"<b>rich</b>","parse_mode":"HTML"}}],[{"method":"sendMessage","params":{"text":"rich"}}]],"alt":0,"part":0}')"#,
        ],
    },
    // 6: lanes, skips, controls.
    Rows {
        since: 6,
        until: i64::MAX,
        table: "turns",
        columns: "id, source_update_id, chat_id, message_id, identity, text, state, created_ms, lane, lane_seq, skip",
        values: &[
            "(13, 1103, 42, 13, '/home/p/project', 'first, please', 'queued', 1700000006000, 'priority', 40, 0)",
            "(14, 1104, 42, 14, '/home/p/project', 'never mind', 'queued', 1700000006100, 'normal', 41, 1)",
        ],
    },
    Rows {
        since: 6,
        until: i64::MAX,
        table: "controls",
        columns: "id, source_update_id, kind, identity, turn_id, chat_id, thread_id, message_id, params, state, created_ms, done_ms",
        values: &[
            "(1, 1105, 'abort', '/home/p/project', 11, 42, NULL, 15, '{}', 'done', 1700000006200, 1700000006300)",
            r#"(2, 1106, 'set_model', '/home/p/project', NULL, 42, NULL, 16, '{"model":"fake/model"}', 'pending', 1700000006400, NULL)"#,
        ],
    },
    // 7: turns that wait for their files or group; files.
    Rows {
        since: 7,
        until: i64::MAX,
        table: "turns",
        columns: "id, source_update_id, chat_id, message_id, identity, text, state, created_ms, lane_seq, ready, context, group_key, gather_until_ms",
        values: &[
            "(15, 1107, 42, 17, '/home/p/project', 'look at this', 'queued', 1700000007000, 42, 0, '[forward|from: someone]', 'album:42:9', 1700000007500)",
        ],
    },
    Rows {
        since: 7,
        until: i64::MAX,
        table: "files",
        columns: "id, turn_id, source_update_id, seq, origin, kind, file_id, file_unique_id, name, mime, size, state, path, error, output, attempts, not_before_ms, created_ms, done_ms",
        values: &[
            "(1, 15, 1107, 0, 'message', 'photo', 'AgACAgIAAxk', 'AQADuniq', 'photo.jpg', 'image/jpeg', 12345, 'saved', '/tmp/telegram/default/photo.jpg', NULL, NULL, 1, 0, 1700000007000, 1700000007100)",
            "(2, 15, 1107, 1, 'forward', 'document', 'BQACAgIAAxk', NULL, 'big.zip', 'application/zip', 999999999, 'refused', NULL, 'over the limit', NULL, 0, 0, 1700000007000, 1700000007100)",
        ],
    },
    // 8: files pi attaches, waiting for the turn's answer.
    Rows {
        since: 8,
        until: i64::MAX,
        table: "attachments",
        columns: "id, turn_id, path, name, mime, size, caption, state, created_ms",
        values: &[
            "(1, 11, '/tmp/telegram/default/out/report.pdf', 'report.pdf', 'application/pdf', 2048, 'the report', 'waiting', 1700000008000)",
        ],
    },
    // 9: headless pi the hub started, to start again after a restart.
    Rows {
        since: 9,
        until: i64::MAX,
        table: "spawned",
        columns: "id, cwd, env, session_file, instance_id, state, detail, created_ms, updated_ms",
        values: &[
            "(1, '/home/a/code/web', '[[\"PATH\",\"/usr/bin\"]]', '/home/a/.pi/agent/sessions/--home-a-code-web--/s1.jsonl', 'i3', 'running', NULL, 1700000009000, 1700000009000)",
            "(2, '/home/a/code/gone', '[]', NULL, 'i4', 'lost', 'its folder no longer exists', 1700000009000, 1700000009500)",
        ],
    },
    // 11: wrong pairing codes per sender.
    Rows {
        since: 11,
        until: i64::MAX,
        table: "pairing_attempts",
        columns: "user_id, wrong, first_ms, last_ms",
        values: &["(777, 5, 1700000011000, 1700000011400)"],
    },
    // 11, as version 12 found them: a plan of today's shape, moved on to its HTML
    // alternative's second message after a refusal and sent again, its row moved to the main
    // chat (the current message's place is the row's, the plan's message not); a plan of no
    // known shape (sent as its parameters).
    Rows {
        since: 11,
        until: 11,
        table: "outbox",
        columns: "id, created_ms, updated_ms, chat_id, thread_id, method, params, purpose, state, resent, resend_if_unknown, plan",
        values: &[
            r#"(13, 1700000011000, 1700000011000, 42, NULL, 'sendMessage', '{"chat_id":42,"text":"<b>b</b>","parse_mode":"HTML"}', 'answer:3', 'pending', 1, 1, '{"alternatives":[{"name":"rich","method":"sendRichMessage","messages":[{"chat_id":42,"message_thread_id":7,"rich_message":{"markdown":"**a** **b**"}}]},{"name":"html","method":"sendMessage","messages":[{"chat_id":42,"message_thread_id":7,"text":"<b>a</b>","parse_mode":"HTML"},{"chat_id":42,"message_thread_id":7,"text":"<b>b</b>","parse_mode":"HTML"}]}],"alt":1,"part":1,"repeat":1}')"#,
            r#"(14, 1700000011100, 1700000011100, 42, NULL, 'sendMessage', '{"chat_id":42,"text":"odd"}', 'answer:4', 'pending', 0, 1, '{"alternatives":[{"name":"rich","method":"sendRichMessage","messages":[]}],"alt":0,"part":0}')"#,
        ],
    },
    // 12: an outbox row holds its message once (`delivery`): the rows above as version 12's
    // migration left them.
    Rows {
        since: 12,
        until: i64::MAX,
        table: "outbox",
        columns: "id, created_ms, updated_ms, chat_id, thread_id, purpose, source_update_id, resend_if_unknown, state, attempts, not_before_ms, sent_message_id, last_error, handling, identity, turn_id, resent, delivery",
        values: &[
            r#"(1, 1700000000060, 1700000000070, 42, NULL, 'reply:help', 1001, 0, 'sent', 1, 0, 501, NULL, NULL, NULL, NULL, 0, '{"alternatives":[{"name":"message","messages":[{"chat_id":42,"text":"sent","method":"sendMessage"}]}],"alt":0,"part":0}')"#,
            r#"(2, 1700000000110, 1700000000110, 42, NULL, 'notice:held', NULL, 0, 'pending', 0, 1700000009000, NULL, 'timeout', NULL, NULL, NULL, 0, '{"alternatives":[{"name":"message","messages":[{"chat_id":42,"text":"waits","method":"sendMessage"}]}],"alt":0,"part":0}')"#,
            r#"(3, 1700000000120, 1700000000130, 42, 7, 'answer', 1002, 1, 'ambiguous', 2, 0, NULL, 'connection reset', 'not resent', NULL, NULL, 0, '{"alternatives":[{"name":"message","messages":[{"chat_id":42,"text":"unknown","method":"sendMessage"}]}],"alt":0,"part":0}')"#,
            r#"(10, 1700000000900, 1700000000900, 42, NULL, 'answer:0', 1001, 1, 'pending', 0, 0, NULL, NULL, NULL, '/home/p/project', 10, 0, '{"alternatives":[{"name":"message","messages":[{"chat_id":42,"text":"an answer","method":"sendMessage"}]}],"alt":0,"part":0}')"#,
            r#"(11, 1700000004000, 1700000004100, 42, NULL, 'answer:1', NULL, 1, 'sent', 0, 0, NULL, NULL, NULL, NULL, NULL, 1, '{"alternatives":[{"name":"message","messages":[{"chat_id":42,"text":"again","method":"sendMessage"}]}],"alt":0,"part":0,"repeat":0}')"#,
            r#"(12, 1700000005000, 1700000005000, 42, NULL, 'answer:2', NULL, 0, 'pending', 0, 0, NULL, NULL, NULL, NULL, NULL, 0, '{"alternatives":[{"name":"message","messages":[{"chat_id":42,"text":"<b>rich</b>","parse_mode":"HTML","method":"sendMessage"}]}],"alt":0,"part":0}')"#,
            r#"(13, 1700000011000, 1700000011000, 42, NULL, 'answer:3', NULL, 1, 'pending', 0, 0, NULL, NULL, NULL, NULL, NULL, 1, '{"alternatives":[{"name":"rich","messages":[{"chat_id":42,"message_thread_id":7,"rich_message":{"markdown":"**a** **b**"},"method":"sendRichMessage"}]},{"name":"html","messages":[{"chat_id":42,"message_thread_id":7,"text":"<b>a</b>","parse_mode":"HTML","method":"sendMessage"},{"chat_id":42,"text":"<b>b</b>","parse_mode":"HTML","method":"sendMessage"}]}],"alt":1,"part":1,"repeat":1}')"#,
            r#"(14, 1700000011100, 1700000011100, 42, NULL, 'answer:4', NULL, 1, 'pending', 0, 0, NULL, NULL, NULL, NULL, NULL, 0, '{"alternatives":[{"name":"message","messages":[{"chat_id":42,"text":"odd","method":"sendMessage"}]}],"alt":0,"part":0}')"#,
        ],
    },
];

fn fixture(version: i64) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/v{version}.sql"))
}

fn rows_of(version: i64) -> impl Iterator<Item = &'static Rows> {
    ROWS.iter()
        .filter(move |r| r.since <= version && version <= r.until)
}

/// The schema as SQLite stores it (type, name, table, SQL), sorted.
fn schema_of(conn: &Connection) -> Vec<(String, String, String, Option<String>)> {
    let mut stmt = conn
        .prepare(
            "SELECT type, name, tbl_name, sql FROM sqlite_master
             WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A database at `version` made by today's migrations.
fn migrated(path: &Path, version: i64) -> Connection {
    let conn = Connection::open(path).unwrap();
    schema::migrate_to(&conn, path, version).unwrap();
    conn
}

/// A full dump of `conn`: the schema as stored, every row, the AUTOINCREMENT counters and the
/// version; replayed with `execute_batch` it gives the same database.
fn dump(conn: &Connection, version: i64) -> String {
    let mut out = format!(
        "-- pi-telegram state database at schema version {version}, with a few rows of every\n\
         -- table. Written once by `cargo test -p pi-telegram-store --test upgrade -- --ignored\n\
         -- write_missing_fixtures`; never edit or rewrite it: it is the schema as released.\n\
         BEGIN;\n"
    );
    let objects: Vec<(String, String, String)> = {
        let mut stmt = conn
            .prepare(
                "SELECT type, name, sql FROM sqlite_master
                 WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
            )
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    // Tables with their rows first, then the indexes (as `.dump` does).
    for (_, name, sql) in objects.iter().filter(|o| o.0 == "table") {
        out.push_str(&format!("{sql};\n"));
        let columns: Vec<String> = {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT name FROM pragma_table_info('{name}') ORDER BY cid"
                ))
                .unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let quoted: Vec<String> = columns.iter().map(|c| format!("quote(\"{c}\")")).collect();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {} FROM \"{name}\" ORDER BY rowid",
                quoted.join(" || ',' || ")
            ))
            .unwrap();
        let rows: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for row in rows {
            out.push_str(&format!(
                "INSERT INTO \"{name}\"({}) VALUES({row});\n",
                columns.join(", ")
            ));
        }
    }
    for (_, _, sql) in objects.iter().filter(|o| o.0 != "table") {
        out.push_str(&format!("{sql};\n"));
    }
    let mut stmt = conn
        .prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name")
        .unwrap();
    let seqs: Vec<(String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    out.push_str("DELETE FROM sqlite_sequence;\n");
    for (name, seq) in seqs {
        out.push_str(&format!(
            "INSERT INTO sqlite_sequence(name, seq) VALUES('{name}', {seq});\n"
        ));
    }
    out.push_str(&format!("COMMIT;\nPRAGMA user_version = {version};\n"));
    out
}

/// Writes the fixture of every earlier version that has none yet (after a new migration, the
/// previous version's). Existing fixtures are never rewritten.
#[test]
#[ignore = "writes tests/fixtures; run by hand when a migration is added"]
fn write_missing_fixtures() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(fixture(1).parent().unwrap()).unwrap();
    for version in 1..CURRENT {
        let target = fixture(version);
        if target.exists() {
            continue;
        }
        let path = dir.path().join(format!("v{version}.db"));
        let conn = migrated(&path, version);
        for rows in rows_of(version) {
            for v in rows.values {
                conn.execute_batch(&format!(
                    "INSERT INTO {}({}) VALUES {v};",
                    rows.table, rows.columns
                ))
                .unwrap_or_else(|e| panic!("v{version} {}: {e}", rows.table));
            }
        }
        std::fs::write(&target, dump(&conn, version)).unwrap();
        println!("wrote {}", target.display());
    }
}

/// The fixture of `version` as a database file in `dir`.
fn from_fixture(dir: &Path, version: i64) -> PathBuf {
    let sql = std::fs::read_to_string(fixture(version)).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; write it with `cargo test -p pi-telegram-store --test upgrade -- --ignored write_missing_fixtures`",
            fixture(version).display()
        )
    });
    let path = dir.join(format!("v{version}.db"));
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&sql).unwrap();
    assert_eq!(schema::version(&conn).unwrap(), version);
    path
}

#[test]
fn every_fixture_has_the_schema_its_version_was_released_with() {
    let dir = tempfile::tempdir().unwrap();
    for version in 1..CURRENT {
        let fixture = Connection::open(from_fixture(dir.path(), version)).unwrap();
        let today = migrated(&dir.path().join(format!("today-v{version}.db")), version);
        assert_eq!(
            schema_of(&fixture),
            schema_of(&today),
            "migrations 1..={version} no longer make the schema v{version} was released with: a released migration was edited (append a new one instead)"
        );
    }
}

#[test]
fn every_earlier_schema_opens_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = Store::open(&dir.path().join("fresh.db")).unwrap();
    let latest = fresh.read(|c| Ok::<_, StoreError>(schema_of(c))).unwrap();
    for version in 1..CURRENT {
        let path = from_fixture(dir.path(), version);
        // The path the hub takes at start.
        let s = Store::open(&path).unwrap_or_else(|e| panic!("v{version}: {e}"));
        s.read(|c| {
            assert_eq!(schema::version(c)?, CURRENT, "v{version}");
            assert_eq!(
                schema_of(c),
                latest,
                "v{version} upgraded to today's schema"
            );
            // Every row of the version, with every value it had.
            // (The columns a later version dropped are checked by `check_typed`, in what
            // replaced them.)
            for rows in rows_of(version).filter(|r| r.table != "held") {
                let kept = columns_of(c, rows.table);
                let same: Vec<String> = rows
                    .columns
                    .split(',')
                    .map(str::trim)
                    .filter(|col| kept.iter().any(|k| k == col))
                    .map(|col| format!("t.{col} IS v.{col}"))
                    .collect();
                for v in rows.values {
                    let n: i64 = c.query_row(
                        &format!(
                            "WITH v({}) AS (VALUES {v}) SELECT count(*) FROM {} t, v WHERE {}",
                            rows.columns,
                            rows.table,
                            same.join(" AND ")
                        ),
                        [],
                        |r| r.get(0),
                    )?;
                    assert_eq!(n, 1, "v{version}: {} row {v}", rows.table);
                }
            }
            check_typed(c, version)?;
            Ok::<_, StoreError>(())
        })
        .unwrap();
        // And it takes new writes with today's code.
        s.write(|tx| {
            routes::record(tx, 42, 9999, "/home/p/project", None, 1)?;
            journal::append_batch(
                tx,
                &[journal::Incoming {
                    update_id: 5000,
                    kind: "message",
                    raw: "{}",
                }],
                5001,
                1,
            )
            .map(drop)
        })
        .unwrap();
    }
}

/// The columns `table` has today.
fn columns_of(c: &Connection, table: &str) -> Vec<String> {
    let mut stmt = c
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Today's typed reads understand what the version stored.
fn check_typed(c: &Connection, version: i64) -> Result<(), StoreError> {
    assert_eq!(kv::get_i64(c, kv::OWNER)?, Some(42), "v{version}");
    assert_eq!(journal::offset(c)?, Some(1004));
    let pending: Vec<i64> = journal::pending(c, 10)?
        .iter()
        .map(|e| e.update_id)
        .collect();
    assert_eq!(pending, vec![1002], "v{version}");
    assert_eq!(
        journal::outcome(c, 1001)?,
        Some((1700000000050, journal::Outcome::Other("turn".into())))
    );
    let p = pairing::current(c)?.unwrap();
    assert_eq!(p.state, pairing::PairingState::Used);
    assert_eq!(lease::current(c)?.map(|l| l.epoch.0), Some(3));
    assert_eq!(flood::active(c, 1700000000000)?.len(), 1);
    assert_eq!(incidents::recent(c, 5)?.len(), 1);
    let rows = outbox::all(c)?;
    let states: Vec<(i64, outbox::State)> = rows.iter().map(|r| (r.id, r.state)).collect();
    assert!(states.contains(&(1, outbox::State::Sent)), "v{version}");
    assert!(states.contains(&(2, outbox::State::Pending)), "v{version}");
    assert!(
        states.contains(&(3, outbox::State::Ambiguous)),
        "v{version}"
    );
    if version == 1 {
        // Version 2 made the held message a turn that waits for the first pi.
        let held = c.query_row(
            "SELECT id FROM turns WHERE source_update_id = 1003",
            [],
            |r| r.get::<_, i64>(0),
        )?;
        let t = turns::get(c, held)?.unwrap();
        assert_eq!(
            (t.text.as_str(), t.chat_id, t.message_id, t.state, t.waits),
            (
                "kept text",
                42,
                Some(3),
                turns::TurnState::Queued,
                Some(turns::Waits::Any)
            )
        );
        return Ok(());
    }
    let done = turns::get(c, 10)?.unwrap();
    assert_eq!(done.state, turns::TurnState::Done);
    assert_eq!(done.result_text.as_deref(), Some("an answer"));
    let acked = turns::get(c, 11)?.unwrap();
    assert_eq!(acked.state, turns::TurnState::Acked);
    assert_eq!(turns::outstanding(c)?.len(), 1);
    assert_eq!(
        routes::lookup(c, 42, 501)?.as_deref(),
        Some("/home/p/project")
    );
    assert_eq!(
        callbacks::lookup(c, "tk1", 42, 1700000000001)?.as_deref(),
        Some(r#"{"select":"/home/p/project"}"#)
    );
    assert_eq!(
        instances::last_of(c, "/home/p/project")?.map(|i| i.id),
        Some("i2".into())
    );
    let answer = outbox::get(c, 10)?.unwrap();
    assert_eq!(
        (answer.identity.as_deref(), answer.turn_id),
        (Some("/home/p/project"), Some(10))
    );
    if version >= 3 {
        let b = threads::binding(c, "/home/p/project")?.unwrap();
        assert_eq!((b.thread_id, b.slot.as_str()), (77, "A"));
        assert_eq!(threads::intents(c)?.len(), 1);
        assert_eq!(threads::evidence(c, None)?.len(), 1);
        assert_eq!(threads::pending_cleanups(c)?.len(), 1);
    }
    if version >= 4 {
        assert_eq!(
            turns::get(c, 12)?.unwrap().waits,
            Some(turns::Waits::Choice)
        );
        assert_eq!(turns::awaiting_choice(c)?, 1);
        // Version 11's rows add one sent again.
        let resent = if version >= 11 { 2 } else { 1 };
        assert_eq!(outbox::resent_total(c)?, resent);
    }
    // Version 12: each row's message once, in its delivery, naming its method.
    let one = outbox::get(c, 1)?.unwrap();
    assert_eq!(
        one.delivery,
        outbox::single(
            "sendMessage",
            &serde_json::json!({ "chat_id": 42, "text": "sent" })
        ),
        "v{version}"
    );
    assert_eq!(one.method(), "sendMessage");
    if version >= 4 {
        let again = outbox::get(c, 11)?.unwrap();
        assert_eq!(
            again.delivery["repeat"],
            serde_json::json!(0),
            "v{version}: a message sent again stays marked as a repeat"
        );
    }
    if version >= 5 {
        // A plan of a shape the sender never read: sent as its parameters, as before.
        let old = outbox::get(c, 12)?.unwrap();
        assert_eq!(
            old.delivery,
            outbox::single(
                "sendMessage",
                &serde_json::json!({ "chat_id": 42, "text": "<b>rich</b>", "parse_mode": "HTML" })
            ),
            "v{version}"
        );
    }
    if version >= 11 {
        let moved = outbox::get(c, 13)?.unwrap();
        let d = &moved.delivery;
        assert_eq!(
            (d["alt"].clone(), d["part"].clone()),
            (serde_json::json!(1), serde_json::json!(1))
        );
        assert_eq!(d["repeat"], serde_json::json!(1));
        assert_eq!(
            d["alternatives"][0]["messages"][0]["method"],
            serde_json::json!("sendRichMessage")
        );
        assert!(d["alternatives"][0].get("method").is_none());
        assert_eq!(
            d["alternatives"][1]["messages"][0],
            serde_json::json!({ "chat_id": 42, "message_thread_id": 7, "text": "<b>a</b>", "parse_mode": "HTML", "method": "sendMessage" })
        );
        assert_eq!(
            *moved.params(),
            serde_json::json!({ "chat_id": 42, "text": "<b>b</b>", "parse_mode": "HTML", "method": "sendMessage" }),
            "the current message is the row's parameters (where the row is now)"
        );
        let odd = outbox::get(c, 14)?.unwrap();
        assert_eq!(
            odd.delivery,
            outbox::single(
                "sendMessage",
                &serde_json::json!({ "chat_id": 42, "text": "odd" })
            )
        );
    }
    if version >= 6 {
        // Version 13: a turn from before was sent when it was made, and is held for nobody.
        let first = turns::get(c, 13)?.unwrap();
        assert_eq!(
            (first.sent_ms, first.held, first.stale_question),
            (1700000006000, None, None),
            "v{version}"
        );
        let queue: Vec<i64> = turns::queue_of(c, "/home/p/project")?
            .iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(
            &queue[..2],
            &[13, 14],
            "v{version}: the priority lane first"
        );
        assert!(turns::get(c, 14)?.unwrap().skip);
        let open: Vec<i64> = controls::open(c)?.iter().map(|x| x.id).collect();
        assert_eq!(open, vec![2]);
    }
    if version >= 7 {
        let t = turns::get(c, 15)?.unwrap();
        assert!(!t.ready);
        assert_eq!(t.group_key.as_deref(), Some("album:42:9"));
        let f = files::of_turn(c, 15)?;
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].state, files::FileState::Saved);
        assert_eq!(f[1].origin, files::Origin::Forward);
    }
    if version >= 8 {
        let n: i64 = c.query_row(
            "SELECT count(*) FROM attachments WHERE turn_id = 11 AND state = 'waiting'",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(n, 1);
    }
    Ok(())
}

/// The bytes of the database and the names of the files beside it.
fn snapshot(path: &Path) -> (Vec<u8>, Vec<String>) {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (std::fs::read(path).unwrap(), names)
}

/// A database of a newer build: today's schema and data, a larger version, and the journal
/// mode `mode` (a newer build might not use WAL).
fn newer(dir: &Path, mode: &str) -> PathBuf {
    let path = dir.join(format!("newer-{mode}.db"));
    Store::open(&path)
        .unwrap()
        .write(|tx| kv::set(tx, kv::OWNER, "42"))
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = {mode}; PRAGMA user_version = {};",
        CURRENT + 1
    ))
    .unwrap();
    drop(conn);
    path
}

#[test]
fn a_database_from_a_newer_version_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for mode in ["wal", "delete"] {
        let path = newer(dir.path(), mode);
        let before = snapshot(&path);
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::TooNew { found, supported, .. } if found == CURRENT + 1 && supported == CURRENT),
            "{err}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!(
                "is from a newer pi-telegram (schema {}, this binary knows {CURRENT}); upgrade pi-telegram or use a matching version",
                CURRENT + 1
            )),
            "{message}"
        );
        assert_eq!(
            snapshot(&path),
            before,
            "{mode}: the file and its neighbours are as they were"
        );
        // `status` reads without migrating, and refuses the same way.
        assert!(matches!(
            Store::open_for_reading(&path),
            Err(StoreError::TooNew { .. })
        ));
        assert_eq!(snapshot(&path), before, "{mode}: untouched by a reader too");
    }
}
