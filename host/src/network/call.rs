//! One call's network: every request the tool makes, checked and sent, or refused, and recorded.
//!
//! For each request, in order, before anything reaches the wire: the count limit; the URL (scheme,
//! host, port, a path without dot segments); the tool's grant (deny rules first, reads and writes
//! apart); then the host resolves the name itself and keeps only public addresses (any address when
//! the allowing rule names the host exactly); it connects to one of those and checks the socket's
//! peer is that address; TLS for `https`; then one HTTP/1.1 exchange whose bodies are counted against
//! the call's byte limits and whose response is timed (first byte, between bytes). A limit exceeded
//! stops the call ([`NetworkLimitError`]); a refusal is an error the tool sees and can report.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use http::Request;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody};

use super::addresses::{Resolver, not_public};
use super::approval::{Asker, NetworkRequest};
use super::grant::{Decision, NetworkGrant};
use super::limits::{NetworkLimitError, NetworkLimits};
use super::mask::{MaskedBody, OnMasked, SecretMask};
use super::record::{RequestRecord, shown_url};
use super::rules::Target;
use super::secrets::SecretBinding;
use super::transport::{self, Meter, MeteredBody};

/// What a call's network starts from: the tool's grant, how names resolve, the limits.
#[derive(Debug, Clone)]
pub(crate) struct NetworkSetup {
    pub(crate) grant: NetworkGrant,
    pub(crate) resolver: Arc<dyn Resolver>,
    pub(crate) limits: NetworkLimits,
    /// The policy's secrets, each added to requests for its origins only.
    pub(crate) secrets: Arc<Vec<SecretBinding>>,
    /// Where requests marked `ask` go for an answer (`None`: nobody to ask, they are denied).
    pub(crate) asker: Option<Asker>,
}

/// Stops the call's guest (set by the sandbox: the stop flag and an epoch tick).
pub(crate) type StopGuest = Box<dyn Fn() + Send + Sync>;

/// One call's network state, shared by its hooks and its bodies.
pub(crate) struct CallNetwork {
    setup: NetworkSetup,
    stop: StopGuest,
    state: Mutex<State>,
    /// How long the call's requests waited for the approver: not counted against its wall time.
    paused: Arc<ApprovalWait>,
}

/// The time a call's requests spend waiting for the approver.
#[derive(Debug, Default)]
pub(crate) struct ApprovalWait {
    waiting: AtomicU32,
    waited_nanos: AtomicU64,
}

impl ApprovalWait {
    /// Whether a request is waiting for an answer now.
    pub(crate) fn is_waiting(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// The time spent waiting for answers that came.
    pub(crate) fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited_nanos.load(Ordering::SeqCst))
    }
}

#[derive(Default)]
struct State {
    requests: u32,
    sent: u64,
    received: u64,
    records: Vec<RequestRecord>,
    exceeded: Option<NetworkLimitError>,
}

/// The response head and the task driving the connection, as `send_request` answers them.
pub(crate) type Sent = (
    http::Response<WasiBody>,
    wasmtime_wasi::runtime::AbortOnDropJoinHandle<Result<(), hyper::Error>>,
);

impl NetworkSetup {
    /// No grant: every request is denied.
    pub(crate) fn none(limits: NetworkLimits) -> NetworkSetup {
        NetworkSetup {
            grant: NetworkGrant::default(),
            resolver: Arc::new(super::addresses::SystemResolver),
            limits,
            secrets: Arc::default(),
            asker: None,
        }
    }
}

impl CallNetwork {
    pub(crate) fn new(setup: NetworkSetup, stop: StopGuest) -> Arc<CallNetwork> {
        Arc::new(CallNetwork {
            setup,
            stop,
            state: Mutex::default(),
            paused: Arc::default(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long the call's requests waited for the approver, shared.
    pub(crate) fn paused(&self) -> Arc<ApprovalWait> {
        self.paused.clone()
    }

    /// The requests made and the limit the call exceeded, if any.
    pub(crate) fn finish(&self) -> (Vec<RequestRecord>, Option<NetworkLimitError>) {
        let mut state = self.state();
        (std::mem::take(&mut state.records), state.exceeded.clone())
    }

    /// Records the first limit exceeded and stops the guest.
    fn exceed(&self, error: NetworkLimitError) {
        self.state().exceeded.get_or_insert(error);
        (self.stop)();
    }

    fn update(&self, index: usize, change: impl FnOnce(&mut RequestRecord)) {
        if let Some(record) = self.state().records.get_mut(index) {
            change(record);
        }
    }

    /// Checks and sends one request (see the module docs).
    pub(crate) async fn send(
        self: Arc<Self>,
        request: Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<Sent, HttpError> {
        let started = Instant::now();
        let index = {
            let mut state = self.state();
            state.requests += 1;
            state.records.push(RequestRecord {
                method: request.method().to_string(),
                url: shown_url(request.uri()),
                address: None,
                status: None,
                bytes_sent: 0,
                bytes_received: 0,
                duration_ms: 0.0,
                approved: None,
                secrets: Vec::new(),
                masked: Vec::new(),
                error: None,
            });
            state.records.len() - 1
        };
        let result = self.checked_send(index, request, options).await;
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        self.update(index, |record| {
            record.duration_ms = elapsed;
            match &result {
                Ok((response, _)) => record.status = Some(response.status().as_u16()),
                Err(refusal) => record.error = Some(refusal.reason.clone()),
            }
        });
        result.map_err(|refusal| refusal.error)
    }

    async fn checked_send(
        self: &Arc<Self>,
        index: usize,
        request: Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<Sent, Refusal> {
        let limits = self.setup.limits;
        if self.state().requests > limits.max_requests {
            let error = NetworkLimitError::Requests {
                limit: limits.max_requests,
            };
            let refusal = Refusal::new(HttpError::ConnectionLimitReached, error.to_string());
            self.exceed(error);
            return Err(refusal);
        }
        let mut request = request;
        let target = Target::of(request.uri())
            .map_err(|reason| Refusal::new(HttpError::HttpRequestUriInvalid, reason))?;
        let (names_host, ask) = match self.setup.grant.decide(request.method(), &target) {
            Decision::Deny(reason) => {
                return Err(Refusal::new(HttpError::HttpRequestDenied, reason));
            }
            Decision::Allow {
                names_host, ask, ..
            } => (names_host, ask),
        };
        if ask {
            request = self.approved(index, request).await?;
        }
        let mut mask = SecretMask::new();
        for secret in self.setup.secrets.iter().filter(|s| s.applies_to(&target)) {
            let (name, value, texts) = secret
                .header()
                .map_err(|reason| Refusal::new(HttpError::HttpRequestDenied, reason))?;
            request.headers_mut().insert(name, value);
            mask.add(secret.name(), texts);
            self.update(index, |record| {
                record.secrets.push(secret.name().to_owned())
            });
        }
        if !mask.is_empty() {
            // A compressed body could carry the secret back unseen: ask for none.
            request.headers_mut().insert(
                http::header::ACCEPT_ENCODING,
                http::HeaderValue::from_static("identity"),
            );
        }
        let addresses = self.addresses(&target, names_host).await?;
        let connect_timeout = shorter(
            options.and_then(|o| o.connect_timeout),
            limits.connect_timeout,
        );
        let connected = transport::connect(&addresses, target.port, connect_timeout.0)
            .await
            .map_err(|e| {
                Refusal::new(HttpError::ConnectionRefused, format!("cannot connect: {e}"))
            })?;
        let Some((stream, peer)) = connected else {
            return Err(self.timed_out(
                connect_timeout,
                HttpError::ConnectionTimeout,
                NetworkLimitError::Connect {
                    limit: limits.connect_timeout,
                },
            ));
        };
        if !addresses.contains(&peer.ip()) || peer.port() != target.port {
            return Err(Refusal::new(
                HttpError::DestinationIpProhibited,
                format!("connected to {peer}, which is not the address checked"),
            ));
        }
        self.update(index, |record| record.address = Some(peer));
        let stream: Box<dyn transport::Stream> = if target.https {
            let handshake =
                tokio::time::timeout(connect_timeout.0, transport::tls(stream, &target.host));
            match handshake.await {
                Ok(stream) => stream.map_err(|e| Refusal::new(e, "TLS failed".into()))?,
                Err(_) => {
                    return Err(self.timed_out(
                        connect_timeout,
                        HttpError::ConnectionTimeout,
                        NetworkLimitError::Connect {
                            limit: limits.connect_timeout,
                        },
                    ));
                }
            }
        } else {
            Box::new(stream)
        };
        let (mut sender, driver) = transport::handshake(stream)
            .await
            .map_err(|e| Refusal::new(e, "the HTTP handshake failed".into()))?;
        let request = self.outgoing(index, request)?;
        let first_byte = shorter(
            options.and_then(|o| o.first_byte_timeout),
            limits.first_byte_timeout,
        );
        let response = match tokio::time::timeout(first_byte.0, sender.send_request(request)).await
        {
            Ok(response) => response.map_err(|e| {
                let reason = format!("the exchange failed: {e}");
                Refusal::new(HttpError::from(e), reason)
            })?,
            Err(_) => {
                return Err(self.timed_out(
                    first_byte,
                    HttpError::ConnectionReadTimeout,
                    NetworkLimitError::FirstByte {
                        limit: limits.first_byte_timeout,
                    },
                ));
            }
        };
        let between = shorter(
            options.and_then(|o| o.between_bytes_timeout),
            limits.between_bytes_timeout,
        );
        let meter = ReceivedMeter {
            call: self.clone(),
            index,
            ours: between.1,
        };
        let mut response =
            response.map(|body| transport::boxed(MeteredBody::received(body, meter, between.0)));
        if !mask.is_empty() {
            response = self.masked(index, response, mask)?;
        }
        Ok((response, driver))
    }

    /// The response to a request that carried secrets, with every secret it echoes masked (`mask.rs`);
    /// refused when its body is encoded, which could hide one.
    fn masked(
        self: &Arc<Self>,
        index: usize,
        response: http::Response<WasiBody>,
        mask: SecretMask,
    ) -> Result<http::Response<WasiBody>, Refusal> {
        let encoding = response.headers().get(http::header::CONTENT_ENCODING);
        if let Some(encoding) = encoding.filter(|e| !e.as_bytes().eq_ignore_ascii_case(b"identity"))
        {
            return Err(Refusal::new(
                HttpError::HttpProtocolError,
                format!(
                    "the response to a request that carried a secret is encoded ({}), so the secret \
                     could come back unseen in it: refused",
                    String::from_utf8_lossy(encoding.as_bytes())
                ),
            ));
        }
        let (mut parts, body) = response.into_parts();
        let found = mask.mask_headers(&mut parts.headers);
        let note = |names: &[&str]| {
            self.update(index, |record| {
                for name in names {
                    if !record.masked.iter().any(|m| m == name) {
                        record.masked.push((*name).to_owned());
                    }
                }
            });
        };
        note(&found.iter().map(String::as_str).collect::<Vec<_>>());
        let call = self.clone();
        let on_masked: OnMasked = Box::new(move |name| {
            call.update(index, |record| {
                if !record.masked.iter().any(|m| m == name) {
                    record.masked.push(name.to_owned());
                }
            });
        });
        let body = http_body_util::BodyExt::boxed_unsync(MaskedBody::new(body, mask, on_masked));
        Ok(http::Response::from_parts(parts, body))
    }

    /// Reads the body of a request marked `ask` (bounded by what the call may still send), asks the
    /// approver, and answers the request with exactly that body, or the refusal.
    async fn approved(
        &self,
        index: usize,
        request: Request<WasiBody>,
    ) -> Result<Request<WasiBody>, Refusal> {
        use http_body_util::BodyExt;
        let limit = self.setup.limits.max_bytes_sent;
        let remaining = limit.saturating_sub(self.state().sent);
        let (parts, body) = request.into_parts();
        let bounded =
            http_body_util::Limited::new(body, usize::try_from(remaining).unwrap_or(usize::MAX));
        let body = match bounded.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                let error = NetworkLimitError::BytesSent { limit };
                let refusal = Refusal::new(
                    HttpError::HttpRequestBodySize(Some(limit)),
                    error.to_string(),
                );
                self.exceed(error);
                return Err(refusal);
            }
            Err(e) => {
                return Err(Refusal::new(
                    HttpError::HttpRequestDenied,
                    format!("the request body could not be read: {e}"),
                ));
            }
        };
        let shown = NetworkRequest::new(&parts.method, &parts.uri, &body);
        let answer = match &self.setup.asker {
            Some(asker) => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                let asked = Instant::now();
                self.paused.waiting.fetch_add(1, Ordering::SeqCst);
                let answer = match asker.send((shown, reply)) {
                    Ok(()) => answer.await.ok(),
                    Err(_) => None,
                };
                let waited = u64::try_from(asked.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.paused.waited_nanos.fetch_add(waited, Ordering::SeqCst);
                self.paused.waiting.fetch_sub(1, Ordering::SeqCst);
                answer
            }
            None => None,
        };
        self.update(index, |record| record.approved = Some(answer == Some(true)));
        match answer {
            Some(true) => {
                let body = http_body_util::Full::new(body)
                    .map_err(|never| match never {})
                    .boxed_unsync();
                Ok(Request::from_parts(parts, body))
            }
            Some(false) => Err(Refusal::new(
                HttpError::HttpRequestDenied,
                "the approver did not allow the request: nothing was sent".into(),
            )),
            None => Err(Refusal::new(
                HttpError::HttpRequestDenied,
                "the request needs approval and there is nobody to ask: nothing was sent".into(),
            )),
        }
    }

    /// The request as it goes on the wire: only the path and query in the request line, the body
    /// counted against the call's limit.
    fn outgoing(
        self: &Arc<Self>,
        index: usize,
        request: Request<WasiBody>,
    ) -> Result<Request<MeteredBody<WasiBody, SentMeter>>, Refusal> {
        let (mut parts, body) = request.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        parts.uri = path
            .parse()
            .map_err(|_| Refusal::new(HttpError::HttpRequestUriInvalid, "bad path".into()))?;
        let meter = SentMeter {
            call: self.clone(),
            index,
        };
        Ok(Request::from_parts(parts, MeteredBody::sent(body, meter)))
    }

    /// The addresses `target`'s host may be reached at: an IP literal as it is, a name as the resolver
    /// answers it; only public ones unless the allowing rule names the host.
    async fn addresses(&self, target: &Target, names_host: bool) -> Result<Vec<IpAddr>, Refusal> {
        let found = match target.host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => {
                let lookup = self.setup.resolver.resolve(&target.host);
                match tokio::time::timeout(self.setup.limits.connect_timeout, lookup).await {
                    Ok(Ok(found)) if !found.is_empty() => found,
                    Ok(Ok(_)) | Ok(Err(_)) => {
                        return Err(Refusal::new(
                            HttpError::DestinationNotFound,
                            format!("`{}` does not resolve", target.host),
                        ));
                    }
                    Err(_) => {
                        return Err(Refusal::new(
                            HttpError::DnsTimeout,
                            format!("resolving `{}` timed out", target.host),
                        ));
                    }
                }
            }
        };
        if names_host {
            return Ok(found);
        }
        let mut refused = None;
        let public: Vec<IpAddr> = found
            .into_iter()
            .filter(|ip| match not_public(*ip) {
                Some(kind) => {
                    refused.get_or_insert((*ip, kind));
                    false
                }
                None => true,
            })
            .collect();
        match (public.is_empty(), refused) {
            (true, Some((ip, kind))) => Err(Refusal::new(
                HttpError::DestinationIpProhibited,
                format!(
                    "`{}` resolves to {ip}, a {kind} address, and no rule names that host",
                    target.host
                ),
            )),
            _ => Ok(public),
        }
    }

    /// A timeout: the call's own limit stops the call; a shorter one the tool asked for is only its error.
    fn timed_out(
        &self,
        (_, ours): (Duration, bool),
        error: HttpError,
        limit: NetworkLimitError,
    ) -> Refusal {
        let refusal = Refusal::new(error, limit.to_string());
        if ours {
            self.exceed(limit);
        }
        refusal
    }
}

/// The shorter of the tool's timeout and the limit, and whether it is the limit.
fn shorter(asked: Option<Duration>, limit: Duration) -> (Duration, bool) {
    match asked {
        Some(asked) if asked < limit => (asked, false),
        _ => (limit, true),
    }
}

/// Why a request got no response: the error the tool sees, and the reason recorded.
struct Refusal {
    error: HttpError,
    reason: String,
}

impl Refusal {
    fn new(error: HttpError, reason: String) -> Refusal {
        Refusal { error, reason }
    }
}

/// Counts a request body against the call's bytes-sent limit.
struct SentMeter {
    call: Arc<CallNetwork>,
    index: usize,
}

impl Meter for SentMeter {
    fn add(&self, bytes: u64) -> Result<(), HttpError> {
        let limit = self.call.setup.limits.max_bytes_sent;
        let over = {
            let mut state = self.call.state();
            state.sent += bytes;
            if let Some(record) = state.records.get_mut(self.index) {
                record.bytes_sent += bytes;
            }
            state.sent > limit
        };
        if over {
            self.call.exceed(NetworkLimitError::BytesSent { limit });
            return Err(HttpError::HttpRequestBodySize(Some(limit)));
        }
        Ok(())
    }

    fn stalled(&self, _: Duration) -> HttpError {
        HttpError::ConnectionWriteTimeout
    }
}

/// Counts a response body against the call's bytes-received limit; a stall past the limit stops the call.
struct ReceivedMeter {
    call: Arc<CallNetwork>,
    index: usize,
    /// The between-bytes timeout is the call's limit (not a shorter one the tool asked for).
    ours: bool,
}

impl Meter for ReceivedMeter {
    fn add(&self, bytes: u64) -> Result<(), HttpError> {
        let limit = self.call.setup.limits.max_bytes_received;
        let over = {
            let mut state = self.call.state();
            state.received += bytes;
            if let Some(record) = state.records.get_mut(self.index) {
                record.bytes_received += bytes;
            }
            state.received > limit
        };
        if over {
            self.call.exceed(NetworkLimitError::BytesReceived { limit });
            return Err(HttpError::HttpResponseBodySize(Some(limit)));
        }
        Ok(())
    }

    fn stalled(&self, waited: Duration) -> HttpError {
        if self.ours {
            self.call
                .exceed(NetworkLimitError::BetweenBytes { limit: waited });
        }
        HttpError::ConnectionReadTimeout
    }
}
