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

#[cfg(test)]
mod tests {
    use super::*;

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
