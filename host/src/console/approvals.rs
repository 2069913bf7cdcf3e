//! The questions waiting in the root (`.turngate/approvals/`, [`PendingApprovals`]) and, with
//! `--nats`, those a worker fleet published ([`FleetApprovals`]), and the answers the page gives them:
//! one call, or every call shown for a turn (a job, for a fleet's) in one request.
//!
//! An answer names the digest the page was shown, so it applies only to exactly that request: the
//! store refuses a digest with no question, a question whose record does not hash to its name, one
//! answered already (the first answer stands) and one past its deadline (denied).

use hyper::{Response, StatusCode};
use serde::Deserialize;

use super::{Body, State, diff_pages, json, query_value};
use crate::approval::pending::{ApprovalError, PendingApprovals};
use crate::digest::Sha256Digest;
use crate::worker::approvals::{FleetAnswer, FleetApprovals, FleetQuestion};

/// Most answers one request may carry.
pub const MAX_ANSWERS: usize = 100;

/// `GET /api/approvals`: `{"approvals": [{"digest", "asked_ms", "deadline_ms", "turn", "position",
/// "request", "fleet", "diff_hunks", "diff_next"}], "damaged": ["..."]}`, the root's oldest first, then
/// the fleet's (`fleet`: `true`, `turn` the job that asked); `damaged` says which records cannot be
/// answered and why. Each request's `diff` is its first page ([`diff_pages`]), `diff_hunks` how many
/// hunks the whole has, `diff_next` the line its next page starts at (`null`: none).
pub(super) async fn waiting(state: &State) -> Response<Body> {
    let local = match PendingApprovals::waiting_in(&state.root) {
        Ok(local) => local,
        Err(e) => return failed(&e.to_string()),
    };
    let mut questions: Vec<serde_json::Value> = local
        .questions
        .iter()
        .map(|question| {
            let mut shown = serde_json::to_value(question).expect("a question serializes");
            shown["fleet"] = false.into();
            first_page(shown)
        })
        .collect();
    match fleet_waiting(state).await {
        Ok(fleet) => questions.extend(fleet.iter().map(fleet_shown).map(first_page)),
        Err(e) => return failed(&e),
    }
    json(
        StatusCode::OK,
        &serde_json::json!({
            "approvals": questions,
            "damaged": local.damaged.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }),
    )
}

/// The fleet's waiting questions (none without `--nats`).
async fn fleet_waiting(state: &State) -> Result<Vec<FleetQuestion>, String> {
    match &state.fleet {
        Some(fleet) => fleet.waiting().await.map_err(|e| e.to_string()),
        None => Ok(Vec::new()),
    }
}

/// A fleet question as the page shows it: as the root's are, its job as its turn.
fn fleet_shown(question: &FleetQuestion) -> serde_json::Value {
    serde_json::json!({
        "digest": question.digest,
        "asked_ms": question.asked_ms,
        "deadline_ms": question.deadline_ms,
        "turn": question.job,
        "position": question.position,
        "request": question.request,
        "fleet": true,
    })
}

/// A question as listed: its diff's first page, how many hunks the diff has and where its next page
/// starts.
fn first_page(mut shown: serde_json::Value) -> serde_json::Value {
    let (hunks, next) = match shown
        .get_mut("request")
        .and_then(serde_json::Value::as_object_mut)
    {
        Some(request) => {
            let diff = request.get("diff").and_then(serde_json::Value::as_str);
            let first = diff_pages::page(diff.unwrap_or_default(), 0);
            request.insert("diff".into(), first.diff.into());
            (first.hunks, first.next)
        }
        None => (0, None),
    };
    shown["diff_hunks"] = hunks.into();
    shown["diff_next"] = next.into();
    shown
}

/// `GET /api/approvals/diff?digest=D&from=L`: the page of question `D`'s diff from line `L` (`{"diff",
/// "from", "next", "hunks"}`), held to its digest as an answer is; 409 when the root and the fleet
/// have no such question.
pub(super) async fn diff_page(state: &State, query: &str) -> Response<Body> {
    let Some(digest) = query_value(query, "digest").and_then(|v| v.parse::<Sha256Digest>().ok())
    else {
        return json(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({ "error": "give digest=sha256:HEX" }),
        );
    };
    let from = query_value(query, "from")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    let local = match PendingApprovals::open_existing(&state.root) {
        Ok(Some(approvals)) => match approvals.question(&digest) {
            Ok(question) => Some(question.request),
            Err(ApprovalError::Unknown(_)) => None,
            Err(e) => return refused(&e),
        },
        Ok(None) => None,
        Err(e) => return refused(&e),
    };
    let request = match (local, &state.fleet) {
        (Some(request), _) => request,
        (None, Some(fleet)) => match fleet.question(&digest).await {
            Ok(Some(question)) => question.request,
            Ok(None) => return refused(&ApprovalError::Unknown(digest)),
            Err(e) => return failed(&e.to_string()),
        },
        (None, None) => return refused(&ApprovalError::Unknown(digest)),
    };
    let diff = request.get("diff").and_then(serde_json::Value::as_str);
    let page = diff_pages::page(diff.unwrap_or_default(), from);
    json(
        StatusCode::OK,
        &serde_json::to_value(page).expect("a page serializes"),
    )
}

fn failed(error: &str) -> Response<Body> {
    json(
        StatusCode::INTERNAL_SERVER_ERROR,
        &serde_json::json!({ "error": error }),
    )
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
pub(super) async fn answer(state: &State, body: &[u8]) -> Response<Body> {
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
        Ok(approvals) => approvals,
        Err(e) => return refused(&e),
    };
    let waiting = match approvals.as_ref().map(PendingApprovals::waiting) {
        Some(Ok(waiting)) => waiting.questions,
        Some(Err(e)) => return refused(&e),
        None => Vec::new(),
    };
    let fleet_waiting = match fleet_waiting(state).await {
        Ok(fleet) => fleet,
        Err(e) => return failed(&e),
    };
    let in_fleet = |digest: &Sha256Digest| fleet_waiting.iter().any(|q| q.digest == *digest);
    if let Some(missing) = request.answers.iter().find(|answer| {
        !waiting.iter().any(|w| w.digest == answer.digest) && !in_fleet(&answer.digest)
    }) {
        // Say why: answered, past its deadline, or never asked.
        let why = match approvals.as_ref().map(|a| a.answer_of(&missing.digest)) {
            Some(Ok(Some(standing))) => ApprovalError::Answered {
                digest: missing.digest,
                approved: standing.approved,
            },
            _ => ApprovalError::Unknown(missing.digest),
        };
        return refused(&why);
    }
    let mut answered = Vec::new();
    for answer in &request.answers {
        if in_fleet(&answer.digest) {
            let fleet = state
                .fleet
                .as_ref()
                .expect("a fleet question came from the fleet");
            match answer_in_fleet(fleet, answer).await {
                Ok(given) => answered.push(given),
                Err(response) => return response,
            }
            continue;
        }
        let approvals = approvals
            .as_ref()
            .expect("a root question came from the root");
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

/// Answers a fleet's question: what stands (`{"digest", "approved"}`), or the refusal.
async fn answer_in_fleet(
    fleet: &FleetApprovals,
    answer: &AnswerBody,
) -> Result<serde_json::Value, Response<Body>> {
    let given = |approved| serde_json::json!({ "digest": answer.digest, "approved": approved });
    match fleet.answer(&answer.digest, answer.approve).await {
        Ok(FleetAnswer::Recorded) => Ok(given(answer.approve)),
        Ok(FleetAnswer::AlreadyAnswered(approved)) => Err(refused(&ApprovalError::Answered {
            digest: answer.digest,
            approved,
        })),
        Ok(FleetAnswer::NotAsked) => Err(refused(&ApprovalError::Unknown(answer.digest))),
        Ok(FleetAnswer::Expired) => Err(refused(&ApprovalError::Expired(answer.digest))),
        Err(e) => Err(failed(&e.to_string())),
    }
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
