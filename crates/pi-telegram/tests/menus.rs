//! The menu at real scale, end to end with real pi against the fake LLM: 60 models from four
//! providers paged eight at a time (all of them, or the ones pi has enabled with
//! `enabledModels`, in the agent dir or a trusted project), a pick on page 3 that pi then
//! uses, a model or thinking switch while a turn runs (pi takes it from its next model call in
//! that turn), and Status's token, cache and cost rows against the usage the fake reported;
//! both transports (headless `pi --mode rpc` and pi with the extension).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::chat::{buttons, message, press, wait_message, wait_text};
use common::pi::{PiSetup, connected_pi, install_extension, project, setup};
use common::wait_for;
use pi_testkit::PiRpc;
use serde_json::{Map, Value, json};

const PROVIDERS: [&str; 4] = ["alpha", "bravo", "charlie", "delta"];
/// Dollars per million tokens of every model: input, output, cache read, cache write. Large, so
/// a few hundred tokens make a cost the status shows to four decimals.
const COST: [f64; 4] = [1000.0, 2000.0, 100.0, 1250.0];

/// Replaces the fake's models.json with 60 models: 15 per provider (`alpha-m01` named
/// "Alpha 01" …), every provider served by the fake LLM; pi starts on `default`
/// (`provider/id`). `settings` are merged into pi's settings.json.
fn sixty_models(s: &PiSetup, default: &str, settings: Value) {
    models(s, 15, default, settings);
}

/// [`sixty_models`] with `per` models per provider.
fn models(s: &PiSetup, per: u32, default: &str, settings: Value) {
    let agent = s.pi.agent_dir();
    let providers: Map<String, Value> = PROVIDERS
        .iter()
        .map(|p| {
            let models: Vec<Value> = (1..=per)
                .map(|n| {
                    let title = format!("{}{}", p[..1].to_uppercase(), &p[1..]);
                    json!({
                        "id": format!("{p}-m{n:02}"),
                        "name": format!("{title} {n:02}"),
                        "reasoning": true,
                        "input": ["text"],
                        "contextWindow": 64000,
                        "maxTokens": 4096,
                        "cost": { "input": COST[0], "output": COST[1], "cacheRead": COST[2], "cacheWrite": COST[3] },
                    })
                })
                .collect();
            let provider = json!({
                "baseUrl": s.llm.base_url(),
                "api": "openai-completions",
                "apiKey": "fake-key",
                "compat": {
                    "supportsDeveloperRole": false,
                    "supportsReasoningEffort": true,
                    "supportsStore": false,
                },
                "models": models,
            });
            ((*p).to_owned(), provider)
        })
        .collect();
    std::fs::write(
        agent.join("models.json"),
        json!({ "providers": providers }).to_string(),
    )
    .unwrap();
    let path = agent.join("settings.json");
    let mut current: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let (provider, id) = default.split_once('/').unwrap();
    current["defaultProvider"] = json!(provider);
    current["defaultModel"] = json!(id);
    for (k, v) in settings.as_object().unwrap() {
        current[k] = v.clone();
    }
    std::fs::write(&path, current.to_string()).unwrap();
}

fn start(s: &PiSetup) -> common::Hub {
    let hub = s.env.serve();
    wait_for("the hub socket", 20, || {
        std::os::unix::net::UnixStream::connect(s.env.profile_dir().join("hub.sock")).is_ok()
    });
    hub
}

/// The model buttons of menu message `id` (its last two rows are the pages and the way back,
/// when there are pages).
fn model_labels(env: &common::Env, id: i64) -> Vec<String> {
    buttons(&message(env, id))
        .into_iter()
        .map(|(l, _)| l)
        .filter(|l| !matches!(l.as_str(), "◀" | "▶" | "« Menu") && !l.contains('/'))
        .collect()
}

/// Presses `label` on menu `id` and waits until its text says `page`.
fn turn_to(env: &common::Env, id: i64, label: &str, page: &str) {
    press(env, id, label);
    wait_for(page, 30, || {
        message(env, id).text.is_some_and(|t| t.contains(page))
    });
}

/// The model of the last request whose prompt holds `needle`.
fn model_of(s: &PiSetup, needle: &str) -> Value {
    s.llm
        .requests()
        .into_iter()
        .rfind(|r| r.to_string().contains(needle))
        .unwrap_or_else(|| panic!("no request with {needle:?}"))["model"]
        .clone()
}

fn names(prefix: &str, numbers: std::ops::RangeInclusive<u32>) -> Vec<String> {
    numbers.map(|n| format!("{prefix} {n:02}")).collect()
}

#[test]
fn sixty_models_page_eight_at_a_time_and_a_pick_on_page_3_switches_pi() {
    let Some(s) = setup() else { return };
    sixty_models(&s, "charlie/charlie-m05", json!({}));
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    env.say("/model");
    // The page with the current model comes first: charlie-m05 is the 35th of 60.
    let menu = wait_message(env, "the model menu", |t| t.starts_with("Model of web"));
    let text = menu.text.clone().unwrap();
    assert!(
        text.starts_with("Model of web: charlie/charlie-m05")
            && text.ends_with("All 60 models pi can use. Page 5 of 8."),
        "{text}"
    );
    let id = menu.message_id;
    let mut page5 = names("Charlie", 3..=10);
    page5[2] = "✓ Charlie 05".into();
    assert_eq!(model_labels(env, id), page5);
    assert!(buttons(&menu).iter().any(|(l, _)| l == "5/8"));
    // Back two pages, on one, and back again: the same message, edited.
    turn_to(env, id, "◀", "Page 4 of 8");
    turn_to(env, id, "◀", "Page 3 of 8");
    turn_to(env, id, "▶", "Page 4 of 8");
    assert_eq!(
        model_labels(env, id),
        [names("Bravo", 10..=15), names("Charlie", 1..=2)].concat()
    );
    turn_to(env, id, "◀", "Page 3 of 8");
    assert_eq!(model_labels(env, id), names("Bravo", 2..=9));
    // A pick on page 3: pi switches, and the menu shows the page with the new model.
    press(env, id, "Bravo 04");
    wait_for("the switch", 30, || {
        message(env, id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using bravo/bravo-m04.\n\n"))
    });
    assert!(model_labels(env, id).contains(&"✓ Bravo 04".to_owned()));
    env.say("which model now");
    wait_text(env, "the answer", |t| t == "echo: which model now");
    assert_eq!(model_of(&s, "which model now"), json!("bravo-m04"));
    // The page number goes back to the current model's page.
    turn_to(env, id, "▶", "Page 4 of 8");
    turn_to(env, id, "4/8", "Page 3 of 8");
    assert_eq!(hub.stop(), Some(0));
}

/// 200 models (50 a provider): every page tg-fake accepts (it refuses texts over 4096
/// characters and keyboards over 100 buttons), every model on exactly one of 25 pages, and a
/// pick on page 20 switches pi.
#[test]
fn two_hundred_models_are_each_reachable_by_paging_and_a_pick_on_page_20_switches_pi() {
    let Some(s) = setup() else { return };
    models(&s, 50, "alpha/alpha-m01", json!({}));
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    env.say("/model");
    let menu = wait_message(env, "the model menu", |t| t.starts_with("Model of web"));
    assert!(
        menu.text
            .as_deref()
            .unwrap()
            .ends_with("All 200 models pi can use. Page 1 of 25."),
        "{:?}",
        menu.text
    );
    let id = menu.message_id;
    let mut seen = Vec::new();
    for page in 1..=25 {
        seen.extend(
            model_labels(env, id)
                .into_iter()
                .map(|l| l.trim_start_matches("✓ ").to_owned()),
        );
        turn_to(env, id, "▶", &format!("Page {} of 25.", page % 25 + 1));
    }
    seen.sort();
    let mut all: Vec<String> = PROVIDERS
        .iter()
        .flat_map(|p| names(&format!("{}{}", p[..1].to_uppercase(), &p[1..]), 1..=50))
        .collect();
    all.sort();
    assert_eq!(seen, all, "every model once in 25 pages");
    let refused = common::chat::refused(env);
    assert!(refused.is_empty(), "tg-fake refused {refused:?}");
    // Page 20 holds Delta 03..Delta 10 (models 153..160); pick one there.
    for page in 2..=20 {
        turn_to(env, id, "▶", &format!("Page {page} of 25."));
    }
    press(env, id, "Delta 07");
    wait_for("the switch", 30, || {
        message(env, id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using delta/delta-m07."))
    });
    env.say("which model now");
    wait_text(env, "the answer", |t| t == "echo: which model now");
    assert_eq!(model_of(&s, "which model now"), json!("delta-m07"));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn only_the_models_pi_has_enabled_are_listed_from_the_agent_dir_or_a_trusted_project() {
    let Some(s) = setup() else { return };
    sixty_models(
        &s,
        "bravo/bravo-m02",
        json!({ "enabledModels": ["bravo/*", "charlie/charlie-m03", "delta-m1*"] }),
    );
    // A project pi trusts (trust.json) with its own list: pi there starts on its first model.
    let site = project(&s.pi, "site");
    std::fs::create_dir_all(format!("{site}/.pi")).unwrap();
    std::fs::write(
        format!("{site}/.pi/settings.json"),
        json!({ "enabledModels": ["alpha-m0*"] }).to_string(),
    )
    .unwrap();
    std::fs::write(
        s.pi.agent_dir().join("trust.json"),
        json!({ site.clone(): true }).to_string(),
    )
    .unwrap();
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "web connected", |t| t.starts_with("pi connected: web"));
    env.say("/model");
    let menu = wait_message(env, "web's model menu", |t| t.starts_with("Model of web"));
    let text = menu.text.clone().unwrap();
    assert!(
        text.ends_with(
            "The 22 models pi has enabled (enabledModels), of 60 it can use. Page 1 of 3."
        ),
        "{text}"
    );
    let id = menu.message_id;
    let mut page1 = names("Bravo", 1..=8);
    page1[1] = "✓ Bravo 02".into();
    assert_eq!(model_labels(env, id), page1);
    turn_to(env, id, "▶", "Page 2 of 3");
    assert_eq!(
        model_labels(env, id),
        [names("Bravo", 9..=15), names("Charlie", 3..=3)].concat()
    );
    turn_to(env, id, "▶", "Page 3 of 3");
    assert_eq!(model_labels(env, id), names("Delta", 10..=15));
    // Round: ▶ on the last page is the first.
    turn_to(env, id, "▶", "Page 1 of 3");
    turn_to(env, id, "◀", "Page 3 of 3");
    press(env, id, "Delta 12");
    wait_for("the switch", 30, || {
        message(env, id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using delta/delta-m12."))
    });
    env.say("and now");
    wait_text(env, "the answer", |t| t == "echo: and now");
    assert_eq!(model_of(&s, "and now"), json!("delta-m12"));
    // The project's list for the pi in that project: pi itself chose its first model from it.
    env.spawn_pi(&site);
    wait_text(env, "site connected", |t| {
        t.starts_with("pi connected: site")
    });
    env.say("/start");
    let start_menu = wait_message(env, "the main menu", |t| t.contains("site:"));
    press(env, start_menu.message_id, "site");
    wait_for("site selected", 30, || {
        message(env, start_menu.message_id)
            .text
            .is_some_and(|t| t.contains("This menu is about site"))
    });
    env.say("/model");
    let menu = wait_message(env, "site's model menu", |t| t.starts_with("Model of site"));
    let text = menu.text.clone().unwrap();
    assert!(
        text.starts_with("Model of site: alpha/alpha-m01")
            && text.ends_with(
                "The 9 models pi has enabled (enabledModels), of 60 it can use. Page 1 of 2."
            ),
        "{text}"
    );
    assert_eq!(hub.stop(), Some(0));
}

/// pi with the extension, connected to the hub.
fn extension_pi(s: &PiSetup) -> PiRpc {
    install_extension(s);
    let pi = connected_pi(s, None);
    wait_for("pi to connect", 30, || {
        s.env.status()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["transport"] == "shim" && i["state"] != "gone")
    });
    pi
}

#[test]
fn with_the_extension_pi_reports_its_own_enabled_models_and_a_pick_on_page_3_switches_it() {
    let Some(s) = setup() else { return };
    sixty_models(
        &s,
        "alpha/alpha-m01",
        json!({ "enabledModels": ["alpha/*", "bravo/*"] }),
    );
    let env = &s.env;
    let mut hub = start(&s);
    let pi = extension_pi(&s);
    env.say("/model");
    let menu = wait_message(env, "the model menu", |t| t.starts_with("Model of work"));
    let text = menu.text.clone().unwrap();
    assert!(
        text.ends_with(
            "The 30 models pi has enabled (enabledModels), of 60 it can use. Page 1 of 4."
        ),
        "{text}"
    );
    let id = menu.message_id;
    turn_to(env, id, "▶", "Page 2 of 4");
    turn_to(env, id, "▶", "Page 3 of 4");
    turn_to(env, id, "▶", "Page 4 of 4");
    turn_to(env, id, "◀", "Page 3 of 4");
    assert_eq!(model_labels(env, id), names("Bravo", 2..=9));
    press(env, id, "Bravo 06");
    wait_for("the switch", 30, || {
        message(env, id)
            .text
            .is_some_and(|t| t.starts_with("✓ Now using bravo/bravo-m06."))
    });
    env.say("which one");
    wait_text(env, "the answer", |t| t == "echo: which one");
    assert_eq!(model_of(&s, "which one"), json!("bravo-m06"));
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

/// Waits until pi's bash tool runs for the turn whose prompt holds `tag` (its first model
/// request is answered with the call), so a switch lands while the turn runs.
fn wait_tool_call(s: &PiSetup, tag: &str) {
    wait_for("pi's tool call", 60, || {
        s.llm.requests().iter().any(|r| r.to_string().contains(tag))
    });
    std::thread::sleep(Duration::from_millis(500));
}

/// The requests of the turn whose prompt holds `tag`: the first, and the one after its tool.
fn turn_requests(s: &PiSetup, tag: &str) -> (Value, Value) {
    let all: Vec<Value> = s
        .llm
        .requests()
        .into_iter()
        .filter(|r| r.to_string().contains(tag))
        .collect();
    assert!(all.len() >= 2, "{} requests with {tag}", all.len());
    let after = all
        .iter()
        .find(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.last())
                .is_some_and(|m| m["role"] == "tool")
        })
        .unwrap()
        .clone();
    (all[0].clone(), after)
}

#[test]
fn a_switch_while_a_turn_runs_applies_from_pis_next_model_call_in_that_turn() {
    let Some(s) = setup() else { return };
    sixty_models(&s, "alpha/alpha-m01", json!({}));
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    // The model: asked for during the turn's tool, pi's second request uses it.
    env.say("first turn [[bash:sleep 6; echo slept-one]]");
    wait_tool_call(&s, "slept-one");
    env.say("/model");
    let menu = wait_message(env, "the model menu", |t| t.starts_with("Model of web"));
    press(env, menu.message_id, "Alpha 07");
    let headline = "✓ Now using alpha/alpha-m07. pi is at work: this turn goes on with it from \
                    pi's next model call (what pi is writing now finishes as it began).";
    wait_for("the switch", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with(headline))
    });
    wait_text(env, "the tool's answer", |t| t == "tool said: slept-one");
    let (first, after) = turn_requests(&s, "slept-one");
    assert_eq!(first["model"], json!("alpha-m01"));
    assert_eq!(after["model"], json!("alpha-m07"));
    // The thinking level: the same.
    env.say("second turn [[bash:sleep 6; echo slept-two]]");
    wait_tool_call(&s, "slept-two");
    env.say("/thinking");
    let menu = wait_message(env, "the thinking menu", |t| {
        t.starts_with("Thinking level of web")
    });
    press(env, menu.message_id, "high");
    wait_for("the level", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Thinking level: high. pi is at work:"))
    });
    wait_text(env, "the tool's answer", |t| t == "tool said: slept-two");
    let (first, after) = turn_requests(&s, "slept-two");
    assert_ne!(
        first.get("reasoning_effort"),
        Some(&json!("high")),
        "{first}"
    );
    assert_eq!(after["reasoning_effort"], json!("high"), "{after}");
    // Idle, a switch says nothing more.
    wait_for("pi to be idle", 30, || {
        env.status()["instances"]
            .as_array()
            .is_some_and(|is| is.iter().any(|i| i["state"] == "idle"))
    });
    env.say("/thinking");
    let menu = wait_message(env, "the next thinking menu", |t| {
        t.starts_with("Thinking level of web: high")
    });
    press(env, menu.message_id, "low");
    wait_for("the level", 30, || {
        message(env, menu.message_id)
            .text
            .is_some_and(|t| t.starts_with("✓ Thinking level: low.\n\n"))
    });
    assert_eq!(hub.stop(), Some(0));
}

/// What the status's token, cache and cost rows must say after the fake's usages, all in pi's
/// one session: totals, and the latest request's hit rate.
fn expected_rows(s: &PiSetup) -> String {
    let usages = s.llm.usages();
    let n = |u: &Value, p: &str| u.pointer(p).and_then(Value::as_u64).unwrap();
    let (mut input, mut output, mut read, mut write) = (0, 0, 0, 0);
    for u in &usages {
        let (r, w) = (
            n(u, "/prompt_tokens_details/cached_tokens"),
            n(u, "/prompt_tokens_details/cache_write_tokens"),
        );
        input += n(u, "/prompt_tokens") - r - w;
        output += n(u, "/completion_tokens");
        read += r;
        write += w;
    }
    let last = usages.last().unwrap();
    let hit = (n(last, "/prompt_tokens_details/cached_tokens") * 100
        + n(last, "/prompt_tokens") / 2)
        / n(last, "/prompt_tokens");
    let cost = (input as f64 * COST[0]
        + output as f64 * COST[1]
        + read as f64 * COST[2]
        + write as f64 * COST[3])
        / 1e6;
    // Small counts are shown exactly.
    assert!(input.max(output).max(read).max(write) < 10_000);
    format!(
        "Tokens: {input} in, {output} out\nCache: {read} read, {write} write (latest request: \
         {hit}% hit)\nCost: ${cost:.4}"
    )
}

/// Two prompts, then the status: its rows are the fake's numbers.
fn status_rows_match_the_usage(s: &PiSetup, label: &str) {
    let env = &s.env;
    for words in ["a first prompt of a few words", "and a second one"] {
        env.say(words);
        wait_text(env, "the answer", |t| t == format!("echo: {words}"));
    }
    wait_for("pi to be idle", 30, || {
        env.status()["instances"]
            .as_array()
            .is_some_and(|is| is.iter().any(|i| i["state"] == "idle"))
    });
    env.say("/status");
    let status = wait_text(env, "the status", |t| {
        t.starts_with(&format!("Status of {label}"))
    });
    assert!(
        status.ends_with(&expected_rows(s)),
        "{status}\nexpected:\n{}",
        expected_rows(s)
    );
}

#[test]
fn status_shows_tokens_the_cache_and_cost_of_a_headless_pi() {
    let Some(s) = setup() else { return };
    sixty_models(&s, "delta/delta-m03", json!({}));
    let mut hub = start(&s);
    s.env.spawn_pi(&project(&s.pi, "web"));
    wait_text(&s.env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    status_rows_match_the_usage(&s, "web");
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn status_shows_tokens_the_cache_and_cost_of_a_pi_with_the_extension() {
    let Some(s) = setup() else { return };
    sixty_models(&s, "delta/delta-m03", json!({}));
    let mut hub = start(&s);
    let pi = extension_pi(&s);
    status_rows_match_the_usage(&s, "work");
    let _ = pi.close(Duration::from_secs(20));
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn the_queue_strikes_skipped_prompts_through_and_says_what_waits_after_an_abort() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = start(&s);
    env.spawn_pi(&project(&s.pi, "web"));
    wait_text(env, "the connected notice", |t| {
        t.starts_with("pi connected: web")
    });
    let words: Vec<String> = (1..=60).map(|i| format!("w{i}")).collect();
    env.say(&format!("[[slow]] busy {}", words.join(" ")));
    wait_for("the slow turn", 30, || {
        s.llm
            .requests()
            .iter()
            .any(|r| r.to_string().contains("busy w1"))
    });
    env.say("one that runs");
    let skipped = env.say("one to skip").message_id;
    env.fake
        .control()
        .react(tg_fake::control::React {
            message_id: skipped,
            emoji: Some("👎".into()),
            user_id: None,
            token: None,
        })
        .unwrap();
    wait_for("the skip", 20, || {
        env.open_store()
            .read(|c| store::turns::by_message(c, common::OWNER, skipped))
            .unwrap()
            .is_some_and(|t| t.skip)
    });
    env.say("/abort");
    wait_text(env, "the abort reply", |t| t.starts_with("⏹ Aborting web"));
    env.say("/queue");
    let queue = wait_message(env, "the queue", |t| t.starts_with("Waiting for web"));
    let text = queue.text.clone().unwrap();
    assert_eq!(
        text,
        "Waiting for web: 1, and 1 skipped\nAfter your /abort they go to pi with your next \
         message, as said before it (/next runs them one by one).\n1. one that runs\n2. one to \
         skip (skipped)"
    );
    // Telegram took the strikethrough over the skipped prompt's words (and found the
    // commands itself).
    let at = text.find("one to skip").unwrap();
    let struck: Vec<&Value> = queue
        .entities
        .iter()
        .filter(|e| e["type"] == "strikethrough")
        .collect();
    assert_eq!(
        struck,
        [
            &json!({ "type": "strikethrough", "offset": text[..at].encode_utf16().count(), "length": 11 })
        ]
    );
    env.say("and now this");
    let answer = wait_text(env, "the answer to both", |t| {
        t.contains("one that runs") && t.contains("and now this")
    });
    assert!(!answer.contains("one to skip"), "{answer}");
    wait_text(env, "the skip notice", |t| {
        t.starts_with("⏭ Skipped \"one to skip\"")
    });
    assert_eq!(hub.stop(), Some(0));
}
