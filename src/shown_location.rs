//! Showing a database's location without its password: one rule for every text that may name
//! one (errors, logs, file names), whatever the text is. Imports nothing of the crate, so that
//! `error` can use it.

/// `url` with its password replaced by `***`, for messages, logs and names, whatever the text
/// is: a mistyped scheme, a literal `@` or `/` in the password, `?password=` in the query, no
/// host. Everything between the scheme and the *last* `@` is the user and password (a `@` in
/// a query value only hides more); the user is kept. Query parameters that carry a password,
/// and what follows one up to the next `key=`, are masked. Text with neither is unchanged.
pub(crate) fn redact_password(url: &str) -> String {
    let scheme_len = url
        .find(':')
        .filter(|&i| {
            i > 0
                && url[i + 1..].starts_with('/')
                && url.as_bytes()[0].is_ascii_alphabetic()
                && url[..i]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
        })
        .map(|i| i + 1 + url[i + 1..].bytes().take_while(|&b| b == b'/').count())
        .unwrap_or(0);
    let (scheme, rest) = url.split_at(scheme_len);
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    let after = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            match userinfo.split_once(':') {
                Some((user, _)) if !user.contains(['/', '?', '#']) => {
                    out.push_str(user);
                    out.push_str(":***");
                }
                Some(_) => out.push_str("***"),
                None => out.push_str(userinfo),
            }
            out.push('@');
            &rest[at + 1..]
        }
        // No `@`: a user who forgot `@host` wrote `user:password` where the host and port go.
        None if scheme_len > 0 => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, tail) = rest.split_at(end);
            out.push_str(&ports_only(authority));
            tail
        }
        None => rest,
    };
    let Some((base, query)) = after.split_once('?') else {
        out.push_str(after);
        return out;
    };
    out.push_str(base);
    out.push('?');
    let mut masking = false;
    for (i, pair) in query.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match pair.split_once('=') {
            Some((key, _)) if is_secret_param(key) => {
                masking = true;
                out.push_str(key);
                out.push_str("=***");
            }
            Some(_) => {
                masking = false;
                out.push_str(pair);
            }
            // A piece of a password that held a literal `&`.
            None if masking => out.push_str("***"),
            None => out.push_str(pair),
        }
    }
    out
}

/// An authority of hosts (`h1:5432,[::1]:5433`) with what follows a `:` shown only where it
/// is a port: from the first that is not, the rest is `***` (a password holding a `,` or `:`
/// hides no less).
fn ports_only(authority: &str) -> String {
    let mut out = String::with_capacity(authority.len());
    for (i, host) in authority.split(',').enumerate() {
        if i > 0 {
            out.push(',');
        }
        // An IPv6 address keeps its colons inside its brackets.
        let name_end = match host.starts_with('[') {
            true => host.find(']').map_or(host.len(), |b| b + 1),
            false => 0,
        };
        let port_at = host[name_end..].find(':').map(|c| name_end + c);
        match port_at {
            Some(c) if !host[c + 1..].bytes().all(|b| b.is_ascii_digit()) => {
                out.push_str(&host[..=c]);
                out.push_str("***");
                return out;
            }
            _ => out.push_str(host),
        }
    }
    out
}

/// libpq's parameters that hold a secret (`password`, `sslpassword`), in any case or encoding.
pub(crate) fn is_secret_param(key: &str) -> bool {
    percent_decode(key).to_ascii_lowercase().contains("password")
}

pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |j: usize| bytes.get(j).and_then(|&b| (b as char).to_digit(16));
        if bytes[i] == b'%' {
            if let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2)) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
