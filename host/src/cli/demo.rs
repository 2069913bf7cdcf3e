//! `turngate demo`: the seed regression check, played through the real pipeline on a throwaway root.
//!
//! For each provider, six recorded-shape turns around one write to `notes.txt` (a complete valid write, a
//! turn whose connection dropped and one that ended at the output limit, both after tool JSON that happens
//! to parse, a refusal, invalid JSON, a path outside the root) go through decoding, the turn gate and the
//! sandbox. The table shows each turn's status, each call's
//! verdict and whether `notes.txt` changed; the command fails if any case did not end as it must.

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use turngate::providers::TurnDecoder;
use turngate::turn::Provider;
use turngate::{Policy, Root, Toolbox, TurnOptions, process_turn};

const ORIGINAL: &str = "Original notes\n";

/// One demo case: its stream and whether it must change `notes.txt`.
struct Case {
    provider: Provider,
    name: &'static str,
    body: &'static str,
    writes: bool,
}

macro_rules! cases {
    ($($provider:expr, $file:literal => [$($case:literal: $writes:literal),*]);* $(;)?) => {
        [$($(Case {
            provider: $provider,
            name: $case,
            body: include_str!(concat!("../../../tests/fixtures/seed/", $file, "_", $case, ".sse")),
            writes: $writes,
        }),*),*]
    };
}

fn cases() -> [Case; 24] {
    cases![
        Provider::Anthropic, "anthropic" => ["complete": true, "cutoff": false, "truncated": false, "refusal": false, "invalid": false, "outside": false];
        Provider::OpenAiChat, "openai-chat" => ["complete": true, "cutoff": false, "truncated": false, "refusal": false, "invalid": false, "outside": false];
        Provider::OpenAiResponses, "openai-responses" => ["complete": true, "cutoff": false, "truncated": false, "refusal": false, "invalid": false, "outside": false];
        Provider::Gemini, "gemini" => ["complete": true, "cutoff": false, "truncated": false, "refusal": false, "invalid": false, "outside": false];
    ]
}

fn describe_case(name: &str) -> &'static str {
    match name {
        "complete" => "complete, valid write",
        "cutoff" => "dropped, tool JSON parses",
        "truncated" => "output limit, JSON parses",
        "refusal" => "refusal",
        "invalid" => "invalid tool JSON",
        _ => "path outside the root",
    }
}

fn hash(path: &std::path::Path) -> Result<String> {
    Ok(hex::encode(Sha256::digest(std::fs::read(path)?)))
}

/// Runs every case and prints the table. Returns whether every case ended as it must.
pub async fn run(toolbox: &Toolbox) -> Result<bool> {
    let workspace = tempfile::tempdir().context("creating the demo workspace")?;
    let root_path = workspace.path().join("root");
    std::fs::create_dir(&root_path)?;
    let notes = root_path.join("notes.txt");
    let root = Root::open(&root_path)?;
    let policy = Policy::allow_all();

    outln!(
        "turngate demo: each turn below asks write_file to replace notes.txt in {}",
        root_path.display()
    )?;
    outln!()?;
    outln!(
        "{:<17} {:<27} {:<11} {:<44} notes.txt",
        "provider",
        "case",
        "turn",
        "calls"
    )?;
    outln!("{}", "-".repeat(112))?;
    let mut all_as_expected = true;
    for case in cases() {
        std::fs::write(&notes, ORIGINAL)?;
        let before = hash(&notes)?;
        let mut decoder = TurnDecoder::new(case.provider);
        decoder.feed(case.body.as_bytes());
        let report = process_turn(
            toolbox,
            &root,
            &policy,
            decoder.finish(),
            TurnOptions::default(),
        )
        .await;
        let changed = hash(&notes)? != before;
        let calls: Vec<String> = report
            .calls
            .iter()
            .map(|c| {
                let step = c.step.map(|s| format!(" at {s}")).unwrap_or_default();
                format!(
                    "{} {}{step}",
                    c.id.as_deref().unwrap_or("(no id)"),
                    c.status.as_str()
                )
            })
            .collect();
        let as_expected = changed == case.writes;
        all_as_expected &= as_expected;
        outln!(
            "{:<17} {:<27} {:<11} {:<44} {}{}",
            case.provider.as_str(),
            describe_case(case.name),
            report.turn.ending.status.as_str(),
            calls.join(", "),
            if changed { "changed" } else { "unchanged" },
            if as_expected { "" } else { "   <-- UNEXPECTED" },
        )?;
    }
    outln!()?;
    if all_as_expected {
        outln!("Every case ended as it must: only the complete, valid turns wrote notes.txt.")?;
    } else {
        outln!("Some cases did not end as they must (marked above).")?;
    }
    Ok(all_as_expected)
}
