//! `pi-telegram status`: [`hub::status::Status`] as the text a person reads (`--json` prints the
//! struct itself).

use hub::status::Status;

/// The text form.
pub fn render(st: &Status) -> String {
    let mut out = String::new();
    let bot = match (&st.bot.username, st.bot.id) {
        (Some(u), Some(id)) => format!("@{u} (id {id})"),
        _ if st.token_configured => "token configured, not checked yet (run serve)".into(),
        _ => "no token: run `pi-telegram setup`".into(),
    };
    out.push_str(&format!(
        "profile      {}\nbot          {bot}\n",
        st.profile
    ));
    if let Some(t) = st.bot.has_topics_enabled {
        out.push_str(&format!(
            "threads      Threaded Mode {}\n",
            if t {
                "on"
            } else {
                "off (turn it on for the bot in @BotFather's Mini App)"
            }
        ));
    }
    let owner = match (st.owner_user_id, &st.pairing) {
        (Some(o), _) => format!("user {o}"),
        (None, Some(p)) => format!("not paired (pairing code {})", p.state),
        (None, None) => "not paired".into(),
    };
    out.push_str(&format!("owner        {owner}\n"));
    if !st.people.is_empty() {
        let members = st.people.iter().filter(|p| p.role == "member").count();
        out.push_str(&format!(
            "people       {members} member(s), {} viewer(s)\n",
            st.people.len() - members
        ));
    }
    if let Some(g) = st.workspace_group {
        out.push_str(&format!("workspace    the forum group {g}\n"));
    }
    let hub = match (st.hub.running, st.hub.pid) {
        (true, Some(pid)) => format!("running (pid {pid})"),
        (true, None) => "running".into(),
        (false, _) => "not running".into(),
    };
    let starter = match st.hub.started_by.as_deref() {
        Some("service") => Some("the service"),
        Some("extension") => Some("a pi's extension"),
        Some("shell") => Some("a shell"),
        _ => None,
    };
    let hub = match (starter, st.hub.running) {
        (Some(by), true) => format!("{hub}, started by {by}"),
        (Some(by), false) => format!("{hub} (last started by {by})"),
        (None, _) => hub,
    };
    out.push_str(&format!("hub          {hub}\n"));
    if let Some(binary) = st.hub.binary.as_deref().filter(|b| !b.is_empty()) {
        let version = st.hub.version.as_deref().unwrap_or("?");
        out.push_str(&format!("binary       {binary} ({version})\n"));
    }
    if let Some(log) = &st.hub.log {
        out.push_str(&format!("log          {log}\n"));
    }
    if let Some(n) = &st.hub.network {
        out.push_str(&format!("network      {}\n", n.summary));
    }
    if let Some(how) = &st.hub.stopped_on_purpose
        && !st.hub.running
    {
        let how = if how == "interrupt" {
            "with Ctrl-C"
        } else {
            "with `pi-telegram stop`"
        };
        out.push_str(&format!(
            "stopped      on purpose ({how}): pi does not start it again until /telegram-connect or serve\n"
        ));
    }
    out.push_str(&format!(
        "journal      {} pending, {} handled (offset {})\n",
        st.journal.pending,
        st.journal.handled,
        st.offset.map_or_else(|| "none".into(), |o| o.to_string())
    ));
    if let Some(p) = &st.poll {
        out.push_str(&format!("telegram     {}\n", p.summary()));
    }
    out.push_str(&format!(
        "queued       {} owner message(s) waiting for pi\n",
        st.held
    ));
    if st.awaiting_choice > 0 {
        out.push_str(&format!(
            "choice       {} message(s) wait for you to choose a pi (their buttons in Telegram)\n",
            st.awaiting_choice
        ));
    }
    if st.dialogs_open > 0 {
        out.push_str(&format!(
            "asking       {} question(s) of pi wait for your answer in Telegram\n",
            st.dialogs_open
        ));
    }
    if st.awaiting_stale_answer > 0 {
        out.push_str(&format!(
            "stale        {} message(s) waited while pi was away: they run when you tap Run now (or Skip) in Telegram\n",
            st.awaiting_stale_answer
        ));
    }
    for i in st.instances.iter().filter(|i| i.state != "gone") {
        out.push_str(&format!(
            "instance     {}{} [{}] {} ({}), pid {}, {} queued\n",
            if i.selected { "▶ " } else { "" },
            i.label,
            i.transport,
            i.cwd,
            i.state,
            i.pid.map_or_else(|| "-".into(), |p| p.to_string()),
            i.queued
        ));
    }
    for t in &st.threads {
        out.push_str(&format!(
            "thread       {} (thread {}) {}{}\n",
            t.title,
            t.thread_id,
            t.state,
            t.instance
                .as_deref()
                .map_or_else(String::new, |i| format!(", instance {i}"))
        ));
    }
    for i in &st.intents {
        out.push_str(&format!(
            "intent       #{} slot {} for {}: {}{} (settle: pi-telegram threads resolve {} --create|--forget)\n",
            i.id,
            i.slot,
            i.identity,
            i.state,
            i.detail.as_deref().map_or_else(String::new, |d| format!(", {d}")),
            i.id
        ));
    }
    let outbox: Vec<String> = st.outbox.iter().map(|(k, v)| format!("{v} {k}")).collect();
    out.push_str(&format!("outbox       {}\n", outbox.join(", ")));
    for w in &st.flood_waits {
        out.push_str(&format!(
            "flood wait   {} for {} more s\n",
            w.scope, w.remaining_s
        ));
    }
    for e in st.last_errors.iter().take(5) {
        out.push_str(&format!("error        [{}] {}\n", e.context, e.message));
    }
    for r in &st.refused_comments {
        let turn = r.turn.map_or_else(String::new, |t| format!(" turn {t}"));
        out.push_str(&format!(
            "refused      {} in {}{turn}, line {}: {} (removed, does nothing)\n",
            r.kind, r.source, r.line, r.reason
        ));
    }
    if let Some(w) = &st.webhook_removed {
        out.push_str(&format!(
            "webhook      removed one to {} so that polling works ({} pending update(s) kept)\n",
            w.host, w.pending_updates
        ));
    }
    for w in &st.warnings {
        out.push_str(&format!("warning      {w}\n"));
    }
    out.push_str(&format!(
        "state        {}\nconfig       {}\n",
        st.state_dir, st.config_file
    ));
    out
}
