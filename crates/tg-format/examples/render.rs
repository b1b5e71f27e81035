//! Renders Markdown from stdin the way the hub sends it: `cargo run -p tg-format --example
//! render -- rich|html < answer.md`. For looking at what the renderer makes of an answer.

use std::io::Read;

use tg_format::markdown::{self, RichBudget};

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "rich".into());
    let mut md = String::new();
    if std::io::stdin().read_to_string(&mut md).is_err() {
        eprintln!("stdin is not UTF-8");
        std::process::exit(2);
    }
    match mode.as_str() {
        "rich" => {
            for (i, p) in markdown::render_rich(&md, 4000, &RichBudget::default())
                .iter()
                .enumerate()
            {
                println!("===== rich piece {i} =====\n{}", p.markdown);
            }
        }
        "html" => {
            for (i, p) in markdown::render_html(&md, 4000).iter().enumerate() {
                println!("===== html piece {i} =====\n{}", p.html);
            }
        }
        "plain" => {
            for (i, p) in markdown::render_html(&md, 4000).iter().enumerate() {
                println!("===== plain piece {i} =====\n{}", p.plain);
            }
        }
        other => {
            eprintln!("unknown mode {other:?}: rich, html or plain");
            std::process::exit(2);
        }
    }
}
