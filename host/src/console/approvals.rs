//! The questions waiting in the root (`.turngate/approvals/`, [`PendingApprovals`]), and the answers
//! the page gives them: one call, or every call shown for a turn in one request.
//!
//! An answer names the digest the page was shown, so it applies only to exactly that request: the
//! store refuses a digest with no question, a question whose record does not hash to its name, one
//! answered already (the first answer stands) and one past its deadline (denied).

use hyper::{Response, StatusCode};
use serde::Deserialize;

use super::{Body, State, json};
use crate::approval::pending::{ApprovalError, PendingApprovals};
use crate::digest::Sha256Digest;

/// Most answers one request may carry.
pub const MAX_ANSWERS: usize = 100;

/// `GET /api/approvals`: `{"approvals": [{"digest", "asked_ms", "deadline_ms", "turn", "request"}],
/// "damaged": ["..."]}`, oldest first; `damaged` says which records cannot be answered and why.
pub(super) fn waiting(state: &State) -> Response<Body> {
    match PendingApprovals::waiting_in(&state.root) {
        Ok(waiting) => json(
            StatusCode::OK,
            &serde_json::json!({
                "approvals": waiting.questions,
                "damaged": waiting.damaged.iter().map(ToString::to_string).collect::<Vec<_>>(),
            }),
        ),
        Err(e) => json(
            StatusCode::INTERNAL_SERVER_ERROR,
            &serde_json::json!({ "error": e.to_string() }),
        ),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswersBody {
    answers: Vec<AnswerBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    digest: Sha256Digest,
    approve: bool,
}

/// `POST /api/approvals` with `{"answers": [{"digest", "approve"}]}` (one call, or a turn's calls at
/// once): every digest is checked to be waiting before any is answered, so a turn is answered whole or
/// not at all (unless another answer lands between the check and the write: that one then stands and is
/// reported). 200 `{"answered": [{"digest", "approved"}]}`; 409 `{"error", "digest"}` when one is not
/// waiting, with nothing answered.
pub(super) fn answer(state: &State, body: &[u8]) -> Response<Body> {
    let request: AnswersBody = match serde_json::from_slice(body) {
        Ok(request) => request,
        Err(e) => {
            return json(
                StatusCode::BAD_REQUEST,
                &serde_json::json!({
                    "error": format!("expected {{\"answers\": [{{\"digest\", \"approve\"}}]}}: {e}")
                }),
            );
        }
    };
    if request.answers.is_empty() || request.answers.len() > MAX_ANSWERS {
        return json(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({ "error": format!("between 1 and {MAX_ANSWERS} answers a request") }),
        );
    }
    let approvals = match PendingApprovals::open_existing(&state.root) {
        Ok(Some(approvals)) => approvals,
        Ok(None) => return refused(&ApprovalError::Unknown(request.answers[0].digest)),
        Err(e) => return refused(&e),
    };
    let waiting = match approvals.waiting() {
        Ok(waiting) => waiting,
        Err(e) => return refused(&e),
    };
    if let Some(missing) = request
        .answers
        .iter()
        .find(|answer| !waiting.questions.iter().any(|w| w.digest == answer.digest))
    {
        // Say why: answered, past its deadline, or never asked.
        let why = match approvals.answer_of(&missing.digest) {
            Ok(Some(standing)) => ApprovalError::Answered {
                digest: missing.digest,
                approved: standing.approved,
            },
            _ => ApprovalError::Unknown(missing.digest),
        };
        return refused(&why);
    }
    let mut answered = Vec::new();
    for answer in &request.answers {
        match approvals.answer(&answer.digest, answer.approve) {
            Ok(given) => answered.push(serde_json::json!({
                "digest": given.digest, "approved": given.approved
            })),
            Err(e) => {
                let mut response = refused(&e);
                if !answered.is_empty() {
                    response = json(
                        StatusCode::CONFLICT,
                        &serde_json::json!({
                            "error": e.to_string(),
                            "digest": answer.digest,
                            "answered": answered,
                        }),
                    );
                }
                return response;
            }
        }
    }
    json(StatusCode::OK, &serde_json::json!({ "answered": answered }))
}

fn refused(error: &ApprovalError) -> Response<Body> {
    let digest = match error {
        ApprovalError::Unknown(digest)
        | ApprovalError::Expired(digest)
        | ApprovalError::Answered { digest, .. } => Some(*digest),
        _ => None,
    };
    let status = match digest {
        Some(_) => StatusCode::CONFLICT,
        None => StatusCode::INTERNAL_SERVER_ERROR,
    };
    json(
        status,
        &serde_json::json!({ "error": error.to_string(), "digest": digest }),
    )
}
