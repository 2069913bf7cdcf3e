//! A job's answer: one result message per call ID, then the turn report, each published on the job's
//! results subject with a de-duplication ID, and acknowledged by JetStream before the job is acked.
//!
//! Every message carries `Turngate-Kind: call | report`. A call's result has `Nats-Msg-Id:
//! <job>:call:<key>` (the key is the call ID, or `#<position>` for a Gemini call without one; a key
//! with characters outside `[A-Za-z0-9_.:#-]` or longer than 128 bytes is replaced by its SHA-256),
//! `Turngate-Call: <key>` (the same replacement), `Turngate-Replayed: true` when it was answered from the journal, and the
//! payload `{"job", "key", "id", "name", "status", "reason", "changes", "output"}`. The report has
//! `Nats-Msg-Id: <job>:report`, `Turngate-Exit` (the exit code `turngate run` would give: 0, 2 or 3;
//! 1 for a job that was refused) and the payload `turngate run` prints; a dead-lettered job's report
//! also has `"dead_letter": {"deliveries"}`, and a refused job's is `{"job", "error": {"kind",
//! "message"}}`.
//!
//! The report is the job's answer for good: once it is stored, nothing is published on the job's
//! subject again (a worker given the job again answers from it, see [`stored_report`]), so it is the
//! subject's last message. The results stream keeps it without an age limit.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::context::Context;
use async_nats::jetstream::message::PublishMessage;
use bytes::Bytes;
use serde_json::json;

use super::WorkerError;
use super::names::Names;
use crate::pipeline::{CallStatus, TurnReport, call_key};
use crate::test_hooks::worker_point;

/// The header telling a call's result from the report.
pub const HEADER_KIND: &str = "Turngate-Kind";
/// A call result's key.
pub const HEADER_CALL: &str = "Turngate-Call";
/// A call result answered from the journal.
pub const HEADER_REPLAYED: &str = "Turngate-Replayed";
/// The report's exit code.
pub const HEADER_EXIT: &str = "Turngate-Exit";
/// Exit code of a job that was refused (not a job, or its root cannot be opened).
pub const EXIT_REFUSED: u8 = 1;
/// How long a worker keeps retrying one publish (the NATS server restarting, say) before it gives
/// the job up to a later delivery.
const PUBLISH_PATIENCE: Duration = Duration::from_secs(30);

/// A job's report, as its worker published it.
#[derive(Debug, Clone)]
pub struct Report {
    /// The exit code `turngate run` would give (1 for a refused job).
    pub exit_code: u8,
    /// The JSON `turngate run` prints.
    pub json: Bytes,
}

impl Report {
    /// The report in a results message, if it is one.
    fn from_message(headers: Option<&HeaderMap>, payload: &Bytes) -> Option<Report> {
        let header = |name| headers.and_then(|h| h.get(name)).map(|v| v.as_str());
        (header(HEADER_KIND) == Some("report")).then(|| Report {
            exit_code: header(HEADER_EXIT)
                .and_then(|e| e.parse().ok())
                .unwrap_or(EXIT_REFUSED),
            json: payload.clone(),
        })
    }
}

/// The stored report of job `job`, if it was answered: the last message on its results subject, when
/// that is a report. (`None` as well when the results stream does not exist yet.)
pub async fn stored_report(
    js: &Context,
    names: &Names,
    job: &str,
) -> Result<Option<Report>, WorkerError> {
    use async_nats::jetstream::ErrorCode;
    use async_nats::jetstream::context::GetStreamErrorKind;
    use async_nats::jetstream::stream::LastRawMessageErrorKind;
    let stream = match js.get_stream(names.results_stream()).await {
        Ok(stream) => stream,
        Err(e) if matches!(e.kind(), GetStreamErrorKind::JetStream(ref j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(WorkerError::nats("opening the results stream")(&e)),
    };
    match stream
        .get_last_raw_message_by_subject(&names.results_subject(job))
        .await
    {
        Ok(message) => Ok(Report::from_message(
            Some(&message.headers),
            &message.payload,
        )),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(WorkerError::nats("reading a stored report")(&e)),
    }
}

/// One message of an answer.
#[derive(Debug, Clone)]
pub struct ResultMessage {
    /// Its de-duplication ID.
    pub msg_id: String,
    /// Its headers (the ID is added when it is published).
    pub headers: HeaderMap,
    /// The JSON payload.
    pub payload: Bytes,
}

/// Everything a job is answered with, on one subject.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The subject.
    pub subject: String,
    /// The messages, calls first, the report last.
    pub messages: Vec<ResultMessage>,
}

/// The exit code `turngate run` gives for a report: 3 not completed, 0 every call ok, 2 otherwise.
pub fn exit_code(report: &TurnReport) -> u8 {
    if !report.turn.is_completed() {
        3
    } else if report.all_ok() {
        0
    } else {
        2
    }
}

/// The de-duplication ID of a call's result.
pub fn call_msg_id(job: &str, key: &str) -> String {
    format!("{job}:call:{}", header_key(key))
}

/// A call key as it may appear in a header: itself when it is short and plain, otherwise its SHA-256
/// (a call ID is the model's text, and a header cannot carry a line break).
pub fn header_key(key: &str) -> String {
    let safe = key.len() <= 128
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.:#-".contains(&b));
    if safe {
        key.to_owned()
    } else {
        format!("sha256-{}", crate::audit::sha256_text(key))
    }
}

/// The de-duplication ID of a job's report.
pub fn report_msg_id(job: &str) -> String {
    format!("{job}:report")
}

impl Answer {
    /// The answer of a gated turn: one message per call, then the report. `replayed` holds the keys
    /// of the calls answered from the journal; `dead_letter` the deliveries of a job past its
    /// `max_deliver`.
    pub fn of_report(
        names: &Names,
        report: &TurnReport,
        replayed: &BTreeSet<String>,
        dead_letter: Option<u64>,
    ) -> Answer {
        let job = &report.turn_id;
        let mut messages = Vec::with_capacity(report.calls.len() + 1);
        for (position, call) in report.calls.iter().enumerate() {
            let key = call_key(call.id.as_deref(), position);
            let mut headers = HeaderMap::new();
            headers.insert(HEADER_KIND, "call");
            headers.insert(HEADER_CALL, header_key(&key).as_str());
            if replayed.contains(&key) {
                headers.insert(HEADER_REPLAYED, "true");
            }
            let payload = json!({
                "job": job,
                "key": key,
                "id": call.id,
                "name": call.name,
                "status": call.status,
                "reason": call.reason,
                "changes": serde_json::to_value(call).map(|v| v["changes"].clone()).unwrap_or_default(),
                "output": (call.status == CallStatus::Ok).then_some(call.output.as_deref()).flatten(),
            });
            messages.push(ResultMessage {
                msg_id: call_msg_id(job, &key),
                headers,
                payload: Bytes::from(payload.to_string()),
            });
        }
        let mut body = report.to_json();
        if let Some(deliveries) = dead_letter {
            body["dead_letter"] = json!({ "deliveries": deliveries });
        }
        messages.push(report_message(job, exit_code(report), body));
        Answer {
            subject: names.results_subject(job),
            messages,
        }
    }

    /// The answer to a message that is not a job (or whose root cannot be opened): the report alone,
    /// with exit code 1. Without a usable job ID it goes to the invalid-results subject, named by the
    /// message's stream sequence.
    pub fn refused(names: &Names, job: Option<&str>, stream_seq: u64, message: &str) -> Answer {
        let body = json!({
            "job": job,
            "error": {"kind": "refused", "message": message},
        });
        match job {
            Some(job) => Answer {
                subject: names.results_subject(job),
                messages: vec![report_message(job, EXIT_REFUSED, body)],
            },
            None => {
                let mut message = report_message("", EXIT_REFUSED, body);
                message.msg_id = format!("_invalid:{stream_seq}");
                Answer {
                    subject: names.invalid_results_subject(),
                    messages: vec![message],
                }
            }
        }
    }

    /// Publishes every message in order, each with its de-duplication ID, waiting for JetStream to
    /// acknowledge each one (a publish that fails is retried for a while: the IDs make that safe).
    pub async fn publish(&self, js: &Context) -> Result<(), WorkerError> {
        for (index, message) in self.messages.iter().enumerate() {
            publish_one(js, &self.subject, message).await?;
            if index == 0 {
                worker_point("mid-publish");
            }
        }
        Ok(())
    }
}

fn report_message(job: &str, exit: u8, body: serde_json::Value) -> ResultMessage {
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_KIND, "report");
    headers.insert(HEADER_EXIT, exit.to_string().as_str());
    ResultMessage {
        msg_id: report_msg_id(job),
        headers,
        payload: Bytes::from(body.to_string()),
    }
}

async fn publish_one(
    js: &Context,
    subject: &str,
    message: &ResultMessage,
) -> Result<(), WorkerError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(50);
    loop {
        let publish = PublishMessage::build()
            .headers(message.headers.clone())
            .message_id(&message.msg_id)
            .payload(message.payload.clone());
        let result = match js.send_publish(subject.to_owned(), publish).await {
            Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match result {
            Ok(()) => return Ok(()),
            Err(error) if started.elapsed() > PUBLISH_PATIENCE => {
                return Err(WorkerError::Nats {
                    what: "publishing a result",
                    message: error,
                });
            }
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}
