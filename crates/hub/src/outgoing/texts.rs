//! What the bot says. Plain text (no parse mode), so nothing here can fail entity parsing.

use std::path::Path;

pub mod people;

/// Reply to `/start` and `/help` from the owner.
pub fn help(bot_username: &str) -> String {
    format!(
        "pi-telegram is running for @{bot_username}.\n\n\
         To work with pi from here, open a terminal where pi runs and type /telegram-connect \
         (install it in pi once with `pi install npm:pi-telegram`).\n\n\
         Messages you send before a pi instance connects are kept and handed over in order. \
         React 👍 to a waiting message to move it to the front, 👎 to skip it; edit it to change \
         what pi gets.\n\n\
         Commands: /start the menu · /status · /model · /thinking · /queue · /settings · /abort \
         the running turn · /stop it and drop what waits · /next · /continue · /compact · /help \
         this · /new start pi in a folder (or a new session) · /sessions resume one · /close \
         a pi the hub started · /people invite others or remove them. pi's prompt templates work \
         as commands too."
    )
}

/// A successful pairing.
pub fn paired(bot_username: &str) -> String {
    format!(
        "Paired: you own @{bot_username} now. Only your messages will reach pi.\n\n{}",
        help(bot_username)
    )
}

/// First-contact pairing.
pub fn paired_first_contact(bot_username: &str) -> String {
    format!(
        "You are the owner of @{bot_username} now (first-contact pairing). Only your messages will reach pi.\n\n{}",
        help(bot_username)
    )
}

/// A wrong pairing code; `attempts_left` are this sender's own (0: the last one, said once:
/// the sender is not answered again until a new code is made).
pub fn wrong_code(attempts_left: i64) -> String {
    if attempts_left > 0 {
        format!("That pairing code is not right. {attempts_left} attempt(s) left.")
    } else {
        "That pairing code is not right, and that was your last attempt with it: I will not \
         answer you again until a new code is made (run `pi-telegram setup` for one)."
            .to_owned()
    }
}

/// `/start` while no code is open.
pub fn no_code_open() -> String {
    "This bot is not paired with anyone yet. On your computer run `pi-telegram setup`, then send \
     the /start command with the code it prints."
        .to_owned()
}

/// `/start` without a code while one is open.
pub fn code_needed() -> String {
    "This bot is not paired yet. Send /start followed by the code `pi-telegram setup` printed, \
     for example: /start ABCD2345"
        .to_owned()
}

/// Answer to a button the hub does not know (yet).
pub fn unknown_button() -> String {
    "This button is no longer active.".to_owned()
}

/// The first line of a copy sent again because Telegram's answer to the first send was lost
/// (the person may see both). Answers are cut well below the limit, so it always fits.
pub const REPEAT_MARK: &str = "↻ Sent again: an earlier copy may have arrived too.\n\n";

/// Telegram's message limit is 4096 UTF-16 units; answers are cut a little below it.
pub const ANSWER_PIECE: usize = 4000;

/// No instance is connected: the message waits (one notice per episode).
pub fn no_instance() -> String {
    "No pi instance is connected, so I am keeping your message; it goes to the first pi that \
     connects. In a terminal where pi runs, type /telegram-connect."
        .to_owned()
}

pub fn instance_connected(label: &str, cwd: &str, selected: bool, waiting: i64) -> String {
    let mut t = format!("pi connected: {label} ({cwd}).");
    if selected {
        t.push_str(" Your messages go there.");
    }
    if waiting > 0 {
        t.push_str(&format!(" Handing over {waiting} waiting message(s)."));
    }
    t
}

/// A pi took the messages that waited for the first pi to connect. `threaded`: its answers
/// come in its topic.
pub fn took_waiting(label: &str, n: i64, threaded: bool) -> String {
    let mut t = format!("pi {label} connected and takes your {n} waiting message(s).");
    if threaded {
        t.push_str(" Its answers come in its thread.");
    }
    t
}

/// An instance left (classic mode, in the one chat).
pub fn instance_gone(label: &str, why: &str, queued: i64, now_selected: Option<&str>) -> String {
    let mut t = format!("pi {label} is gone: {why}.");
    if queued > 0 {
        t.push_str(&format!(
            " {queued} message(s) for it wait until it comes back."
        ));
    }
    match now_selected {
        Some(other) => t.push_str(&format!(" New messages now go to {other}.")),
        None => t.push_str(" No pi instance is connected now."),
    }
    t
}

/// An instance lost its connection; said in its own topic, where messages wait for it.
pub fn topic_went_offline(label: &str, why: &str, cwd: &str, queued: i64) -> String {
    let mut t = format!(
        "pi {label} went offline: {why}. Messages you write here wait for it; to reconnect, run pi \
         in {cwd} and type /telegram-connect."
    );
    if queued > 0 {
        t.push_str(&format!(" {queued} message(s) are waiting already."));
    }
    t
}

/// An instance left in Threaded Mode, said in the main chat (it had no topic, or the person
/// disconnected it and its topic is removed).
pub fn threaded_gone(label: &str, why: &str, queued: i64, topic_removed: bool) -> String {
    let mut t = format!("pi {label} is gone: {why}.");
    if topic_removed {
        t.push_str(" Its thread is removed.");
    }
    if queued > 0 {
        t.push_str(&format!(
            " {queued} message(s) for it wait until a pi connects in its folder again."
        ));
    }
    t
}

/// The message is for a pi that is not connected: it waits for it (`others`: buttons to send
/// it elsewhere follow).
pub fn waits_for(label: &str, cwd: &str, others: bool) -> String {
    let mut t = format!(
        "pi {label} is offline. Your message waits for it; to reconnect, run pi in {cwd} \
         and type /telegram-connect."
    );
    if others {
        t.push_str(" Or send it to a pi that is connected:");
    }
    t
}

/// After a hub restart the person did not ask for: turns that were running are not finished.
pub fn restart_interrupted(prompts: &[String]) -> String {
    let quoted: Vec<String> = prompts
        .iter()
        .map(|p| format!("\"{}\"", short(p)))
        .collect();
    format!(
        "The hub restarted while pi was working on {}. It may have done part of the work; send \
         it again if you still need it.",
        quoted.join(", ")
    )
}

/// Headless turns a hub crash cut off before pi started a tool: they run again.
pub fn restart_again(prompts: &[String]) -> String {
    let quoted: Vec<String> = prompts
        .iter()
        .map(|p| format!("\"{}\"", short(p)))
        .collect();
    let (it, runs) = if prompts.len() == 1 {
        ("it", "runs")
    } else {
        ("they", "run")
    };
    format!(
        "The hub restarted while pi was working on {}. pi had not started any tool, so {it} \
         {runs} again.",
        quoted.join(", ")
    )
}

/// What pi reads with a prompt it may have seen before the hub's crash cut its turn off.
pub const SENT_AGAIN: &str = "[telegram: the hub restarted before this message was answered; it \
                              is sent again. Any reply you started to it did not reach the person.]";

fn short(prompt: &str) -> String {
    let s: String = prompt.chars().take(80).collect();
    if prompt.chars().count() > 80 {
        format!("{s}…")
    } else {
        s
    }
}

/// A turn could not finish because its instance went away.
pub fn turn_interrupted(label: &str, prompt: &str) -> String {
    format!(
        "pi {label} stopped before answering \"{}\". It may have done part of the work; \
         send the message again if you still need it.",
        short(prompt)
    )
}

/// Why a turn ended when pi had answered it before and the hub's state lost that answer.
pub const ANSWER_LOST: &str = "answered before the hub's state was lost";

/// A turn pi had answered before the hub's state lost that answer (a crash of the hub's
/// machine): pi will not answer it again.
pub fn answer_lost(label: &str, prompt: &str) -> String {
    format!(
        "pi {label} had already answered \"{}\", but that answer was lost when the hub's \
         machine stopped. Send the message again if you still need the answer.",
        short(prompt)
    )
}

/// The answer to a turn as Markdown: pi's own Markdown, with a label line when several pi
/// talk in one chat; what the bot says itself (an error, an empty answer) escaped so it shows
/// as written. `handled`: the turn's prompt, when pi handled it itself (one of its extensions'
/// commands ran, without a run of the model).
pub fn answer_markdown(
    label: Option<&str>,
    text: &str,
    aborted: bool,
    error: Option<&str>,
    handled: Option<&str>,
) -> String {
    use crate::outgoing::delivery::escape_markdown;
    let text = trim_invisible(text);
    let body = match (text.is_empty(), error, aborted) {
        (true, Some(e), _) => escape_markdown(&format!("pi reported an error: {e}")),
        (true, None, true) => escape_markdown("⏹ Aborted before answering."),
        (true, None, false) => escape_markdown(&match handled.map(command_of) {
            Some(Some(command)) => {
                format!("✓ pi ran {command} (a command: what it shows, it shows in pi)")
            }
            Some(None) => "✓ pi took the message itself, without a text answer".to_owned(),
            None => "(pi finished without a text answer)".to_owned(),
        }),
        // The answer so far, marked.
        (false, _, true) => {
            // Cut short inside a code block: the mark goes after the block, not into it.
            let closed = match tg_format::markdown::preview::closing_fence(text) {
                Some(fence) => format!("{text}\n{fence}"),
                None => text.to_owned(),
            };
            format!("{closed}\n\n{}", escape_markdown("⏹ Aborted."))
        }
        // Sent as it is, the person would get nothing at all.
        _ if tg_format::markdown::shows_nothing(text) => {
            format!(
                "{}\n\n{}",
                escape_markdown(NOTHING_VISIBLE),
                code_block(text)
            )
        }
        _ => text.to_owned(),
    };
    match label {
        // Its own paragraph: a list or code the answer starts with stays what it is.
        Some(l) => format!("{}\n\n{body}", escape_markdown(&format!("[{l}]"))),
        None => body,
    }
}

/// What the bot says before an answer that shows nothing once formatted (it shows the answer
/// as pi wrote it).
pub const NOTHING_VISIBLE: &str = "pi's answer shows nothing once formatted; as pi wrote it:";

/// `text` as a fenced code block, shown exactly as written.
fn code_block(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}\n{text}\n{fence}")
}

/// `text` without what no rendering shows: blank lines before the first line with something
/// on it, and whitespace at the end. The first line's indentation stays: four spaces make a
/// code block, and a trimmed `    # foo` would become a heading.
pub fn trim_invisible(text: &str) -> &str {
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if !line.trim().is_empty() {
            break;
        }
        start += line.len();
    }
    text[start..].trim_end()
}

/// The command a prompt runs (`/greet-me` of `/greet-me Ada`), if it is one.
fn command_of(prompt: &str) -> Option<&str> {
    let command = prompt.split_whitespace().next()?;
    (command.len() > 1 && command.starts_with('/')).then_some(command)
}

/// Work pi did that did not come from Telegram (a prompt typed in the terminal, a follow-up
/// an extension started), pushed to Telegram: marked as such, with the instance's label when
/// several pi share the chat.
pub fn local_work_markdown(label: Option<&str>, text: &str) -> String {
    use crate::outgoing::delivery::escape_markdown;
    let head = match label {
        Some(l) => format!("💻 {l}, from the terminal:"),
        None => "💻 From the terminal:".to_owned(),
    };
    format!("{}\n\n{text}", escape_markdown(&head))
}

/// The instance list for `/start`.
pub fn instances_intro(labels: &[(String, String, bool)]) -> String {
    if labels.is_empty() {
        return "No pi instance is connected yet.".to_owned();
    }
    let mut t = "Connected pi instances (tap one to send your messages there):".to_owned();
    for (label, cwd, selected) in labels {
        t.push_str(&format!(
            "\n{} {label}: {cwd}",
            if *selected { "▶" } else { "•" }
        ));
    }
    t
}

/// A message whose content (a location, a contact, a poll...) cannot be handed to pi.
/// `captioned`: the caption went to pi without it.
pub fn attachment_not_delivered(field: &str, captioned: bool) -> String {
    let what = match field {
        "photo" => "photo",
        "animation" => "animation",
        "video" => "video",
        "video_note" => "video message",
        "voice" => "voice message",
        "audio" => "audio file",
        "sticker" => "sticker",
        "document" => "file",
        "location" | "venue" => "location",
        "contact" => "contact",
        "poll" => "poll",
        _ => "attachment",
    };
    if captioned {
        format!("Only your caption reached pi: a {what} cannot be handed to pi.")
    } else {
        format!("A {what} cannot be handed to pi, so nothing was sent to it.")
    }
}

/// Threaded Mode was switched on or off in BotFather.
pub fn mode_changed(on: bool) -> String {
    if on {
        "Threaded Mode is on: each pi instance gets its own thread here.".to_owned()
    } else {
        format!(
            "Threaded Mode is off, so all pi instances share this chat again (their threads are kept). {}",
            enable_tip()
        )
    }
}

/// Where the switch is.
pub fn enable_tip() -> String {
    "To give each pi instance its own thread: open @BotFather, tap Open (its Mini App), choose this \
     bot and turn on Threaded Mode."
        .to_owned()
}

/// Where a paged list is: `Page 2 of 13.` (`page` counted from 0).
pub fn page_of(page: usize, pages: usize) -> String {
    format!("Page {} of {pages}.", page + 1)
}

/// What a tap on a paging button is told: `Page 3` (`page` counted from 0).
pub fn page_number(page: usize) -> String {
    format!("Page {}", page + 1)
}

/// The count a paged list of instances starts with when it has more than one page.
pub fn instances_counted(n: usize, page: usize, pages: usize) -> String {
    format!("{n} pi instances. {}", page_of(page, pages))
}

/// The first message in an instance's topic.
pub fn thread_greeting(label: &str, cwd: &str, fresh: bool, delivered: usize) -> String {
    let mut t = if fresh {
        format!("pi connected: {label} ({cwd}). Write here to talk to it.")
    } else {
        format!("pi is back: {label} ({cwd}).")
    };
    if delivered > 0 {
        t.push_str(&format!(
            "\nThe previous thread was deleted; {delivered} message(s) that were on their way are delivered here."
        ));
    }
    t
}

/// Telegram refused to create a topic.
pub fn thread_refused(label: &str, why: &str) -> String {
    let fix = if why.contains("not enough rights") {
        " To give it one, make the bot an admin of this group with the right to manage topics, \
         then reconnect the pi (/telegram-connect in its terminal)."
    } else {
        ""
    };
    format!(
        "Telegram refused a thread for {label} ({why}); its answers come here in the main chat.{fix}"
    )
}

/// The pi without a thread because every one of the `slots` thread names is in use (one
/// message for all of them, edited as they come and go; long lists cut to stay well within a
/// message).
pub fn no_slot(labels: &[String], slots: usize) -> String {
    const NAMED: usize = 40;
    let mut names = labels
        .iter()
        .take(NAMED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if labels.len() > NAMED {
        names.push_str(&format!(" and {} more", labels.len() - NAMED));
    }
    match labels.len() {
        1 => format!(
            "{names} has no thread: all {slots} thread names are in use. Its answers come here in the main chat."
        ),
        n => format!(
            "{n} pi have no thread: all {slots} thread names are in use. Their answers come here in the main chat: {names}."
        ),
    }
}

/// The no-thread notice once every live pi has a thread again (or none is left without one).
pub fn no_slot_over() -> String {
    "Every connected pi has its thread now.".to_owned()
}

/// A topic creation whose outcome is unknown. `hub_stopped`: the hub stopped during the call;
/// otherwise Telegram's answer was lost. The technical detail stays in `status`.
pub fn ambiguous_intent(title: &str, hub_stopped: bool) -> String {
    let why = if hub_stopped {
        "the hub stopped while asking"
    } else {
        "Telegram's answer was lost"
    };
    format!(
        "I asked Telegram for a thread \"{title}\", but {why}, so I cannot tell whether it was \
         made. If that thread appeared, write anything in it and choose \"Move here\". Otherwise \
         pick one:"
    )
}

/// A message in a topic no instance owns.
pub fn unbound_topic() -> String {
    "No pi instance uses this thread. Send the message to one, or move an instance here:".to_owned()
}

/// A prompt in the main chat while threads exist.
pub fn main_chat_chooser() -> String {
    "Which pi should get this message?".to_owned()
}

/// A chooser button for a message that already went to an instance (`to`: where).
pub fn already_sent(to: Option<&str>) -> String {
    match to {
        Some(label) => format!("That message went to {label} already."),
        None => "That message was handled already.".to_owned(),
    }
}

/// The line a chooser message gets once the person chose (its buttons go).
pub fn chosen(label: &str) -> String {
    format!("→ Sent to {label}.")
}

/// The line a chooser message gets when its message was taken already (the same line as the
/// first tap's, so two quick taps leave one truthful text).
pub fn chosen_before(label: Option<&str>) -> String {
    match label {
        Some(l) => chosen(l),
        None => "→ Handled already.".to_owned(),
    }
}

/// "Move here" could not bind the topic.
pub fn move_refused() -> String {
    "Could not move it here: the topic is taken, no letter is free, or the hub is restarting."
        .to_owned()
}

/// Said in a topic the person bound with "move here".
pub fn moved_here(label: &str, cwd: &str) -> String {
    format!("pi {label} ({cwd}) lives in this thread now; its old thread is removed.")
}

/// A button for an intent that was settled already.
pub fn intent_settled() -> String {
    "That was settled already.".to_owned()
}

/// An edit of a message pi has already.
pub fn edit_too_late() -> String {
    "pi has this message already, so the edit does not reach it. Send a new message instead."
        .to_owned()
}

/// An edit that would make a waiting message one of the hub's commands (or an unknown one).
pub fn edit_into_command() -> String {
    "The message still waits as it was: an edit cannot turn it into a command. Send the command \
     as a new message."
        .to_owned()
}

/// A control about a pi that is not connected.
pub fn not_connected(label: &str) -> String {
    format!("pi {label} is not connected.")
}

/// A menu about an instance, where there is none.
pub fn no_instance_here() -> String {
    "No pi instance is connected here. In a terminal where pi runs, type /telegram-connect."
        .to_owned()
}

/// A control in a place that does not say which pi it is for.
pub fn which_pi(command: &str) -> String {
    format!(
        "Which pi? Use /{command} in the thread of the pi you mean (or open /start to see them)."
    )
}

/// What `/abort`, `/stop` or `/next` did; `held`: what waits goes to pi with the person's
/// next message (after an `/abort` of a Telegram turn).
pub fn stopped(
    label: &str,
    stop: bool,
    running: bool,
    dropped: usize,
    waiting: usize,
    next: bool,
    held: bool,
) -> String {
    let mut t = if running {
        format!("⏹ Aborting {label}'s current turn; its answer so far comes marked as aborted.")
    } else {
        format!("Nothing is running on {label}.")
    };
    if stop {
        t.push_str(&format!(" Dropped {dropped} waiting message(s)."));
    } else if next && waiting > 0 {
        t.push_str(&format!(
            " Its next waiting message goes next ({waiting} waiting)."
        ));
    } else if next {
        t.push_str(" Nothing is waiting for it.");
    } else if waiting > 0 && held {
        t.push_str(&format!(
            " {waiting} waiting message(s) go to pi with your next message, as said before it \
             (/next runs them one by one instead)."
        ));
    } else if waiting > 0 {
        t.push_str(&format!(" {waiting} message(s) still wait for it."));
    }
    t
}

/// The prompt of the person's first message after an `/abort`, with the prompts that waited
/// behind the aborted turn (`earlier`, oldest first) before its own `words`: pi reads them as
/// what the person said before it.
pub fn folded_prompt(earlier: &[String], words: &str) -> String {
    let mut t = String::from(
        "The person aborted the turn before this one. These messages of theirs waited behind it; \
         take them as said before this message, in order:",
    );
    for (n, e) in earlier.iter().enumerate() {
        t.push_str(&format!("\n\n{}. {e}", n + 1));
    }
    t.push_str(&format!("\n\nThis message:\n{words}"));
    t
}

/// The question before a compaction.
pub fn compact_question(label: &str) -> String {
    format!(
        "Compact {label}'s session? pi summarises the conversation so far and continues from the \
         summary."
    )
}

/// A command nobody knows.
pub fn unknown_command(cmd: &str) -> String {
    format!("/{cmd} is not a command here or in pi, so it was not sent. /help lists the commands.")
}

/// A queue button did its job.
pub fn queue_changed(op: crate::buttons::QueueOp) -> String {
    use crate::buttons::QueueOp;
    match op {
        QueueOp::Priority => "Moved to the front lane",
        QueueOp::Normal => "Back in the normal lane",
        QueueOp::Skip => "It will be skipped",
        QueueOp::Keep => "It will run",
        QueueOp::Remove => "Removed",
    }
    .to_owned()
}

/// A queue button for a prompt pi has already.
pub fn queue_too_late() -> String {
    "pi has that message already.".to_owned()
}

/// A skipped prompt, dropped without a model turn.
pub fn skipped(prompt: &str) -> String {
    let short: String = prompt.chars().take(80).collect();
    let more = if prompt.chars().count() > 80 {
        "…"
    } else {
        ""
    };
    format!("⏭ Skipped \"{short}{more}\": it did not reach pi.")
}

/// The outcome of a compaction.
pub fn compacted(label: &str, tokens_before: Option<u64>) -> String {
    match tokens_before {
        Some(t) => format!("✓ {label}'s session is compacted (it had {t} tokens of context)."),
        None => format!("✓ {label}'s session is compacted."),
    }
}

/// How a compaction pi started of its own accord ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compacted {
    /// It is done: the context's tokens before and after, as far as pi says; pi retries the
    /// prompt that overflowed.
    Done {
        before: Option<u64>,
        after: Option<u64>,
        retry: bool,
    },
    /// It was stopped.
    Stopped,
    /// It failed.
    Failed { why: String },
}

/// pi compacts its context of its own accord.
pub fn compacting(label: &str, overflow: bool) -> String {
    if overflow {
        format!(
            "🗜 {label}'s context overflowed: pi is compacting it (summarising the older part) \
             and will try again. Messages wait until it is done."
        )
    } else {
        format!(
            "🗜 {label}'s context is nearly full: pi is compacting it (summarising the older \
             part). Messages wait until it is done."
        )
    }
}

/// A thousands-separated count (`150,000`).
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How a compaction pi started of its own accord ended.
pub fn compacted_by_pi(label: &str, how: &Compacted) -> String {
    match how {
        Compacted::Done {
            before,
            after,
            retry,
        } => {
            let tokens = match (before, after) {
                (Some(b), Some(a)) => format!(": {} → {} tokens", thousands(*b), thousands(*a)),
                (Some(b), None) => format!(" (it had {} tokens)", thousands(*b)),
                _ => String::new(),
            };
            let then = if *retry {
                " pi tries the prompt again."
            } else {
                ""
            };
            format!("🗜 {label}'s context is compacted{tokens}.{then}")
        }
        Compacted::Stopped => {
            format!("🗜 {label}'s compaction was stopped; the context is as it was.")
        }
        Compacted::Failed { why } => {
            format!("🗜 {label}'s context could not be compacted: {why}")
        }
    }
}

/// The topics of pis offline for more than `days` days, offered for deletion.
pub fn retention_offer(titles: &[&str], days: u64) -> String {
    let n = titles.len();
    let which = titles.join(", ");
    let topics = if n == 1 { "topic" } else { "topics" };
    format!(
        "🧹 {n} {topics} of pis offline for more than {days} day(s): {which}. Their letters are \
         free again. Delete the {topics}? What was written in them goes with them; a pi that \
         comes back gets a new one."
    )
}

/// A tapped button whose prompt is a Generative App's `app::method`.
pub fn app_action_refused() -> String {
    "This button calls a Generative App (app::method), which this hub does not run; nothing \
     was sent to pi."
        .to_owned()
}

/// A compaction that failed.
pub fn compact_failed(label: &str, why: &str) -> String {
    format!("{label}'s session was not compacted: {why}")
}

/// A tap on a button of a question that was settled already.
pub fn settled_already(how: &str) -> String {
    if how.is_empty() {
        "That was settled already.".to_owned()
    } else {
        format!("Settled already: {how}")
    }
}

/// A model switch that took.
/// pi switched models; `busy`: while it was at work, where pi 1.6.0 takes the new model for
/// the run's next model request (the one streaming now finishes as it began).
pub fn model_switched(model: &str, busy: bool) -> String {
    if busy {
        format!("✓ Now using {model}. {MID_RUN}")
    } else {
        format!("✓ Now using {model}.")
    }
}

/// The thinking level pi settled on (it clamps to what the model supports); `busy` as
/// [`model_switched`].
pub fn thinking_set(level: &str, busy: bool) -> String {
    if busy {
        format!("✓ Thinking level: {level}. {MID_RUN}")
    } else {
        format!("✓ Thinking level: {level}.")
    }
}

/// What a switch does to the run pi is at.
const MID_RUN: &str = "pi is at work: this turn goes on with it from pi's next model call (what \
                       pi is writing now finishes as it began).";

/// A switch pi refused or did not answer.
pub fn switch_failed(why: &str) -> String {
    format!("Not switched: {why}")
}

/// A compaction handed to pi by a hub that stopped before pi answered.
pub fn compact_unknown(label: &str) -> String {
    format!(
        "The hub restarted while {label} was compacting, so whether it finished is not known. \
         /status shows the context in use now."
    )
}

/// A menu section pi could not fill.
pub fn pi_did_not_answer(label: &str, why: &str) -> String {
    format!("pi {label} did not answer: {why}")
}

/// A file that came with a message and was not downloaded.
pub fn file_not_saved(what: &str, why: &str) -> String {
    format!("📎 {what} was not downloaded: {why}. Your message still goes to pi, with a note.")
}

/// A spoken answer whose voice took too long to make: said right after the written answer
/// (`written`), or instead of a voice message pi asked for, which is then not sent.
pub fn voice_too_slow(written: bool) -> String {
    if written {
        "🔇 The spoken version of this answer took too long to make, so it is written instead."
            .to_owned()
    } else {
        "🔇 A voice message pi sent took too long to make, so it was left out.".to_owned()
    }
}

/// A file whose handler (speech to text, a converter) ran out of time: pi got the file as it
/// is. `voice`: a voice note or audio, not transcribed.
pub fn handler_too_slow(what: &str, voice: bool) -> String {
    if voice {
        "🎙 Your voice message could not be transcribed in time, so it reached pi as a file."
            .to_owned()
    } else {
        format!("📎 {what} could not be converted to text in time, so it reached pi as a file.")
    }
}

/// What a voice note said, shown back to the person before pi answers it.
pub fn transcript(text: &str) -> String {
    format!("🎙 \u{201c}{}\u{201d}", text.trim())
}

/// After a hub restart: the headless instances started again, and those that could not be.
/// `back`: (folder, on its earlier session); `lost`: (row, folder, why).
pub fn instances_restored(back: &[(String, bool)], lost: &[(i64, String, String)]) -> String {
    let mut t = String::from("The hub restarted.");
    if !back.is_empty() {
        t.push_str(" Back:");
        for (cwd, resumed) in back {
            t.push_str(&format!(
                "\n• pi in {cwd}{}",
                if *resumed {
                    ", on its earlier session"
                } else {
                    " (a new session: the earlier one was not saved)"
                }
            ));
        }
    }
    if !lost.is_empty() {
        t.push_str(if back.is_empty() {
            " Could not start again:"
        } else {
            "\nCould not start again:"
        });
        for (_, cwd, why) in lost {
            t.push_str(&format!("\n• pi in {cwd}: {why}"));
        }
        t.push_str("\nThey are not tried again; /new starts a pi where you want one.");
    }
    t
}

/// `/new <folder>`: pi started.
pub fn pi_started(cwd: &str) -> String {
    format!("Started pi in {cwd}. Write to it here (or in its topic in Threaded Mode).")
}

/// `/new <folder>`: pi did not start.
pub fn pi_not_started(cwd: &str, why: &str) -> String {
    format!("Could not start pi in {cwd}: {why}")
}

/// A new or resumed session failed.
pub fn session_failed(label: &str, why: &str) -> String {
    format!("pi {label} could not change its session: {why}")
}

/// An extension cancelled the session change.
pub fn session_cancelled(label: &str) -> String {
    format!("pi {label} kept its session: an extension in it cancelled the change.")
}

/// `/new` for an instance.
pub fn new_session_started(label: &str) -> String {
    format!("pi {label} started a new session. Earlier sessions stay in /sessions.")
}

pub fn session_resumed(label: &str) -> String {
    format!("pi {label} resumed the session you chose.")
}

/// `/close` done.
pub fn pi_closed(label: &str) -> String {
    format!("Closed pi {label}. Its session is saved; /new starts pi again.")
}

/// The working card: shown while pi works on a turn for a while, with ⏹ Stop.
pub fn working() -> String {
    "✍ pi is working on it. ⏹ stops it; /steer adds to it.".to_owned()
}

/// The working card's ⏹ was tapped.
pub fn stopping() -> String {
    "⏹ Stopping: pi's answer so far comes marked as aborted.".to_owned()
}

/// A ⏹ on work that is over.
pub fn work_over() -> String {
    "→ That work is over.".to_owned()
}

/// `/steer` without words.
pub fn steer_usage() -> String {
    "Write what pi should take into its current work after /steer, e.g. /steer use the staging database. \
     While pi is not working, it is an ordinary message."
        .to_owned()
}

/// A `/steer` reached pi inside its current work.
pub fn steered(label: &str) -> String {
    format!("↪ pi {label} takes this into the work it is doing now.")
}

/// `/retry` when the pi has run nothing yet.
pub fn nothing_to_retry(label: &str) -> String {
    format!("pi {label} has run no prompt yet: there is nothing to send again.")
}

/// How to go on with a pi's session in a terminal (shell-quoted).
pub fn go_on_in_terminal(cwd: &str, session_file: &str) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    format!(
        "To go on in a terminal: cd {} && pi --session {}",
        quote(cwd),
        quote(session_file)
    )
}

/// `/close` on a pi running in a terminal.
pub fn cannot_close_terminal_pi(label: &str) -> String {
    format!(
        "pi {label} runs in a terminal: close it there (or type /telegram-disconnect in it). /close ends only the pi the hub started."
    )
}

/// `/sessions`, `/close` or `/new` where no pi is.
pub fn no_pi_here(command: &str) -> String {
    format!("No pi is connected here, so /{command} has nothing to act on. /new starts one.")
}

/// `/new` without a folder: what to choose.
pub fn new_picker(roots: &str, for_pi: Option<&str>) -> String {
    let mut t = String::new();
    if let Some(label) = for_pi {
        t.push_str(&format!(
            "Start a new session for pi {label}, or start pi in a folder.\n"
        ));
    } else {
        t.push_str("Start pi in a folder.\n");
    }
    if roots.is_empty() {
        t.push_str(
            "To start pi from here, list the folders it may be started under in telegram.json: \"workspaces\": [\"~/code\"].",
        );
    } else {
        t.push_str(&format!("Or send /new <folder> (a folder under {roots})."));
    }
    t
}

/// `/new <folder>` refused.
pub fn folder_refused(why: &str) -> String {
    format!("Not started: {why}.")
}

/// Said to the owner when polling works again after an outage of a minute or more, once the
/// updates that waited are in: `away_ms` since the first poll that failed, `messages` the
/// messages caught up.
pub fn back_after(away_ms: i64, messages: usize) -> String {
    let caught = match messages {
        0 => "nothing waited".to_owned(),
        1 => "1 message caught up".to_owned(),
        n => format!("{n} messages caught up"),
    };
    format!(
        "Back after {} without Telegram; {caught}.",
        crate::when::duration(away_ms)
    )
}

/// pi's footer for an extension instance: connected, whether the hub reaches Telegram
/// (`down_since`: since when it does not, Unix ms), how many messages wait for this pi.
pub fn footer(queued: i64, down_since: Option<i64>) -> String {
    let mut t = match down_since.and_then(crate::when::Local::at) {
        Some(at) => format!("telegram: hub cannot reach Telegram since {}", at.clock()),
        None if down_since.is_some() => "telegram: hub cannot reach Telegram".to_owned(),
        None => "telegram: connected".to_owned(),
    };
    if queued > 0 {
        t.push_str(&format!(" · {queued} queued"));
    }
    t
}

/// Said to the owner by a hub that stops because its own binary was removed (`pi remove`).
pub fn binary_removed(binary: &Path, config: &Path, state: &Path) -> String {
    format!(
        "pi-telegram was removed ({} is gone), so this bot stops answering. Your setup stays in \
         {} and your history and queue in {}: install pi-telegram again (pi install \
         npm:pi-telegram) and they are picked up; delete them to forget this bot.",
        binary.display(),
        config.display(),
        state.display()
    )
}

/// The question about prompts that waited while the hub or their pi was away: `held` are
/// their (sent at, words), oldest first.
pub fn stale_question(held: &[(i64, &str)], now_ms: i64) -> String {
    use crate::when::{Local, duration};
    let Some(&(first, _)) = held.first() else {
        return String::new();
    };
    let sent = match (Local::at(first), Local::at(now_ms)) {
        (Some(sent), Some(now)) => sent.clock_or_day(&now),
        _ => "earlier".to_owned(),
    };
    let waited = duration(now_ms - first);
    let preview = |words: &str| format!("\"{}\"", excerpt(words, 60));
    let mut text = if held.len() == 1 {
        format!(
            "⏳ This waited {waited} (sent {sent}) while pi was away. Run it now?\n{}",
            preview(held[0].1)
        )
    } else {
        format!(
            "⏳ {} messages waited while pi was away, the first {waited} (sent {sent}). Run them now, in order?",
            held.len()
        )
    };
    if held.len() > 1 {
        const SHOWN: usize = 5;
        for (i, (_, words)) in held.iter().take(SHOWN).enumerate() {
            text.push_str(&format!("\n{}. {}", i + 1, preview(words)));
        }
        if held.len() > SHOWN {
            text.push_str(&format!("\n… and {} more", held.len() - SHOWN));
        }
    }
    text
}

/// A stale question answered: its prompts run, or were dropped.
pub fn stale_settled(run: bool, n: usize) -> String {
    match (run, n) {
        (true, 1) => "→ ▶️ Sent to pi.".to_owned(),
        (true, n) => format!("→ ▶️ {n} messages sent to pi, in order."),
        (false, 1) => "→ ✖️ Skipped: it did not reach pi.".to_owned(),
        (false, n) => format!("→ ✖️ Skipped: {n} messages did not reach pi."),
    }
}

/// `text` on one line, at most `max` characters (an ellipsis when cut).
pub fn excerpt(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cut: String = one_line.chars().take(max).collect();
    if one_line.chars().count() > max {
        format!("{cut}…")
    } else {
        cut
    }
}

/// How one of pi's dialogs ended, as its question says afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialogOver {
    /// The person answered (the answer as they read it back).
    Answered(String),
    /// The answer reached pi after it had stopped waiting.
    TooLate(String),
    /// pi stopped waiting (its timeout) and went on without an answer.
    TimedOut,
    /// The dialog ended in pi (its run was stopped or ended).
    InPi,
    /// The pi that asked went away.
    Gone,
    /// pi no longer waits at its terminal.
    Terminal,
}

/// The question for one of pi's dialogs: what pi asks, how to answer, how long pi waits.
/// `label` names the pi when the question is not in its own topic.
pub fn dialog_question(d: &store::dialogs::Dialog, label: Option<&str>, now_ms: i64) -> String {
    use store::dialogs::Kind;
    let who = label.map_or_else(|| "pi".to_owned(), |l| format!("pi {l}"));
    let title = if d.title.trim().is_empty() {
        "(no title)"
    } else {
        d.title.trim()
    };
    if d.kind == Kind::Terminal {
        return format!("⌨️ {who} waits for you at the terminal: {title}");
    }
    let mut text = format!("❓ {who} asks: {title}");
    match d.kind {
        Kind::Confirm => {
            if let Some(m) = d.field("message") {
                text.push_str(&format!("\n{m}"));
            }
        }
        Kind::Select => {
            let options = d.options();
            if options.len() > crate::pi::conductor::DIALOG_MAX_OPTIONS {
                text.push_str(&format!(
                    "\n(The first {} of {} options are buttons; reply with another one's exact text.)",
                    crate::pi::conductor::DIALOG_MAX_OPTIONS,
                    options.len()
                ));
            }
        }
        Kind::Input => {
            if let Some(p) = d.field("placeholder") {
                text.push_str(&format!("\n({p})"));
            }
            text.push_str("\n↩️ Reply to this message with your answer.");
        }
        Kind::Editor => {
            if let Some(p) = d.field("prefill") {
                text.push_str(&format!("\nIt starts as:\n{p}"));
            }
            text.push_str("\n↩️ Reply to this message with the whole text.");
        }
        Kind::Terminal => {}
    }
    if let Some(expires) = d.expires_ms {
        use crate::when::{Local, duration};
        let until = Local::at(expires).map(|t| format!(" (until {})", t.clock()));
        text.push_str(&format!(
            "\n⏱ pi waits {}{}, then goes on without an answer.",
            duration(expires - now_ms),
            until.unwrap_or_default()
        ));
    }
    text
}

/// The question of a dialog that is over: what pi asked, and how it ended.
pub fn dialog_over(d: &store::dialogs::Dialog, over: &DialogOver) -> String {
    let title = if d.title.trim().is_empty() {
        "(no title)"
    } else {
        d.title.trim()
    };
    let waited = d
        .expires_ms
        .map(|e| crate::when::duration(e - d.asked_ms))
        .unwrap_or_default();
    match over {
        DialogOver::Answered(a) => format!("❓ pi asked: {title}\n→ ✅ {a}"),
        DialogOver::TooLate(a) => format!(
            "❓ pi asked: {title}\n→ ⌛ Your answer ({a}) came after pi had stopped waiting ({waited}); it went on without it."
        ),
        DialogOver::TimedOut => {
            format!("❓ pi asked: {title}\n→ ⌛ No answer within {waited}: pi went on without one.")
        }
        DialogOver::InPi => format!("❓ pi asked: {title}\n→ ⏹ pi stopped waiting for an answer."),
        DialogOver::Gone => {
            format!("❓ pi asked: {title}\n→ 🔌 The pi that asked is gone; it got no answer.")
        }
        DialogOver::Terminal => {
            format!("⌨️ pi waited for you at the terminal: {title}\n→ Not any more.")
        }
    }
}

/// A tap on a dialog's button the hub does not know (or an option that is not there).
pub fn dialog_unknown() -> String {
    "That question is not known any more.".to_owned()
}

/// A reply to a select's question that names none of its options.
pub fn dialog_not_an_option() -> String {
    "That is not one of the options: tap one, or reply with an option's exact text.".to_owned()
}

/// A reply to an input's or editor's question without text.
pub fn dialog_needs_text() -> String {
    "pi asked for text: reply to the question with your answer in words.".to_owned()
}

/// A second answer to a dialog.
pub fn dialog_answered_before() -> String {
    "That question is over.".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn going_on_in_a_terminal_quotes_what_a_shell_would_split() {
        assert_eq!(
            go_on_in_terminal("/home/me/my app", "/s/it's.jsonl"),
            "To go on in a terminal: cd '/home/me/my app' && pi --session '/s/it'\\''s.jsonl'"
        );
    }

    #[test]
    fn the_back_line_and_the_footer_read_as_a_person_reads_them() {
        assert_eq!(
            back_after(12 * 60_000 + 5_000, 3),
            "Back after 12 min without Telegram; 3 messages caught up."
        );
        assert_eq!(
            back_after(61_000, 1),
            "Back after 1 min without Telegram; 1 message caught up."
        );
        assert_eq!(
            back_after(90_000, 0),
            "Back after 1 min without Telegram; nothing waited."
        );
        assert_eq!(footer(0, None), "telegram: connected");
        assert_eq!(footer(2, None), "telegram: connected · 2 queued");
        let down = footer(1, Some(1_700_000_000_000));
        assert!(
            down.starts_with("telegram: hub cannot reach Telegram since "),
            "{down}"
        );
        assert!(down.ends_with(" · 1 queued"), "{down}");
    }

    #[test]
    fn a_stale_question_names_the_wait_and_at_most_five_prompts() {
        let hour = 3_600_000;
        let one = stale_question(&[(0, "deploy   the\nsite")], 3 * hour + 12 * 60_000);
        assert!(one.starts_with("⏳ This waited 3 h 12 min (sent "), "{one}");
        assert!(one.ends_with("Run it now?\n\"deploy the site\""), "{one}");
        let words: Vec<String> = (1..=7).map(|n| format!("message {n}")).collect();
        let held: Vec<(i64, &str)> = words.iter().map(|w| (0, w.as_str())).collect();
        let many = stale_question(&held, 2 * hour);
        assert!(
            many.starts_with("⏳ 7 messages waited while pi was away, the first 2 h"),
            "{many}"
        );
        assert!(
            many.contains("\n5. \"message 5\"") && !many.contains("message 6"),
            "{many}"
        );
        assert!(many.ends_with("\n… and 2 more"), "{many}");
        assert_eq!(stale_question(&[], 0), "");
        assert_eq!(
            stale_settled(true, 3),
            "→ ▶️ 3 messages sent to pi, in order."
        );
        assert_eq!(
            stale_settled(false, 1),
            "→ ✖️ Skipped: it did not reach pi."
        );
    }

    #[test]
    fn only_what_no_rendering_shows_is_trimmed() {
        assert_eq!(
            trim_invisible("\n  \n    code\n  more  \n\n"),
            "    code\n  more"
        );
        assert_eq!(trim_invisible(" \t\n"), "");
        assert_eq!(trim_invisible("  # not a heading"), "  # not a heading");
    }

    #[test]
    fn an_aborted_answer_cut_inside_code_gets_its_mark_after_the_code() {
        let md = answer_markdown(None, "Here:\n\n```rust\nfn main() {", true, None, None);
        assert!(md.ends_with("fn main() {\n```\n\n⏹ Aborted\\."), "{md}");
        let blocks = tg_format::markdown::parse::parse(&md);
        assert!(matches!(
            blocks.last(),
            Some(tg_format::markdown::doc::Block::Paragraph(_))
        ));
        // An indented fence is closed at its own indentation.
        let md = answer_markdown(None, "  ~~~~\n  x", true, None, None);
        assert!(md.contains("  x\n  ~~~~\n\n"), "{md}");
    }

    #[test]
    fn an_answer_that_shows_nothing_is_shown_as_written() {
        let md = answer_markdown(None, "[foo]: /url \"t\"", false, None, None);
        assert!(md.contains("```\n[foo]: /url \"t\"\n```"), "{md}");
        assert!(!tg_format::markdown::shows_nothing(&md));
        // Backticks in it need a longer fence.
        let md = answer_markdown(None, "```\n```", false, None, None);
        assert!(md.contains("````\n```\n```\n````"), "{md}");
    }
}
