//! The wire: a TCP connection to an address that was checked, TLS for `https`, one HTTP/1.1 exchange
//! with hyper's client, and the bodies that count bytes and watch the clock on their way through.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

/// A byte stream hyper can speak HTTP over: plain TCP or TLS over TCP.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connects to the first of `addresses` that answers on `port`, within `timeout` in all; answers the
/// stream and the peer address the socket really has.
pub(crate) async fn connect(
    addresses: &[std::net::IpAddr],
    port: u16,
    timeout: Duration,
) -> Result<Option<(TcpStream, SocketAddr)>, std::io::Error> {
    let attempt = async {
        let mut last = None;
        for ip in addresses {
            if crate::test_hooks::connection_forbidden(*ip) {
                last = Some(std::io::Error::other(format!(
                    "{ip}: not loopback, and TURNGATE_TEST_LOOPBACK_ONLY is set"
                )));
                continue;
            }
            match TcpStream::connect(SocketAddr::new(*ip, port)).await {
                Ok(stream) => {
                    let peer = stream.peer_addr()?;
                    return Ok((stream, peer));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no address to connect to")))
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(result) => result.map(Some),
        Err(_) => Ok(None),
    }
}

/// Wraps `stream` in TLS for `host` (a name or an IP address), verified against the webpki roots.
pub(crate) async fn tls(stream: TcpStream, host: &str) -> Result<Box<dyn Stream>, HttpError> {
    let name = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => rustls::pki_types::ServerName::from(ip),
        Err(_) => rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(|_| HttpError::HttpRequestUriInvalid)?,
    };
    let connector = tokio_rustls::TlsConnector::from(crate::tls::client_config());
    let stream = connector
        .connect(name, stream)
        .await
        .map_err(HttpError::Tls)?;
    Ok(Box::new(stream))
}

/// Starts HTTP/1.1 on `stream`; the connection is driven by a task that ends with the call's store.
pub(crate) async fn handshake<B>(
    stream: Box<dyn Stream>,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<B>,
        wasmtime_wasi::runtime::AbortOnDropJoinHandle<Result<(), hyper::Error>>,
    ),
    HttpError,
>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = wasmtime_wasi::runtime::spawn(connection);
    Ok((sender, driver))
}

/// What a body reports to its call as bytes go through.
pub(crate) trait Meter: Send + 'static {
    /// `bytes` more went through; `Err` stops the body (a limit was exceeded).
    fn add(&self, bytes: u64) -> Result<(), HttpError>;
    /// The body stalled for `waited`.
    fn stalled(&self, waited: Duration) -> HttpError;
}

/// A body that reports every frame's size to its meter and fails when the meter says so.
pub(crate) struct MeteredBody<B, M> {
    inner: B,
    meter: M,
    /// Set for response bodies: the longest wait between two frames.
    stall: Option<(Duration, Pin<Box<tokio::time::Sleep>>)>,
}

impl<B, M> MeteredBody<B, M> {
    /// A request body: counted, no clock.
    pub(crate) fn sent(inner: B, meter: M) -> Self {
        MeteredBody {
            inner,
            meter,
            stall: None,
        }
    }

    /// A response body: counted, and failed when no frame comes for `between_bytes`.
    pub(crate) fn received(inner: B, meter: M, between_bytes: Duration) -> Self {
        MeteredBody {
            inner,
            meter,
            stall: Some((between_bytes, Box::pin(tokio::time::sleep(between_bytes)))),
        }
    }
}

impl<B, M> Body for MeteredBody<B, M>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<HttpError>,
    M: Meter + Unpin,
{
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let size = frame.data_ref().map_or(0, |d| d.len() as u64);
                if let Err(e) = this.meter.add(size) {
                    return Poll::Ready(Some(Err(e)));
                }
                if let Some((wait, sleep)) = &mut this.stall {
                    sleep.as_mut().reset(tokio::time::Instant::now() + *wait);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match &mut this.stall {
                Some((wait, sleep)) => {
                    ready!(sleep.as_mut().poll(cx));
                    Poll::Ready(Some(Err(this.meter.stalled(*wait))))
                }
                None => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Boxes a metered response body into the body type wasi:http hands the guest.
pub(crate) fn boxed<M: Meter + Unpin>(body: MeteredBody<hyper::body::Incoming, M>) -> WasiBody {
    http_body_util::BodyExt::boxed_unsync(body)
}
