//! Link checking: TDLib's `LinkManager::check_link` and `parse_url`, which decide whether a
//! `text_link` URL or an `<a href>` is accepted and how it is normalised.

use super::json::parse_exact;

struct HttpUrl {
    https: bool,
    userinfo: String,
    host: String,
    is_ipv6: bool,
    specified_port: u32,
    query: String,
}

/// TDLib's `is_space`.
pub(crate) fn is_td_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0 | 0x0b)
}

fn parse_url(url: &str) -> Result<HttpUrl, &'static str> {
    let stop = url.find(|c| ":/?#@[]".contains(c)).unwrap_or(url.len());
    let protocol = url[..stop].to_ascii_lowercase();
    let (https, rest) = match url[stop..].strip_prefix("://") {
        Some(rest) => match protocol.as_str() {
            "http" => (false, rest),
            "https" => (true, rest),
            _ => return Err("Unsupported URL protocol"),
        },
        None => (false, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, raw_query) = rest.split_at(authority_end);

    let bytes = authority.as_bytes();
    let separator = (1..bytes.len())
        .rev()
        .find(|&k| matches!(bytes[k], b':' | b']' | b'@'));
    let (userinfo_host, port) = match separator {
        Some(k) if bytes[k] == b':' => {
            let mut digits = &authority[k + 1..];
            while digits.len() > 1 && digits.starts_with('0') {
                digits = &digits[1..];
            }
            let port = match parse_exact::<i32>(digits) {
                Some(p) if p != 0 => i64::from(p),
                _ => -1,
            };
            (&authority[..k], port)
        }
        _ => (authority, 0),
    };
    if !(0..=65535).contains(&port) {
        return Err("Wrong port number specified in the URL");
    }
    let (userinfo, host) = match userinfo_host.rfind('@') {
        Some(at) => (&userinfo_host[..at], &userinfo_host[at + 1..]),
        None => ("", userinfo_host),
    };
    let is_ipv6 = host.len() >= 2 && host.starts_with('[') && host.ends_with(']');
    if is_ipv6
        && host[1..host.len() - 1]
            .parse::<std::net::Ipv6Addr>()
            .is_err()
    {
        return Err("Wrong IPv6 address specified in the URL");
    }
    if host.is_empty() {
        return Err("URL host is empty");
    }
    if host == "." {
        return Err("Host is invalid");
    }

    let trimmed = raw_query.trim_end_matches(|c: char| c.is_ascii() && is_td_space(c as u8));
    let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
    let mut query = String::with_capacity(trimmed.len() + 1);
    if !trimmed.starts_with('/') {
        query.push('/');
    }
    for c in trimmed.chars() {
        if u32::from(c) <= 0x20 {
            query.push_str(&format!("%{:02X}", u32::from(c)));
        } else {
            query.push(c);
        }
    }

    let host = host.to_ascii_lowercase();
    let hb = host.as_bytes();
    let mut i = 0;
    while i < hb.len() {
        let c = hb[i];
        if is_ipv6 {
            if i == 0 || i + 1 == hb.len() || c == b':' || c.is_ascii_hexdigit() || c == b'.' {
                i += 1;
                continue;
            }
            return Err("Wrong IPv6 URL host");
        }
        if c.is_ascii_lowercase() || c.is_ascii_digit() || b".-_!$,~*'();&+=".contains(&c) {
            // Characters RFC 7230 and RFC 3986 allow.
        } else if c == b'%' {
            let hex = |k: usize| hb.get(k).is_some_and(|h| h.is_ascii_hexdigit());
            if !(hex(i + 1) && hex(i + 2)) {
                return Err("Wrong percent-encoded symbol in URL host");
            }
            i += 2;
        } else if c < 128 {
            return Err("Wrong URL host");
        }
        // Non-ASCII (internationalised) hosts are allowed as plain UTF-8.
        i += 1;
    }
    Ok(HttpUrl {
        https,
        userinfo: userinfo.to_string(),
        host,
        is_ipv6,
        specified_port: u32::try_from(port).unwrap_or(0),
        query,
    })
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Checks and normalises a link the way Telegram does for `text_link` URLs and `<a href>`:
/// `http`/`https` URLs (scheme optional, defaulting to `http`) whose host contains a dot, with
/// the host lowercased and the path defaulting to `/`; `tg:`, `ton:` and `tonsite:` links with a
/// simple host. The error is TDLib's reason (`Wrong HTTP URL`, `Unsupported URL protocol`...).
pub(crate) fn check_link(link: &str) -> Result<String, String> {
    let (scheme, rest) = if starts_with_ignore_case(link, "tg:") {
        (Some("tg"), &link[3..])
    } else if starts_with_ignore_case(link, "ton:") {
        (Some("ton"), &link[4..])
    } else if starts_with_ignore_case(link, "tonsite:") {
        (Some("tonsite"), &link[8..])
    } else {
        (None, link)
    };
    let rest = match scheme {
        Some(_) => rest.strip_prefix("//").unwrap_or(rest),
        None => rest,
    };
    let url = parse_url(rest).map_err(str::to_string)?;
    if let Some(scheme) = scheme {
        if starts_with_ignore_case(rest, "http://")
            || url.https
            || !url.userinfo.is_empty()
            || url.specified_port != 0
            || url.is_ipv6
        {
            return Err(if scheme == "tg" {
                "Wrong tg URL".into()
            } else {
                "Wrong ton URL".into()
            });
        }
        let query = match url.query.strip_prefix('/') {
            Some(q) if q.starts_with('?') => q,
            _ => url.query.as_str(),
        };
        let host_ok = url.host.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || c == b'-'
                || c == b'_'
                || (scheme == "tonsite" && c == b'.')
        });
        if !host_ok {
            return Err("Unallowed characters in URL host".into());
        }
        return Ok(format!("{scheme}://{}{query}", url.host));
    }
    if !url.host.contains('.') && !url.is_ipv6 {
        return Err("Wrong HTTP URL".into());
    }
    let mut result = String::from(if url.https { "https://" } else { "http://" });
    if !url.userinfo.is_empty() {
        result.push_str(&url.userinfo);
        result.push('@');
    }
    result.push_str(&url.host);
    if url.specified_port > 0 {
        result.push_str(&format!(":{}", url.specified_port));
    }
    result.push_str(&url.query);
    Ok(result)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn links_are_checked_like_telegram() {
        let ok = |url: &str| check_link(url).unwrap();
        assert_eq!(ok("https://example.com"), "https://example.com/");
        assert_eq!(
            ok("HTTPS://Example.COM/Path?Q=1#F"),
            "https://example.com/Path?Q=1#F"
        );
        assert_eq!(ok("example.com"), "http://example.com/");
        assert_eq!(ok("example.com?x"), "http://example.com/?x");
        assert_eq!(ok("http://a.com:8080/x"), "http://a.com:8080/x");
        assert_eq!(ok("http://a.com:0080"), "http://a.com:80/");
        assert_eq!(ok("http://user:pw@a.com"), "http://user:pw@a.com/");
        assert_eq!(ok("https://a.com/a b"), "https://a.com/a%20b");
        assert_eq!(ok("https://пример.рф"), "https://пример.рф/");
        assert_eq!(ok("http://[::1]/"), "http://[::1]/");
        assert_eq!(ok("tg://user?id=123"), "tg://user?id=123");
        assert_eq!(ok("TG:resolve?domain=x"), "tg://resolve?domain=x");
        assert_eq!(ok("tg://resolve"), "tg://resolve/");
        assert_eq!(ok("ton://wallet"), "ton://wallet/");
        let bad = |url: &str| check_link(url).unwrap_err();
        assert_eq!(bad("foo"), "Wrong HTTP URL");
        assert_eq!(bad(""), "URL host is empty");
        assert_eq!(bad("ftp://a.com"), "Unsupported URL protocol");
        assert_eq!(
            bad("javascript:alert(1)"),
            "Wrong port number specified in the URL"
        );
        assert_eq!(
            bad("http://a.com:70000"),
            "Wrong port number specified in the URL"
        );
        assert_eq!(bad("http://a b.com"), "Wrong URL host");
        assert_eq!(
            bad("http://a%zz.com"),
            "Wrong percent-encoded symbol in URL host"
        );
        assert_eq!(
            bad("http://[zz]/"),
            "Wrong IPv6 address specified in the URL"
        );
        assert_eq!(bad("tg://a.b"), "Unallowed characters in URL host");
        assert_eq!(bad("tg:https://a.com"), "Wrong tg URL");
        assert_eq!(bad("tg://a:1"), "Wrong tg URL");
    }
}
