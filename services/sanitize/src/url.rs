//! A URL as it may be shown: in a log, an error or `mneme status`, a NATS URL's credentials
//! (`nats://user:password@host`, or a token alone, `nats://token@host`) must never appear.

/// `url` with the password, or a token standing alone as the user, replaced by `***`; a URL
/// without credentials is returned as it is. A user name is kept, since it says who connects
/// and is not secret by itself.
pub fn without_credentials(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    // The last `@` ends the user information: a password may itself hold `@`.
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let shown = match authority[..at].split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => "***".to_owned(),
    };
    format!("{}{shown}{}", &url[..scheme_end], &url[scheme_end + at..])
}

#[cfg(test)]
mod tests {
    use super::without_credentials;

    #[test]
    fn passwords_and_tokens_are_hidden_and_the_rest_is_kept() {
        assert_eq!(
            without_credentials("nats://alice:s3cr@t@box:4222"),
            "nats://alice:***@box:4222"
        );
        assert_eq!(
            without_credentials("nats://tok3n-0123456789@box:4222"),
            "nats://***@box:4222"
        );
        assert_eq!(
            without_credentials("nats://127.0.0.1:4222"),
            "nats://127.0.0.1:4222"
        );
        assert_eq!(
            without_credentials("tls://a:b@x:1/path@y"),
            "tls://a:***@x:1/path@y"
        );
        assert_eq!(without_credentials("not a url"), "not a url");
    }
}
