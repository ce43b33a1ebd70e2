// Temporary timing harness; deleted after measuring.
use std::time::Instant;
fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let path = std::env::args().nth(2).unwrap();
    let mut text = std::fs::read_to_string(path).unwrap();
    text.truncate(
        text.char_indices()
            .take_while(|(i, _)| *i < 10_000)
            .last()
            .map_or(0, |(i, _)| i),
    );
    if mode == "secrets" {
        let gh = format!("ghp_{}", "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0zAbCdEf");
        let jwt = format!(
            "eyJhbGciOiJIUzI1NiJ9.{}.{}",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
        );
        text = format!(
            "export GITHUB_TOKEN={gh}\n{}\nAuthorization: Bearer {jwt}\nDATABASE_URL=postgres://app:S3cr3t!pw@db/app\n  password: hunter2x\n{}",
            &text[..5000],
            &text[5000..]
        );
    }
    let t0 = Instant::now();
    let s = sanitize::Sanitizer::new(&sanitize::Config::default()).unwrap();
    let t1 = Instant::now();
    let (out, report) = s.clean_text(&text);
    let t2 = Instant::now();
    let mut warm = std::time::Duration::MAX;
    for _ in 0..50 {
        let a = Instant::now();
        let r = s.clean_text(&text);
        std::hint::black_box(r);
        warm = warm.min(a.elapsed());
    }
    let excl = Instant::now();
    let e = s.is_excluded_path("/home/u/project/.env.local");
    let excl = excl.elapsed();
    println!(
        "{mode:8} bytes={} new={:?} first_clean={:?} warm_clean={:?} first_is_excluded={:?} ({e}) report={report:?} out_len={}",
        text.len(),
        t1 - t0,
        t2 - t1,
        warm,
        excl,
        out.len()
    );
}
