//! The `WasiHttpHooks` of a call: every request the tool makes through `wasi:http/outgoing-handler`
//! (WASI 0.2) or `wasi:http/client` (0.3; wasmtime-wasi-http sends both generations to the same hook)
//! (redirects included: wasi:http does not follow them, so a redirect is the tool's next request) goes
//! to its [`CallNetwork`], which checks it before anything is sent. A struct of its own, apart from the
//! store's view, as the crate asks.

use std::sync::Arc;

use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::call::CallNetwork;

/// The hooks of one call's store.
pub(crate) struct NetworkHooks {
    call: Arc<CallNetwork>,
}

impl NetworkHooks {
    pub(crate) fn new(call: Arc<CallNetwork>) -> NetworkHooks {
        NetworkHooks { call }
    }
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for NetworkHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_done: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let call = self.call.clone();
        Box::new(async move {
            let (response, driver) = call.send(request, options).await?;
            let io: Box<dyn Future<Output = Result<(), HttpError>> + Send> =
                Box::new(async move { driver.await.map_err(HttpError::from) });
            Ok((response, io))
        })
    }
}
