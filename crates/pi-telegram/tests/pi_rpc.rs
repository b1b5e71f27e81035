//! End to end with real pi: the hub spawns `pi --mode rpc` instances (against the fake LLM) and
//! the owner talks to them through tg-fake.
#![allow(clippy::unwrap_used)]

mod common;

use common::pi::{project, setup};
use common::{OWNER, wait_for};
use serde_json::json;

#[test]
fn a_headless_pi_answers_and_a_second_message_waits_for_the_first() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let web = project(&s.pi, "web");
    env.spawn_pi(&web);
    wait_for("the connected notice", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi connected: web"))
    });
    env.say("hello pi");
    wait_for("pi's answer", 30, || {
        env.bot_texts(OWNER).iter().any(|t| t == "echo: hello pi")
    });
    // A slow answer, and a second message sent while pi is still streaming it.
    env.say("[[slow]] one two three four");
    wait_for("pi to start the slow one", 30, || {
        s.llm.requests().len() >= 2
    });
    env.say("second");
    wait_for("both answers", 60, || {
        env.bot_texts(OWNER).iter().any(|t| t == "echo: second")
    });
    let texts = env.bot_texts(OWNER);
    let slow = texts
        .iter()
        .position(|t| t == "echo: [[slow]] one two three four")
        .unwrap();
    let second = texts.iter().position(|t| t == "echo: second").unwrap();
    assert!(slow < second, "answered in order: {texts:?}");
    // pi saw the second prompt only after the first had settled: its request came last and
    // carried the first exchange as history.
    let last = s.llm.requests().last().unwrap().clone();
    let history = last["messages"].to_string();
    assert!(
        history.contains("one two three four") && history.contains("second"),
        "{history}"
    );
    assert_eq!(hub.stop(), Some(0));
    let st = env.status();
    assert_eq!(st["turns"]["done"], json!(3));
    assert_eq!(st["instances"][0]["transport"], json!("rpc"));
}

#[test]
fn two_headless_instances_each_answer_their_own_messages_and_an_exit_is_noticed() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    let (a, b) = (project(&s.pi, "alpha"), project(&s.pi, "beta"));
    env.spawn_pi(&a);
    wait_for("alpha", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi connected: alpha"))
    });
    env.spawn_pi(&b);
    wait_for("beta", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi connected: beta"))
    });
    env.say("for alpha");
    wait_for("alpha's answer", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "[alpha]\necho: for alpha")
    });
    // Switch to beta with the /start chooser.
    env.say("/start");
    wait_for("the chooser", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.contains("Connected pi instances"))
    });
    let transcript = env
        .fake
        .control()
        .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
        .unwrap();
    let chooser = transcript
        .iter()
        .rev()
        .find(|m| m.reply_markup.is_some())
        .unwrap();
    let rows = chooser.reply_markup.as_ref().unwrap()["inline_keyboard"]
        .as_array()
        .unwrap()
        .clone();
    let beta = rows
        .iter()
        .map(|r| &r[0])
        .find(|b| b["text"].as_str().unwrap().contains("beta"))
        .unwrap();
    env.fake
        .control()
        .press(tg_fake::control::Press {
            message_id: chooser.message_id,
            data: beta["callback_data"].as_str().unwrap().into(),
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_for("the switch", 30, || {
        env.status()["instances"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["label"] == "beta" && i["selected"] == true)
    });
    env.say("for beta");
    wait_for("beta's answer", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "[beta]\necho: for beta")
    });
    // Beta's pi exits: the owner is told, new messages go to alpha.
    let st = env.status();
    let pid = st["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == "beta")
        .unwrap()["pid"]
        .as_i64()
        .unwrap();
    assert!(
        std::process::Command::new("kill")
            .arg(pid.to_string())
            .status()
            .unwrap()
            .success()
    );
    wait_for("the exit notice", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi beta is gone: pi exited"))
    });
    env.say("who is left?");
    wait_for("alpha answers", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: who is left?")
    });
    assert_eq!(hub.stop(), Some(0));
}

#[test]
fn an_extension_commands_dialog_is_asked_and_the_command_finishes_its_turn() {
    let Some(s) = setup() else { return };
    let env = &s.env;
    // An extension in pi's agent dir whose command asks for a confirmation.
    let ext = s.pi.agent_dir().join("extensions");
    std::fs::create_dir_all(&ext).unwrap();
    std::fs::write(
        ext.join("probe.ts"),
        r#"export default function (pi: any) {
  pi.registerCommand("probe", {
    description: "asks for confirmation",
    handler: async (_args: string, ctx: any) => {
      const ok = await ctx.ui.confirm("Really?", "probe dialog");
      pi.appendEntry?.("probe-result", { ok });
      if (ctx.hasUI) ctx.ui.notify(`probe answered ${ok}`, "info");
    },
  });
}
"#,
    )
    .unwrap();
    let mut hub = env.serve();
    wait_for("the hub socket", 20, || {
        env.profile_dir().join("hub.sock").exists()
    });
    env.spawn_pi(&project(&s.pi, "probe-project"));
    wait_for("connected", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t.starts_with("pi connected"))
    });
    env.say("/probe");
    // The command's dialog is the person's question (tests/dialogs.rs has every kind).
    let mut question = None;
    wait_for("the command's question", 30, || {
        question = env
            .fake
            .control()
            .transcript(Some(OWNER), tg_fake::control::ThreadFilter::All, None)
            .unwrap()
            .into_iter()
            .find(|m| {
                m.from_bot
                    && m.text
                        .as_deref()
                        .is_some_and(|t| t.contains("asks: Really?"))
            });
        question.is_some()
    });
    let question = question.unwrap();
    let yes = question.reply_markup.as_ref().unwrap()["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_owned();
    env.fake
        .control()
        .press(tg_fake::control::Press {
            message_id: question.message_id,
            data: yes,
            user_id: None,
            token: None,
            chat_id: None,
        })
        .unwrap();
    wait_for("the command's turn to finish", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "✓ pi ran /probe (a command: what it shows, it shows in pi)")
    });
    wait_for("pi got the answer", 30, || {
        env.bot_texts(OWNER).iter().any(|t| t.contains("→ ✅ Yes"))
    });
    // The instance is free again: the next message is answered.
    env.say("after the dialog");
    wait_for("the next answer", 30, || {
        env.bot_texts(OWNER)
            .iter()
            .any(|t| t == "echo: after the dialog")
    });
    assert_eq!(hub.stop(), Some(0));
}
