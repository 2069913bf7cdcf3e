//! What a call did over the network: one record per request, for the outcome and the audit log.

use std::net::SocketAddr;

use serde::Serialize;

/// One request a call made (or tried to make).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestRecord {
    /// The method.
    pub method: String,
    /// The URL without user information, each query value masked (`?q=***`).
    pub url: String,
    /// The address connected to (`None`: refused before any connection).
    pub address: Option<SocketAddr>,
    /// The response's status (`None`: no response).
    pub status: Option<u16>,
    /// Request body bytes sent.
    pub bytes_sent: u64,
    /// Response body bytes received (so far as the tool read them).
    pub bytes_received: u64,
    /// Milliseconds from the request to its response head (or its refusal).
    pub duration_ms: f64,
    /// Whether the approver was asked and said yes (`None`: not asked).
    pub approved: Option<bool>,
    /// The names of the secrets the host added (never their values).
    pub secrets: Vec<String>,
    /// The names of the secrets the response carried back (echoed in a header or the body) and the
    /// host masked before the tool read it.
    pub masked: Vec<String>,
    /// Why the request was refused or failed (`None`: it got a response).
    pub error: Option<String>,
}

/// `uri` as it may be shown: no user information, every query value masked.
pub(crate) fn shown_url(uri: &http::Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("https");
    let host = uri.host().unwrap_or("");
    let port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    let mut url = format!("{scheme}://{host}{port}{}", uri.path());
    if let Some(query) = uri.query() {
        let masked: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) => format!("{key}=***"),
                None => pair.to_owned(),
            })
            .collect();
        url.push('?');
        url.push_str(&masked.join("&"));
    }
    url
}

/// `text` with every `http://` or `https://` URL in it shown as [`shown_url`] shows it (no user
/// information, query values masked): for messages that quote a URL (a gate refusal, a tool's error,
/// its stderr), which end up in reports and the audit log. A URL runs to the next whitespace or quote,
/// less the punctuation that ends a sentence.
pub fn mask_urls(text: &str) -> std::borrow::Cow<'_, str> {
    let starts = |at: usize| {
        let rest = &text.as_bytes()[at..];
        [&b"http://"[..], b"https://"].iter().any(|scheme| {
            rest.len() >= scheme.len() && rest[..scheme.len()].eq_ignore_ascii_case(scheme)
        })
    };
    let mut out = String::new();
    let mut copied = 0;
    let mut at = 0;
    while let Some(found) = text[at..].find(['h', 'H']).map(|i| at + i) {
        if !starts(found) {
            at = found + 1;
            continue;
        }
        let token_end = text[found..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .map_or(text.len(), |i| found + i);
        // Punctuation that ends a sentence or a bracket is not the URL's.
        let end = found
            + text[found..token_end]
                .trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '}'])
                .len();
        let shown = text[found..end]
            .parse::<http::Uri>()
            .ok()
            .filter(|uri| uri.host().is_some())
            .map(|uri| shown_url(&uri));
        if let Some(shown) = shown {
            out.push_str(&text[copied..found]);
            out.push_str(&shown);
            copied = end;
        }
        at = end.max(found + 1);
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_quoted_in_a_message_are_shown_masked() {
        assert_eq!(
            mask_urls("GET https://a.test/x?key=s3cret&q=1: refused (`http://u:p@b.test/?t=9`)"),
            "GET https://a.test/x?key=***&q=***: refused (`http://b.test/?t=***`)"
        );
        assert!(matches!(
            mask_urls("no url here, http: nothing"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(mask_urls("HTTPS://A.test/?k=v."), "https://A.test/?k=***.");
        assert_eq!(
            mask_urls("end https://a.test/p?k=v"),
            "end https://a.test/p?k=***"
        );
    }

    #[test]
    fn query_values_and_user_information_are_masked() {
        let uri: http::Uri = "https://me:pw@a.test:8443/x?token=abc&flag&q=1"
            .parse()
            .unwrap();
        assert_eq!(
            shown_url(&uri),
            "https://a.test:8443/x?token=***&flag&q=***"
        );
    }
}
