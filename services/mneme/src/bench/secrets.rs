//! `mneme-bench secrets`: how well the sanitiser catches secrets of shapes it has no rule for,
//! and how often its generic detectors fire on ordinary coding-session text.
//!
//! Recall: a corpus of synthetic secrets is generated at run time from invented vendor families
//! (a random prefix or none, an alphabet, a length), each placed as an env assignment, a JSON
//! field (as text and as a JSON value), a YAML line, a CLI flag, an HTTP header and, for prefixed
//! families, bare in command output and on a line of a file that was read. The families are split
//! by their number before anything is measured: every fourth one is held out, and its recall is
//! reported on its own line so tuning can never look at it.
//!
//! False positives: the generic detectors' spans over the real Claude Code transcripts, per
//! megabyte; the first few are printed to stderr for inspection.

use std::path::{Path, PathBuf};

/// Invented vendor families generated; every fourth is held out.
const FAMILIES: usize = 48;
/// Secrets generated per family.
const PER_FAMILY: usize = 20;

/// A small deterministic generator (xorshift64*), so every run measures the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick(&mut self, items: &[u8]) -> u8 {
        items[self.below(items.len())]
    }

    fn word(&mut self, min: usize, max: usize) -> String {
        let len = min + self.below(max - min + 1);
        (0..len)
            .map(|_| char::from(self.pick(b"abcdefghijklmnopqrstuvwxyz")))
            .collect()
    }
}

const ALPHABETS: &[&[u8]] = &[
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    b"abcdefghijklmnopqrstuvwxyz0123456789",
    b"ACDEFGHJKLMNPQRSTUVWXYZ023456789",
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
];

/// One invented vendor's key shape.
struct Family {
    prefix: Option<String>,
    alphabet: &'static [u8],
    min_len: usize,
    max_len: usize,
    key_name: String,
}

fn family(rng: &mut Rng) -> Family {
    let vendor = rng.word(3, 8);
    let sep = if rng.below(2) == 0 { "_" } else { "-" };
    let prefix = match rng.below(4) {
        0 => None,
        1 => Some(format!("{vendor}{sep}")),
        2 => Some(format!("{}{sep}{}{sep}", &vendor[..3], rng.word(2, 5))),
        _ => Some(format!(
            "{}{sep}{}{sep}",
            vendor.to_uppercase(),
            rng.word(3, 6).to_uppercase()
        )),
    };
    let suffix = ["KEY", "TOKEN", "SECRET", "API_KEY", "AUTH", "PASSWORD"][rng.below(6)];
    let min_len = 24 + rng.below(20);
    Family {
        prefix,
        alphabet: ALPHABETS[rng.below(ALPHABETS.len())],
        min_len,
        max_len: min_len + rng.below(24),
        key_name: format!("{}_{suffix}", vendor.to_uppercase()),
    }
}

fn secret(rng: &mut Rng, family: &Family) -> String {
    let len = family.min_len + rng.below(family.max_len - family.min_len + 1);
    let body: String = (0..len)
        .map(|_| char::from(rng.pick(family.alphabet)))
        .collect();
    format!("{}{body}", family.prefix.as_deref().unwrap_or_default())
}

/// Every placement of `secret` for `family`, as texts the hook would clean.
fn placements(family: &Family, secret: &str) -> Vec<String> {
    let key = &family.key_name;
    let lower = key.to_lowercase();
    let flag = lower.replace('_', "-");
    let header = flag
        .split('-')
        .map(|w| format!("{}{}", w[..1].to_uppercase(), &w[1..]))
        .collect::<Vec<_>>()
        .join("-");
    let mut texts = vec![
        format!("export {key}={secret}"),
        format!("{{\"{lower}\": \"{secret}\"}}"),
        format!("{lower}: {secret}\nother: value"),
        format!("vendorctl deploy --{flag} {secret} --region eu"),
        format!("curl -H 'X-{header}: {secret}' https://api.example.com/v1"),
    ];
    if family.prefix.is_some() {
        texts.push(format!("created a new key\n{secret}\nstore it safely"));
        texts.push(format!(
            "     1\t# generated 2024-05-01\n     2\t{secret}\n"
        ));
    }
    texts
}

fn transcripts_dir() -> PathBuf {
    match std::env::var("MNEME_TRANSCRIPTS") {
        Ok(path) if !path.is_empty() => PathBuf::from(path),
        _ => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/claude-code-transcripts"),
    }
}

fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            jsonl_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
    Ok(())
}

pub fn secrets() -> anyhow::Result<()> {
    let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default())?;
    let mut rng = Rng(0x05ec_2e19);
    // [tuned, held out] × [caught, total]
    let mut counts = [[0usize; 2]; 2];
    for index in 0..FAMILIES {
        let family = family(&mut rng);
        let held_out = usize::from(index % 4 == 3);
        for _ in 0..PER_FAMILY {
            let secret = secret(&mut rng, &family);
            for text in placements(&family, &secret) {
                let (cleaned, _) = sanitizer.clean_text(&text);
                counts[held_out][1] += 1;
                if !cleaned.contains(&secret) {
                    counts[held_out][0] += 1;
                }
            }
            // The same field as a JSON value, as the hook sees a tool's input.
            let mut value = serde_json::json!({ family.key_name.to_lowercase(): secret });
            sanitizer.clean_json(&mut value);
            counts[held_out][1] += 1;
            if !value.to_string().contains(&secret) {
                counts[held_out][0] += 1;
            }
        }
    }
    let recall = |[caught, total]: [usize; 2]| caught as f64 / total.max(1) as f64;

    let dir = transcripts_dir();
    anyhow::ensure!(
        dir.is_dir(),
        "{} is missing: set MNEME_TRANSCRIPTS",
        dir.display()
    );
    let mut files = Vec::new();
    jsonl_files(&dir, &mut files)?;
    let (mut bytes, mut spans) = (0usize, 0usize);
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        bytes += text.len();
        for span in sanitize::generic_spans(&text) {
            if spans < 20 {
                eprintln!(
                    "generic redaction in {}: {:?}",
                    file.display(),
                    &text[span.clone()]
                );
            }
            spans += 1;
        }
    }
    let megabytes = bytes as f64 / 1e6;
    println!(
        "secrets: recall_tuned={:.3} recall_held_out={:.3} samples={} fp_per_mb={:.2} fp={spans} transcript_mb={megabytes:.1}",
        recall(counts[0]),
        recall(counts[1]),
        counts[0][1] + counts[1][1],
        spans as f64 / megabytes,
    );
    Ok(())
}
