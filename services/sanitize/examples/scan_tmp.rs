// Temporary: prints every redaction made over the files given on stdin (one path a line).
use std::io::BufRead;
fn main() {
    let s = sanitize::Sanitizer::new(&sanitize::Config::default()).unwrap();
    let mut total = 0;
    let mut files = 0;
    for path in std::io::stdin().lock().lines() {
        let path = path.unwrap();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        files += 1;
        let (cleaned, report) = s.clean_text(&text);
        if report.secrets_redacted == 0 {
            continue;
        }
        total += report.secrets_redacted;
        // Print changed lines.
        let a: Vec<&str> = text.lines().collect();
        let b: Vec<&str> = cleaned.lines().collect();
        if a.len() == b.len() {
            for (x, y) in a.iter().zip(b.iter()) {
                if x != y {
                    println!(
                        "{path}\n  - {}\n  + {}",
                        &x[..x.len().min(200)],
                        &y[..y.len().min(200)]
                    );
                }
            }
        } else {
            println!("{path}: line count changed, report {report:?}");
        }
    }
    eprintln!("files {files}, redactions {total}");
}
