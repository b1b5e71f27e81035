//! The store's tables and their invariants, on real SQLite files.
#![allow(clippy::unwrap_used)]

use serde_json::json;
use store::instances::{GoneReason, Transport};
use store::outbox::{self, NewRow, Purpose, State};
use store::turns::{self, NewTurn, Target, TurnState, Waits};
use store::{
    Store, StoreError, callbacks, flood, incidents, instances, journal, kv, lease, pairing, routes,
};

fn open() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("state.db")).unwrap();
    (dir, s)
}

#[test]
fn journal_batches_move_the_offset_with_the_updates() {
    let (_d, s) = open();
    assert_eq!(s.read(journal::offset).unwrap(), None);
    let batch = [
        journal::Incoming {
            update_id: 10,
            kind: "message",
            raw: r#"{"update_id":10}"#,
        },
        journal::Incoming {
            update_id: 11,
            kind: "callback_query",
            raw: r#"{"update_id":11}"#,
        },
    ];
    let added: usize = s
        .write(|tx| journal::append_batch(tx, &batch, 12, 1000))
        .unwrap();
    assert_eq!(added, 2);
    assert_eq!(s.read(journal::offset).unwrap(), Some(12));
    // A batch that fails midway leaves neither updates nor offset behind.
    let r: Result<(), StoreError> = s.write(|tx| {
        journal::append_batch(
            tx,
            &[journal::Incoming {
                update_id: 12,
                kind: "message",
                raw: "{}",
            }],
            13,
            1001,
        )?;
        Err(StoreError::Corrupt("crash before commit".into()))
    });
    assert!(r.is_err());
    assert_eq!(s.read(journal::offset).unwrap(), Some(12));
    assert_eq!(s.read(|c| journal::pending(c, 10)).unwrap().len(), 2);
    // Re-journaling an update keeps the first copy; the offset never moves back.
    let again: usize = s
        .write(|tx| journal::append_batch(tx, &batch[..1], 5, 1002))
        .unwrap();
    assert_eq!(again, 0);
    assert_eq!(s.read(journal::offset).unwrap(), Some(12));
}

#[test]
fn an_update_is_handled_once_with_its_effects() {
    let (_d, s) = open();
    let batch = [journal::Incoming {
        update_id: 1,
        kind: "message",
        raw: "{}",
    }];
    s.write(|tx| journal::append_batch(tx, &batch, 2, 0))
        .unwrap();
    s.write(|tx| {
        journal::mark_handled(tx, 1, &journal::Outcome::Held, 5)?;
        let turn = NewTurn {
            source_update_id: Some(1),
            chat_id: 9,
            thread_id: None,
            message_id: Some(3),
            target: Target::Unassigned(Waits::Any),
            text: "hi",
            lane: turns::Lane::Normal,
            prepare: None,
            sent_ms: None,
            from_user: None,
            from_name: None,
        };
        turns::create(tx, &turn, 5).map(drop)
    })
    .unwrap();
    assert_eq!(
        s.read(|c| journal::outcome(c, 1)).unwrap(),
        Some((5, journal::Outcome::Held))
    );
    // Handling again is refused and its effects roll back with it.
    let twice: Result<(), StoreError> = s.write(|tx| {
        kv::set(tx, "effect", "x")?;
        journal::mark_handled(tx, 1, &journal::Outcome::Queued, 6)
    });
    assert!(matches!(twice, Err(StoreError::Corrupt(_))));
    assert_eq!(s.read(|c| kv::get(c, "effect")).unwrap(), None);
    assert_eq!(s.read(journal::counts).unwrap(), (0, 1));
    // Pruning keeps the handled count.
    s.write(|tx| {
        journal::append_batch(
            tx,
            &[journal::Incoming {
                update_id: 2,
                kind: "message",
                raw: "{}",
            }],
            3,
            0,
        )
    })
    .unwrap();
    s.write(|tx| journal::mark_handled(tx, 2, &journal::Outcome::IgnoredMalformed, 7))
        .unwrap();
    let at = store::retention::Horizon {
        now_ms: 100,
        before_ms: 100,
    };
    assert_eq!(
        s.write(|tx| store::retention::prune(tx, store::retention::Table::Journal, at, 10))
            .unwrap(),
        2
    );
    assert_eq!(s.read(journal::counts).unwrap(), (0, 2));
}

#[test]
fn outbox_rows_move_through_their_states_and_exist_once_per_cause() {
    let (_d, s) = open();
    let params = json!({ "chat_id": 5, "text": "hi" });
    let delivery = outbox::single("sendMessage", &params);
    let row = NewRow {
        chat_id: 5,
        thread_id: None,
        delivery: &delivery,
        purpose: &Purpose::ReplyMenuHelp,
        source_update_id: Some(77),
        resend_if_unknown: false,
        identity: None,
        turn_id: None,
    };
    let id = s.write(|tx| outbox::enqueue(tx, &row, 1)).unwrap().unwrap();
    assert_eq!(
        s.write(|tx| outbox::enqueue(tx, &row, 2)).unwrap(),
        None,
        "one row per cause and purpose"
    );
    let heads = s.read(|c| outbox::heads(c, 10)).unwrap();
    assert_eq!(heads.len(), 1);
    assert_eq!(heads[0].delivery, delivery);
    assert_eq!(heads[0].method(), "sendMessage");
    assert_eq!(heads[0].params()["text"], json!("hi"));
    s.write(|tx| outbox::mark_sending(tx, id, 3)).unwrap();
    assert!(
        s.write(|tx| outbox::mark_sending(tx, id, 3)).is_err(),
        "only pending rows start sending"
    );
    s.write(|tx| outbox::mark_retry(tx, id, 50, "HTTP 502", 4))
        .unwrap();
    assert!(
        s.read(|c| outbox::heads(c, 10)).unwrap().is_empty(),
        "not before 50"
    );
    assert_eq!(s.read(|c| outbox::next_due_ms(c, 10)).unwrap(), Some(50));
    assert_eq!(s.read(|c| outbox::next_due_ms(c, 50)).unwrap(), None);
    s.write(|tx| outbox::mark_sending(tx, id, 60)).unwrap();
    s.write(|tx| outbox::mark_sent(tx, id, Some(123), 61))
        .unwrap();
    let r = s.read(|c| outbox::get(c, id)).unwrap().unwrap();
    assert_eq!(
        (r.state, r.attempts, r.sent_message_id),
        (State::Sent, 2, Some(123))
    );
    let counts = s.read(outbox::counts).unwrap();
    assert_eq!(counts[&State::Sent], 1);
    assert_eq!(counts[&State::Pending], 0);
}

#[test]
fn rows_of_one_chat_go_in_order_and_interrupted_sends_are_recovered() {
    let (_d, s) = open();
    let p = outbox::single("sendMessage", &json!({}));
    let mk = |chat, purpose: &'static Purpose, resend| NewRow {
        chat_id: chat,
        thread_id: None,
        delivery: &p,
        purpose,
        source_update_id: None,
        resend_if_unknown: resend,
        identity: None,
        turn_id: None,
    };
    let a = s
        .write(|tx| outbox::enqueue(tx, &mk(1, &Purpose::Control { id: 1 }, false), 0))
        .unwrap()
        .unwrap();
    let b = s
        .write(|tx| outbox::enqueue(tx, &mk(1, &Purpose::Control { id: 2 }, true), 0))
        .unwrap()
        .unwrap();
    let c = s
        .write(|tx| outbox::enqueue(tx, &mk(2, &Purpose::Control { id: 3 }, true), 0))
        .unwrap()
        .unwrap();
    let heads: Vec<i64> = s
        .read(|x| outbox::heads(x, 0))
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(heads, vec![a, c], "b waits behind a");
    s.write(|tx| outbox::mark_sending(tx, a, 1)).unwrap();
    let heads: Vec<i64> = s
        .read(|x| outbox::heads(x, 0))
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(heads, vec![c], "chat 1 is busy while a is sending");
    let sending_before = |chat, id| {
        s.read(|x| outbox::sending_before(x, chat, None, id))
            .unwrap()
    };
    assert_eq!(sending_before(1, b), Some(a));
    assert_eq!(sending_before(1, a), None, "only rows before it");
    assert_eq!(sending_before(2, c), None, "only its conversation");
    s.write(|tx| outbox::mark_sending(tx, c, 1)).unwrap();
    // The hub dies here. At restart: a (may not be repeated) is ambiguous, c (must arrive) is resent.
    assert_eq!(
        s.write(|tx| outbox::recover_interrupted(tx, 2)).unwrap(),
        (1, 1)
    );
    let a_row = s.read(|x| outbox::get(x, a)).unwrap().unwrap();
    assert_eq!(a_row.state, State::Ambiguous);
    assert!(a_row.handling.unwrap().contains("not resent"));
    assert_eq!(
        s.read(|x| outbox::get(x, c)).unwrap().unwrap().state,
        State::Pending
    );
}

/// `resent` counts what the person may see twice (a power-loss run from outside found 10 in
/// `status` where the person saw 9 marked answers: the tenth was a command list).
#[test]
fn a_resent_command_list_is_not_counted_as_a_repeat_the_person_sees() {
    let (_d, s) = open();
    let p = outbox::single("sendMessage", &json!({}));
    let mk = |chat, purpose: &'static Purpose| NewRow {
        chat_id: chat,
        thread_id: None,
        delivery: &p,
        purpose,
        source_update_id: None,
        resend_if_unknown: true,
        identity: None,
        turn_id: None,
    };
    let enqueue = |chat, purpose: &'static Purpose| {
        let id = s
            .write(|tx| outbox::enqueue(tx, &mk(chat, purpose), 0))
            .unwrap()
            .unwrap();
        s.write(|tx| outbox::mark_sending(tx, id, 1)).unwrap();
        id
    };
    // A restart with an interrupted setMyCommands and an interrupted answer.
    let commands = enqueue(0, &Purpose::Commands { generation: 1 });
    let answer = enqueue(1, &Purpose::Answer { turn: 7 });
    assert_eq!(
        s.write(|tx| outbox::recover_interrupted(tx, 2)).unwrap(),
        (1, 0)
    );
    for id in [commands, answer] {
        let row = s.read(|x| outbox::get(x, id)).unwrap().unwrap();
        assert_eq!(row.state, State::Pending, "both are sent again");
    }
    assert_eq!(s.read(outbox::resent_total).unwrap(), 1);
    // The same for an unknown outcome while the hub runs.
    for id in [commands, answer] {
        s.write(|tx| outbox::mark_sending(tx, id, 3)).unwrap();
        s.write(|tx| outbox::mark_resend(tx, id, 0, "timed out", 3))
            .unwrap();
    }
    assert_eq!(s.read(outbox::resent_total).unwrap(), 2);
}

#[test]
fn wrong_pairing_codes_are_counted_per_sender_and_the_code_stays_open() {
    const STRANGER: i64 = 777;
    const OWNER: i64 = 42;
    let (_d, s) = open();
    s.write(|tx| pairing::open(tx, "hash", 0, 600_000, 5))
        .unwrap();
    for left in (0..5).rev() {
        assert_eq!(
            s.write(|tx| pairing::record_wrong(tx, STRANGER, 1))
                .unwrap(),
            left
        );
    }
    // Further attempts are counted, never below zero.
    assert_eq!(
        s.write(|tx| pairing::record_wrong(tx, STRANGER, 2))
            .unwrap(),
        0
    );
    let p = s.read(pairing::current).unwrap().unwrap();
    assert_eq!(
        (p.state, p.attempts_per_sender, p.expires_ms),
        (pairing::PairingState::Open, 5, 600_000),
        "the code is still open"
    );
    assert_eq!(s.read(|c| pairing::attempts_left(c, STRANGER)).unwrap(), 0);
    assert_eq!(
        s.read(|c| pairing::attempts_left(c, OWNER)).unwrap(),
        5,
        "the stranger spent none of the owner's"
    );
    assert_eq!(
        s.write(|tx| pairing::record_wrong(tx, OWNER, 3)).unwrap(),
        4
    );
    assert_eq!(
        s.read(pairing::attempts).unwrap(),
        pairing::Attempts {
            wrong: 7,
            senders: 2,
            refused: 1
        }
    );
    // A new code: everyone starts again.
    s.write(|tx| pairing::open(tx, "new", 10, 600_000, 5))
        .unwrap();
    assert_eq!(s.read(|c| pairing::attempts_left(c, STRANGER)).unwrap(), 5);
    assert_eq!(
        s.read(pairing::attempts).unwrap(),
        pairing::Attempts::default()
    );
    s.write(|tx| pairing::record_wrong(tx, STRANGER, 11))
        .unwrap();
    s.write(pairing::mark_used).unwrap();
    assert_eq!(
        s.read(pairing::current).unwrap().unwrap().state,
        pairing::PairingState::Used
    );
    assert_eq!(
        s.read(pairing::attempts).unwrap(),
        pairing::Attempts::default(),
        "forgotten once the code is used"
    );
}

#[test]
fn flood_waits_incidents_and_the_lease() {
    let (_d, s) = open();
    s.write(|tx| flood::record(tx, "chat:5", 10_000, 10, 0))
        .unwrap();
    s.write(|tx| flood::record(tx, "chat:5", 4_000, 4, 1))
        .unwrap();
    let w = s.read(|c| flood::active(c, 2_000)).unwrap();
    assert_eq!(
        (w[0].until_ms, w[0].retry_after_s),
        (10_000, 10),
        "the later end wins"
    );
    assert!(s.read(|c| flood::active(c, 10_000)).unwrap().is_empty());
    for i in 0..60 {
        s.write(|tx| incidents::record(tx, i, "send", &format!("e{i}")))
            .unwrap();
    }
    let recent = s.read(|c| incidents::recent(c, 100)).unwrap();
    assert_eq!(recent.len(), incidents::KEEP as usize);
    assert_eq!(recent[0].message, "e59");
    let e1 = s.write(|tx| lease::acquire(tx, 100, 0)).unwrap();
    let e2 = s.write(|tx| lease::acquire(tx, 200, 1)).unwrap();
    assert!(e2 > e1);
    assert!(!s.read(|c| lease::is_current(c, e1)).unwrap());
    assert!(s.read(|c| lease::is_current(c, e2)).unwrap());
}

#[test]
fn the_queue_has_lanes_and_skips() {
    let (_d, s) = open();
    let mk = |n: i64| NewTurn {
        source_update_id: Some(n),
        chat_id: 5,
        thread_id: None,
        message_id: Some(100 + n),
        target: Target::Identity("/p"),
        text: "q",
        lane: turns::Lane::Normal,
        prepare: None,
        sent_ms: None,
        from_user: None,
        from_name: None,
    };
    let ids: Vec<i64> = (1..=4)
        .map(|n| s.write(|tx| turns::create(tx, &mk(n), 0)).unwrap().unwrap())
        .collect();
    let order = |s: &store::Store| -> Vec<i64> {
        s.read(|c| turns::queue_of(c, "/p"))
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect()
    };
    assert_eq!(order(&s), ids);
    // The third goes first; the first joins it in priority, behind it.
    assert!(
        s.write(|tx| turns::set_lane(tx, ids[2], turns::Lane::Priority))
            .unwrap()
    );
    assert!(
        s.write(|tx| turns::set_lane(tx, ids[0], turns::Lane::Priority))
            .unwrap()
    );
    assert_eq!(order(&s), vec![ids[2], ids[0], ids[1], ids[3]]);
    // Back to normal: the tail of the normal lane, not its old place.
    assert!(
        s.write(|tx| turns::set_lane(tx, ids[2], turns::Lane::Normal))
            .unwrap()
    );
    assert_eq!(order(&s), vec![ids[0], ids[1], ids[3], ids[2]]);
    // Skip keeps the place; the turn is found by its message.
    assert!(s.write(|tx| turns::set_skip(tx, ids[1], true)).unwrap());
    assert_eq!(order(&s), vec![ids[0], ids[1], ids[3], ids[2]]);
    let t = s.read(|c| turns::by_message(c, 5, 102)).unwrap().unwrap();
    assert_eq!((t.id, t.skip), (ids[1], true));
    assert!(s.write(|tx| turns::drop_skipped(tx, ids[1], 1)).unwrap());
    assert!(
        !s.write(|tx| turns::set_skip(tx, ids[1], false)).unwrap(),
        "gone from the queue"
    );
    assert!(s.write(|tx| turns::edit_text(tx, ids[3], "new")).unwrap());
    assert_eq!(
        s.read(|c| turns::get(c, ids[3])).unwrap().unwrap().text,
        "new"
    );
}

#[test]
fn turns_move_through_their_states_once() {
    let (_d, s) = open();
    let new = |update, target| NewTurn {
        source_update_id: Some(update),
        chat_id: 5,
        thread_id: None,
        message_id: Some(update),
        target,
        text: "q",
        lane: turns::Lane::Normal,
        prepare: None,
        sent_ms: None,
        from_user: None,
        from_name: None,
    };
    let any = Target::Unassigned(Waits::Any);
    let a = s
        .write(|tx| turns::create(tx, &new(1, any), 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        s.write(|tx| turns::create(tx, &new(1, any), 0)).unwrap(),
        None,
        "one turn per update"
    );
    let b = s
        .write(|tx| turns::create(tx, &new(2, Target::Identity("/p")), 0))
        .unwrap()
        .unwrap();
    // A turn that waits for the person's choice is never handed out in bulk.
    let c = s
        .write(|tx| turns::create(tx, &new(3, Target::Unassigned(Waits::Choice)), 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        s.read(|c| turns::next_queued(c, "/p")).unwrap().unwrap().id,
        b
    );
    assert_eq!(s.write(|tx| turns::assign_unassigned(tx, "/p")).unwrap(), 1);
    assert_eq!(
        s.read(|c| turns::next_queued(c, "/p")).unwrap().unwrap().id,
        a,
        "oldest first"
    );
    let waiting = s.read(|conn| turns::get(conn, c)).unwrap().unwrap();
    assert_eq!(
        (waiting.identity, waiting.waits),
        (None, Some(Waits::Choice))
    );
    // Only a tap assigns it, once.
    assert!(s.write(|tx| turns::assign(tx, c, "/q", None)).unwrap());
    assert!(!s.write(|tx| turns::assign(tx, c, "/p", None)).unwrap());
    // A turn waiting for an absent pi can be redirected, once.
    assert!(
        s.write(|tx| turns::assign(tx, c, "/p", Some("/q")))
            .unwrap()
    );
    assert!(
        !s.write(|tx| turns::assign(tx, c, "/r", Some("/q")))
            .unwrap()
    );
    s.write(|tx| turns::mark_dispatched(tx, a, "i1", Some(42), Transport::Shim, 1))
        .unwrap();
    assert!(
        s.write(|tx| turns::mark_dispatched(tx, a, "i1", Some(42), Transport::Shim, 1))
            .is_err()
    );
    assert!(s.write(|tx| turns::mark_acked(tx, a, 2)).unwrap());
    assert!(
        !s.write(|tx| turns::mark_acked(tx, a, 2)).unwrap(),
        "a repeated ack changes nothing"
    );
    assert_eq!(
        s.read(|conn| turns::cut_short(conn, a)).unwrap(),
        None,
        "pi has it"
    );
    assert!(
        s.write(|tx| turns::mark_done(tx, a, "answer", false, None, 3))
            .unwrap()
    );
    assert!(
        !s.write(|tx| turns::mark_done(tx, a, "again", false, None, 4))
            .unwrap(),
        "stored once"
    );
    assert_eq!(
        s.read(|c| turns::get(c, a))
            .unwrap()
            .unwrap()
            .result_text
            .as_deref(),
        Some("answer")
    );
    assert_eq!(
        s.read(|conn| turns::cut_short(conn, a)).unwrap(),
        Some(false)
    );
    s.write(|tx| turns::mark_dispatched(tx, b, "i1", Some(42), Transport::Shim, 5))
        .unwrap();
    assert!(s.write(|tx| turns::requeue(tx, b)).unwrap());
    assert_eq!(
        s.read(|conn| turns::cut_short(conn, b)).unwrap(),
        Some(false),
        "back in the queue"
    );
    assert_eq!(
        s.read(|c| turns::get(c, b)).unwrap().unwrap().state,
        TurnState::Queued
    );
    s.write(|tx| turns::mark_dispatched(tx, b, "i2", None, Transport::Rpc, 6))
        .unwrap();
    assert!(
        s.write(|tx| turns::mark_interrupted(tx, b, "pi exited", 7))
            .unwrap()
    );
    assert_eq!(
        s.read(|conn| turns::cut_short(conn, b)).unwrap(),
        Some(true)
    );
    let counts = s.read(turns::counts).unwrap();
    assert!(
        counts.contains(&(TurnState::Done, 1)) && counts.contains(&(TurnState::Interrupted, 1))
    );
    // An answer after an abort is cut short too; the newest turn marks what came before.
    let d = s
        .write(|tx| turns::create(tx, &new(4, Target::Identity("/p")), 8))
        .unwrap()
        .unwrap();
    assert_eq!(s.read(turns::last_id).unwrap(), d);
    s.write(|tx| turns::mark_dispatched(tx, d, "i2", None, Transport::Rpc, 9))
        .unwrap();
    assert!(
        s.write(|tx| turns::mark_done(tx, d, "so far", true, None, 10))
            .unwrap()
    );
    assert_eq!(
        s.read(|conn| turns::cut_short(conn, d)).unwrap(),
        Some(true)
    );
    assert_eq!(
        s.read(|conn| turns::cut_short(conn, 999)).unwrap(),
        Some(false)
    );
}

#[test]
fn instances_routes_and_buttons() {
    let (_d, s) = open();
    let row = instances::InstanceRow {
        id: "i1".into(),
        identity: "/p".into(),
        transport: Transport::Shim,
        pid: Some(1),
        cwd: "/p".into(),
        label: "p".into(),
        session_id: None,
        state: instances::InstanceState::Idle,
        connected_ms: 0,
        gone_ms: None,
        gone_reason: None,
    };
    s.write(|tx| instances::insert(tx, &row)).unwrap();
    assert_eq!(s.read(instances::live).unwrap().len(), 1);
    let exited = GoneReason::Exited("exit status: 0".into());
    s.write(|tx| instances::mark_gone(tx, "i1", &exited, 5))
        .unwrap();
    assert!(s.read(instances::live).unwrap().is_empty());
    assert_eq!(
        s.read(|c| instances::recent(c, 5)).unwrap()[0].gone_reason,
        Some(exited)
    );
    assert_eq!(
        s.read(|c| instances::recent(c, 5)).unwrap()[0].state,
        instances::InstanceState::Gone
    );
    // The schema keeps out a state the enum does not know.
    assert!(
        s.write(|tx| {
            tx.execute("UPDATE instances SET state = 'dancing'", [])
                .map_err(store::StoreError::sqlite("test"))
        })
        .is_err()
    );
    assert_eq!(s.write(instances::next_number).unwrap(), 1);
    assert_eq!(s.write(instances::next_number).unwrap(), 2);
    s.write(|tx| routes::record(tx, 5, 10, "/p", Some(1), 0))
        .unwrap();
    assert_eq!(
        s.read(|c| routes::lookup(c, 5, 10)).unwrap().as_deref(),
        Some("/p")
    );
    s.write(|tx| callbacks::create(tx, "tok", 7, "sel:/p", 0, 1000))
        .unwrap();
    assert_eq!(
        s.read(|c| callbacks::lookup(c, "tok", 7, 10))
            .unwrap()
            .as_deref(),
        Some("sel:/p")
    );
    assert_eq!(
        s.read(|c| callbacks::lookup(c, "tok", 8, 10)).unwrap(),
        None,
        "bound to the owner"
    );
    assert_eq!(
        s.read(|c| callbacks::lookup(c, "tok", 7, 1000)).unwrap(),
        None,
        "expired"
    );
}

#[test]
fn migration_2_turns_kept_messages_into_queued_turns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let conn = store::Connection::open(&path).unwrap();
        store::schema::migrate_to(&conn, &path, 1).unwrap();
        conn.execute_batch(
            r#"INSERT INTO journal(update_id, kind, raw, received_ms, handled_ms, outcome)
                 VALUES (5, 'message', '{"update_id":5,"message":{"message_id":9,"text":"kept text"}}', 1, 2, 'held');
               INSERT INTO held(update_id, chat_id, thread_id, message_id, received_ms) VALUES (5, 1001, NULL, 9, 2);"#,
        )
        .unwrap();
    }
    let s = Store::open(&path).unwrap();
    let t = s.read(|c| turns::next_queued(c, "/any")).unwrap();
    assert!(t.is_none(), "moved turns wait for any instance");
    assert_eq!(
        s.write(|tx| turns::assign_unassigned(tx, "/any")).unwrap(),
        1
    );
    let t = s.read(|c| turns::next_queued(c, "/any")).unwrap().unwrap();
    assert_eq!(
        (t.text.as_str(), t.chat_id, t.message_id, t.source_update_id),
        ("kept text", 1001, Some(9), Some(5))
    );
}

#[test]
fn a_parked_topic_does_not_hold_up_the_main_chat_or_other_topics() {
    let (_d, s) = open();
    let p = outbox::single("sendMessage", &json!({}));
    let mk = |thread, purpose: &'static Purpose| NewRow {
        chat_id: 1,
        thread_id: thread,
        delivery: &p,
        purpose,
        source_update_id: None,
        resend_if_unknown: true,
        identity: None,
        turn_id: None,
    };
    let add = |row: NewRow<'_>| s.write(|tx| outbox::enqueue(tx, &row, 0)).unwrap().unwrap();
    let parked = add(mk(Some(7), &Purpose::Control { id: 1 }));
    let behind = add(mk(Some(7), &Purpose::Control { id: 2 }));
    let main = add(mk(None, &Purpose::Control { id: 3 }));
    let other = add(mk(Some(8), &Purpose::Control { id: 4 }));
    s.write(|tx| outbox::hold(tx, parked, i64::MAX, "waiting for a new topic"))
        .unwrap();
    let heads: Vec<i64> = s
        .read(|x| outbox::heads(x, 0))
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(heads, vec![main, other], "the parked topic waits alone");
    assert!(!heads.contains(&behind), "order within the topic is kept");
}

#[test]
fn a_row_being_made_holds_pis_later_rows_briefly_and_the_hubs_own_not_at_all() {
    let (_d, s) = open();
    let p = outbox::single("sendMessage", &json!({}));
    let (answer_1, answer_2) = (
        Purpose::Answer { turn: 1 }.piece(0),
        Purpose::Answer { turn: 2 }.piece(0),
    );
    let mk = |identity: Option<&'static str>, purpose| NewRow {
        chat_id: 1,
        thread_id: None,
        delivery: &p,
        purpose,
        source_update_id: None,
        resend_if_unknown: false,
        identity,
        turn_id: None,
    };
    let at = 1_000;
    let add = |row: NewRow<'_>| {
        s.write(|tx| outbox::enqueue(tx, &row, at))
            .unwrap()
            .unwrap()
    };
    let voice = add(mk(Some("/p"), &answer_1));
    s.write(|tx| outbox::park_making(tx, voice)).unwrap();
    let next_answer = add(mk(Some("/p"), &answer_2));
    let menu = add(mk(None, &Purpose::ReplyMenuMain));
    let heads = |now: i64| -> Vec<i64> {
        s.read(|x| outbox::heads(x, now))
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect()
    };
    // The hub's own message goes past the voice being made and the answer it holds; pi's
    // next answer waits for it...
    assert_eq!(heads(at), vec![menu]);
    s.write(|tx| {
        outbox::mark_sending(tx, menu, at)?;
        outbox::mark_sent(tx, menu, Some(1), at)
    })
    .unwrap();
    assert_eq!(heads(at), Vec::<i64>::new(), "the answer waits");
    let hold_ends = at + outbox::MAKING_HOLDS_MS;
    assert_eq!(
        s.read(|x| outbox::next_due_ms(x, at)).unwrap(),
        Some(hold_ends),
        "the sender wakes when the hold ends"
    );
    // ...only so long.
    assert_eq!(heads(hold_ends + 1), vec![next_answer]);
    // The voice, released, takes its chat's head again.
    s.write(|tx| outbox::replan(tx, voice, &p, "spoken", at))
        .unwrap();
    assert_eq!(heads(hold_ends + 1), vec![voice]);
}
