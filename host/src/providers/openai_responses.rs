//! OpenAI Responses streaming (`event: response.*`, terminal `response.completed` / `.incomplete` /
//! `.failed`).
//!
//! Items come from `response.output_item.added` / `.done` (keyed by `output_index`); function call arguments
//! from `response.function_call_arguments.delta` (keyed by `item_id`, or by `output_index` when the `item_id`
//! names no added item: some compatible endpoints send a new one with every event), concatenated exactly as
//! received. A function call's name is taken from `output_item.added` when a later event lacks it.
//!
//! Calls ([`RawCall`], in output order): every `function_call` (call ID `call_id`), and every item the client
//! must answer, with its [`CallKind`]: `local_shell_call`, `shell_call` in a local environment (one with no
//! environment counts as local unless the response holds its `shell_call_output`), `apply_patch_call`,
//! `custom_tool_call`, `computer_call`, `tool_search_call` with `execution: "client"` (call ID `call_id`), and
//! `mcp_approval_request` (answered by its `id`). Items OpenAI runs itself (web and file search, code
//! interpreter, `mcp_call`, `mcp_list_tools`, hosted shell, image generation, programs) stay in
//! `Turn::assistant` only, and so do xAI's server-side X searches, streamed as `custom_tool_call` items
//! whose `call_id` starts with `xs_call_` and whose `id` is `ctc_..._xs_call_...`.
//!
//! Classification (the first fault wins, see [`crate::providers`]):
//! * An `error` event (flat `code` / `message` or a nested `error` object) -> Errored.
//! * Malformed: unparseable data, data without a string `type`, an `event:` name that differs from
//!   `data.type` (a missing `event:` line is tolerated), a `sequence_number` that does not strictly increase
//!   (a missing one is tolerated), a second `added` for an output index or item id, `done` / deltas for an
//!   item never added, an `item_id` and an `output_index` that name different items, argument deltas for a
//!   non-function item or after its `done`, final arguments (from `.done`, `output_item.done` or the terminal
//!   output) that differ from the streamed deltas, a call without its call ID, a streamed call missing from
//!   the terminal output (except, in `response.incomplete`, one that was still streaming), any event after
//!   the terminal event (but one `data: [DONE]` line, which gateways such as OpenRouter send, as the
//!   OpenAI SDKs' stream readers accept), stray lines.
//! * No terminal event -> Incomplete.
//! * `response.completed`: `status: "completed"` -> Completed, unless a refusal content part or refusal delta
//!   was seen (-> Refused) or a function call item's status is not `completed` (-> Malformed; except a call
//!   made by a program, `caller: {"type": "program"}`, still `in_progress` with its arguments finished: the
//!   client owns it); any other status -> Incomplete. `response.incomplete`: `incomplete_details.reason`
//!   `max_output_tokens` -> Truncated, `content_filter` -> Filtered, else Incomplete. `response.failed` ->
//!   Errored.
//!
//! `Turn::assistant` is the terminal event's `response.output` when it is a non-empty array (with a missing
//! function call `name` filled from the streamed item) and holds every streamed call, else the streamed
//! items.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::providers::{
    Common, ProviderFold, TextDelta, clip, describe_error, describe_undispatched, str_field,
    typed_event,
};
use crate::sse::Undispatched;
use crate::turn::{CallKind, Provider, RawCall, Turn, TurnStatus};

#[derive(Debug)]
struct Item {
    added: Map<String, Value>,
    done: Option<Map<String, Value>>,
    args: String,
    /// The argument text is established (by deltas or a `.done` event); later sources must agree.
    args_fixed: bool,
    /// `function_call_arguments.done` was seen: no more deltas.
    args_done: bool,
    parts: BTreeMap<u64, Value>,
}

impl Item {
    fn is_function_call(&self) -> bool {
        str_field(&self.added, "type") == Some("function_call")
    }

    /// The item asks the client for an answer (judged from the item alone).
    fn is_client_call(&self) -> bool {
        client_kind(&self.accumulated(), &[]).is_some()
    }

    /// The arguments are final: `function_call_arguments.done` or `output_item.done` was seen.
    fn args_finished(&self) -> bool {
        self.args_done || self.done.is_some()
    }

    fn id(&self) -> Option<&str> {
        str_field(&self.added, "id")
    }

    /// The item as accumulated from the stream.
    fn accumulated(&self) -> Map<String, Value> {
        if let Some(done) = &self.done {
            let mut item = done.clone();
            self.fill_name(&mut item);
            return item;
        }
        let mut item = self.added.clone();
        if self.is_function_call() {
            item.insert("arguments".into(), Value::String(self.args.clone()));
        } else if !self.parts.is_empty() {
            item.insert(
                "content".into(),
                Value::Array(self.parts.values().cloned().collect()),
            );
        }
        item
    }

    fn fill_name(&self, item: &mut Map<String, Value>) {
        if self.is_function_call()
            && str_field(item, "name").is_none()
            && let Some(name) = self.added.get("name")
        {
            item.insert("name".into(), name.clone());
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TerminalKind {
    Completed,
    Incomplete,
    Failed,
}

/// Fold for [`Provider::OpenAiResponses`].
#[derive(Debug, Default)]
pub struct ResponsesFold {
    common: Common,
    last_sequence: Option<u64>,
    items: BTreeMap<u64, Item>,
    ids: BTreeMap<String, u64>,
    refusal: String,
    refusal_seen: bool,
    terminal: Option<(TerminalKind, Map<String, Value>)>,
    /// A `data: [DONE]` line followed the terminal event.
    done_line: bool,
}

impl ResponsesFold {
    /// The output index an event is about: its `item_id` when that names an added item (and then its
    /// `output_index`, if any, must agree), else its `output_index` (some compatible endpoints send a new
    /// `item_id` with every event, while the output index stays consistent).
    fn locate(&mut self, obj: &Map<String, Value>, kind: &str) -> Option<u64> {
        let by_id = str_field(obj, "item_id").and_then(|id| self.ids.get(id).copied());
        let index = obj.get("output_index").and_then(Value::as_u64);
        let found = match (by_id, index) {
            (Some(at), Some(index)) if at != index => {
                self.common.malformed(format!(
                    "{kind}: item_id names the item at output_index {at}, but output_index is {index}"
                ));
                return None;
            }
            (Some(at), _) => Some(at),
            (None, index) => index.filter(|i| self.items.contains_key(i)),
        };
        if found.is_none() {
            self.common
                .malformed(format!("{kind} for an item never added"));
        }
        found
    }

    fn on_object(&mut self, kind: &str, obj: &Map<String, Value>, out: &mut Vec<TextDelta>) {
        match kind {
            "response.output_item.added" => {
                let (Some(index), Some(item)) = (
                    obj.get("output_index").and_then(Value::as_u64),
                    obj.get("item").and_then(Value::as_object),
                ) else {
                    self.common
                        .malformed(format!("{kind} without output_index and item"));
                    return;
                };
                if self.items.contains_key(&index) {
                    self.common
                        .malformed(format!("second output_item.added for output_index {index}"));
                    return;
                }
                if let Some(id) = str_field(item, "id")
                    && self.ids.insert(id.to_owned(), index).is_some()
                {
                    self.common
                        .malformed(format!("second output item with id {}", clip(id)));
                }
                if str_field(item, "type") == Some("function_call")
                    && (str_field(item, "call_id").is_none() || str_field(item, "name").is_none())
                {
                    self.common.malformed(format!(
                        "function_call item {index} without call_id and name"
                    ));
                }
                let args = str_field(item, "arguments").unwrap_or_default().to_owned();
                let item = Item {
                    added: item.clone(),
                    done: None,
                    args,
                    args_fixed: false,
                    args_done: false,
                    parts: BTreeMap::new(),
                };
                self.items.insert(index, item);
            }
            "response.output_item.done" => {
                let (Some(index), Some(done)) = (
                    obj.get("output_index").and_then(Value::as_u64),
                    obj.get("item").and_then(Value::as_object),
                ) else {
                    self.common
                        .malformed(format!("{kind} without output_index and item"));
                    return;
                };
                let Some(item) = self.items.get_mut(&index) else {
                    self.common.malformed(format!(
                        "output_item.done for output_index {index}, never added"
                    ));
                    return;
                };
                if item.done.is_some() {
                    self.common
                        .malformed(format!("second output_item.done for output_index {index}"));
                    return;
                }
                let mut problem = None;
                if item.is_function_call() {
                    if let Some(args) = str_field(done, "arguments") {
                        if item.args_fixed && args != item.args {
                            problem = Some(format!(
                                "output_item.done arguments of item {index} differ from the streamed deltas"
                            ));
                        } else if !item.args_fixed {
                            item.args = args.to_owned();
                            item.args_fixed = true;
                        }
                    }
                    for key in ["name", "call_id"] {
                        if let (Some(a), Some(b)) =
                            (str_field(&item.added, key), str_field(done, key))
                            && a != b
                        {
                            problem = Some(format!(
                                "output_item.done changed the {key} of item {index}"
                            ));
                        }
                    }
                }
                item.done = Some(done.clone());
                if let Some(p) = problem {
                    self.common.malformed(p);
                }
            }
            "response.content_part.added" | "response.content_part.done" => {
                let Some(index) = self.locate(obj, kind) else {
                    return;
                };
                let (Some(ci), Some(part)) = (
                    obj.get("content_index").and_then(Value::as_u64),
                    obj.get("part"),
                ) else {
                    self.common
                        .malformed(format!("{kind} without content_index and part"));
                    return;
                };
                if part.get("type").and_then(Value::as_str) == Some("refusal") {
                    self.refusal_seen = true;
                }
                if let Some(item) = self.items.get_mut(&index) {
                    item.parts.insert(ci, part.clone());
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let Some(delta) = str_field(obj, "delta") else {
                    self.common
                        .malformed(format!("{kind} without a string delta"));
                    return;
                };
                let (field, refusal) = if kind == "response.output_text.delta" {
                    ("text", false)
                } else {
                    ("refusal", true)
                };
                if refusal {
                    self.refusal_seen = true;
                    self.refusal.push_str(delta);
                } else {
                    self.common.text(delta, out);
                }
                let ci = obj.get("content_index").and_then(Value::as_u64);
                let Some(index) = self.locate(obj, kind) else {
                    return;
                };
                if let (Some(item), Some(ci)) = (self.items.get_mut(&index), ci)
                    && let Some(Value::String(s)) =
                        item.parts.get_mut(&ci).and_then(|p| p.get_mut(field))
                {
                    s.push_str(delta);
                }
            }
            "response.refusal.done" => self.refusal_seen = true,
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                let Some(index) = self.locate(obj, kind) else {
                    return;
                };
                let delta = kind.ends_with(".delta");
                let Some(text) = str_field(obj, if delta { "delta" } else { "arguments" }) else {
                    self.common.malformed(format!(
                        "{kind} without a string {}",
                        if delta { "delta" } else { "arguments" }
                    ));
                    return;
                };
                let Some(item) = self.items.get_mut(&index) else {
                    return;
                };
                if !item.is_function_call() {
                    self.common.malformed(format!(
                        "{kind} for item {index}, which is not a function_call"
                    ));
                } else if item.done.is_some() {
                    self.common.malformed(format!(
                        "{kind} for item {index} after its output_item.done"
                    ));
                } else if item.args_done {
                    self.common.malformed(format!(
                        "{kind} for item {index} after its function_call_arguments.done"
                    ));
                } else if delta {
                    item.args.push_str(text);
                    item.args_fixed = true;
                } else {
                    item.args_done = true;
                    if item.args_fixed && item.args != text {
                        self.common.malformed(format!(
                            "function_call_arguments.done of item {index} differs from the streamed deltas"
                        ));
                    } else {
                        item.args = text.to_owned();
                        item.args_fixed = true;
                    }
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let terminal = match kind {
                    "response.completed" => TerminalKind::Completed,
                    "response.incomplete" => TerminalKind::Incomplete,
                    _ => TerminalKind::Failed,
                };
                let response = match obj.get("response") {
                    Some(Value::Object(r)) => r.clone(),
                    _ => {
                        self.common
                            .malformed(format!("{kind} without a response object"));
                        Map::new()
                    }
                };
                if let Some(tokens) = response
                    .get("usage")
                    .and_then(|u| u.get("output_tokens"))
                    .and_then(Value::as_u64)
                {
                    self.common.output_tokens(tokens);
                }
                self.terminal = Some((terminal, response));
            }
            "error" => {
                let detail = match obj.get("error").filter(|e| e.is_object()) {
                    Some(nested) => describe_error(nested),
                    None => {
                        let mut flat = obj.clone();
                        flat.remove("type");
                        flat.remove("sequence_number");
                        describe_error(&Value::Object(flat))
                    }
                };
                self.common
                    .fault(TurnStatus::Errored, format!("error event: {detail}"));
            }
            _ => {} // created, in_progress, reasoning summaries, annotations, unknown types: tolerated
        }
    }

    /// The final item list: the terminal output when it is a non-empty array, else the streamed items.
    fn final_items(&mut self) -> Vec<Map<String, Value>> {
        let output = self
            .terminal
            .as_ref()
            .and_then(|(_, r)| r.get("output"))
            .and_then(Value::as_array);
        let Some(output) = output.filter(|o| !o.is_empty()) else {
            return self.items.values().map(Item::accumulated).collect();
        };
        let output_ids: std::collections::BTreeSet<&str> = output
            .iter()
            .filter_map(|o| o.get("id").and_then(Value::as_str))
            .collect();
        let in_output = |id: &str| output_ids.contains(id);
        let missing: Vec<&Item> = self
            .items
            .values()
            .filter(|i| i.is_client_call() && !i.id().is_some_and(in_output))
            .collect();
        if !missing.is_empty() {
            // A response cut short (`response.incomplete`) may leave out an item that was still streaming;
            // the provider said why it stopped. Anything else missing contradicts the stream.
            let cut_short = self
                .terminal
                .as_ref()
                .is_some_and(|(kind, _)| *kind == TerminalKind::Incomplete);
            if let Some(item) = missing.iter().find(|i| !cut_short || i.done.is_some()) {
                self.common.malformed(format!(
                    "call {} was streamed but is absent from the terminal output",
                    clip(item.id().unwrap_or("without id"))
                ));
            }
            return self.items.values().map(Item::accumulated).collect();
        }
        let mut items = Vec::with_capacity(output.len());
        for value in output {
            let Some(item) = value.as_object() else {
                self.common
                    .malformed("the terminal output holds a non-object item");
                continue;
            };
            let mut item = item.clone();
            let streamed = str_field(&item, "id")
                .and_then(|id| self.ids.get(id))
                .and_then(|i| self.items.get(i));
            if let Some(streamed) = streamed {
                streamed.fill_name(&mut item);
                let final_args = str_field(&item, "arguments");
                if streamed.is_function_call()
                    && streamed.args_fixed
                    && final_args.is_some_and(|a| a != streamed.args)
                {
                    self.common.malformed(format!(
                        "terminal output arguments of {} differ from the streamed deltas",
                        clip(streamed.id().unwrap_or_default())
                    ));
                }
            }
            items.push(item);
        }
        items
    }

    fn verdict(
        &self,
        items: &[Map<String, Value>],
        undispatched: Option<&Undispatched>,
    ) -> (TurnStatus, String) {
        let Some((kind, response)) = &self.terminal else {
            let mut detail =
                "stream ended before response.completed / .incomplete / .failed".to_owned();
            if let Some(u) = undispatched {
                detail = format!("{detail} ({})", describe_undispatched(u));
            }
            return (TurnStatus::Incomplete, detail);
        };
        let status = str_field(response, "status");
        match kind {
            TerminalKind::Completed if status != Some("completed") => (
                TurnStatus::Incomplete,
                format!(
                    "response.completed with status {}",
                    clip(status.unwrap_or("(none)"))
                ),
            ),
            TerminalKind::Completed => {
                let refusal_part = items.iter().any(|item| {
                    item.get("content")
                        .and_then(Value::as_array)
                        .is_some_and(|parts| {
                            parts
                                .iter()
                                .any(|p| p.get("type").and_then(Value::as_str) == Some("refusal"))
                        })
                });
                if self.refusal_seen || refusal_part {
                    let text = if self.refusal.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", clip(&self.refusal))
                    };
                    return (
                        TurnStatus::Refused,
                        format!("refusal in a completed response{text}"),
                    );
                }
                let unfinished = items.iter().find(|item| {
                    str_field(item, "type") == Some("function_call")
                        && str_field(item, "status").is_some_and(|s| s != "completed")
                        && !self.program_call_ready(item)
                });
                if let Some(item) = unfinished {
                    return (
                        TurnStatus::Malformed,
                        format!(
                            "completed response with function call {} in status {}",
                            clip(str_field(item, "call_id").unwrap_or_default()),
                            clip(str_field(item, "status").unwrap_or_default())
                        ),
                    );
                }
                let kinds: Vec<CallKind> =
                    items.iter().filter_map(|i| client_kind(i, items)).collect();
                let functions = kinds.iter().filter(|k| **k == CallKind::Function).count();
                let others = kinds.len() - functions;
                let mut detail = format!("response.completed: {functions} function call(s)");
                if others > 0 {
                    detail.push_str(&format!(", {others} other client item(s)"));
                }
                (TurnStatus::Completed, detail)
            }
            TerminalKind::Incomplete => {
                let reason = response
                    .get("incomplete_details")
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str);
                match reason {
                    Some("max_output_tokens") => (
                        TurnStatus::Truncated,
                        "response.incomplete: max_output_tokens".into(),
                    ),
                    Some("content_filter") => (
                        TurnStatus::Filtered,
                        "response.incomplete: content_filter".into(),
                    ),
                    Some(r) => (
                        TurnStatus::Incomplete,
                        format!("response.incomplete: {}", clip(r)),
                    ),
                    None => (
                        TurnStatus::Incomplete,
                        "response.incomplete without a reason".into(),
                    ),
                }
            }
            TerminalKind::Failed => {
                let detail = response
                    .get("error")
                    .filter(|e| !e.is_null())
                    .map(describe_error)
                    .unwrap_or_else(|| "no error details".into());
                (TurnStatus::Errored, format!("response.failed: {detail}"))
            }
        }
    }

    /// A function call that a program (programmatic tool calling) made: the response completes while the
    /// call is still `in_progress`, because the client owns it and must run it. It is ready when its
    /// arguments finished streaming.
    fn program_call_ready(&self, item: &Map<String, Value>) -> bool {
        let by_program = item
            .get("caller")
            .and_then(|c| c.get("type"))
            .and_then(Value::as_str)
            == Some("program");
        let streamed = str_field(item, "id")
            .and_then(|id| self.ids.get(id))
            .and_then(|i| self.items.get(i));
        by_program
            && str_field(item, "status") == Some("in_progress")
            && streamed.is_some_and(Item::args_finished)
    }

    fn stop_reason(&self) -> Option<String> {
        let (kind, response) = self.terminal.as_ref()?;
        let status = str_field(response, "status").map(str::to_owned);
        if *kind == TerminalKind::Incomplete {
            let reason = response
                .get("incomplete_details")
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str);
            if let Some(r) = reason {
                return Some(r.to_owned());
            }
        }
        status
    }
}

impl ProviderFold for ResponsesFold {
    fn common(&mut self) -> &mut Common {
        &mut self.common
    }

    fn event(&mut self, event: Option<String>, data: String, out: &mut Vec<TextDelta>) {
        // Gateways (OpenRouter) end the stream with `data: [DONE]` after the terminal event, as Chat does;
        // one such line right after the terminal event ends the stream cleanly.
        if self.terminal.is_some() && !self.done_line && event.is_none() && data.trim() == "[DONE]"
        {
            self.done_line = true;
            return;
        }
        if self.terminal.is_some() {
            self.common.malformed(format!(
                "event after the terminal event: {}",
                clip(event.as_deref().unwrap_or(&data))
            ));
            return;
        }
        let Some((kind, obj)) = typed_event(&mut self.common, event.as_deref(), &data) else {
            return;
        };
        match obj.get("sequence_number") {
            None | Some(Value::Null) => {}
            Some(n) => match n.as_u64() {
                Some(seq) => {
                    if let Some(last) = self.last_sequence.filter(|&last| seq <= last) {
                        self.common
                            .malformed(format!("sequence_number {seq} after {last}"));
                    }
                    self.last_sequence = Some(self.last_sequence.map_or(seq, |last| last.max(seq)));
                }
                None => self.common.malformed(format!(
                    "sequence_number is not an unsigned integer: {}",
                    clip(&n.to_string())
                )),
            },
        }
        self.on_object(&kind, &obj, out);
    }

    fn finish(mut self: Box<Self>, undispatched: Option<Undispatched>) -> Turn {
        if self.terminal.is_some()
            && let Some(u) = &undispatched
        {
            self.common.malformed(format!(
                "data after the terminal event: {}",
                describe_undispatched(u)
            ));
        }
        let items = self.final_items();
        let verdict = self.verdict(&items, undispatched.as_ref());
        let mut calls = Vec::new();
        for (position, item) in items.iter().enumerate() {
            let Some(kind) = client_kind(item, &items) else {
                continue;
            };
            let item_type = str_field(item, "type").unwrap_or_default();
            let raw_input = if kind == CallKind::Function {
                let streamed = str_field(item, "id")
                    .and_then(|id| self.ids.get(id))
                    .and_then(|i| self.items.get(i));
                match streamed {
                    Some(s) if s.args_fixed || str_field(item, "arguments").is_none() => {
                        s.args.clone()
                    }
                    _ => str_field(item, "arguments").unwrap_or_default().to_owned(),
                }
            } else {
                item_input(item)
            };
            // An approval request is answered by its own id; every other item by its call_id.
            let id_field = if kind == CallKind::McpApproval {
                "id"
            } else {
                "call_id"
            };
            let id = str_field(item, id_field).map(str::to_owned);
            if id.is_none() {
                self.common.malformed(format!(
                    "{} item at output position {position} without a string {id_field}",
                    clip(item_type)
                ));
            }
            calls.push(RawCall {
                kind,
                id,
                name: str_field(item, "name").unwrap_or(item_type).to_owned(),
                raw_input,
                index: position,
            });
        }
        let assistant = Value::Array(items.into_iter().map(Value::Object).collect());
        let stop_reason = self.stop_reason();
        self.common.into_turn(
            Provider::OpenAiResponses,
            assistant,
            calls,
            verdict,
            stop_reason,
        )
    }
}

/// Which client call an output item is, if it asks the client for an answer; `output` is the whole item list,
/// so that a shell call the provider already answered counts as hosted. Items the provider runs itself (web
/// search, file search, code interpreter, `mcp_call`, `mcp_list_tools`, hosted shell, image generation,
/// programs, server-side tool search) are not calls.
fn client_kind(item: &Map<String, Value>, output: &[Map<String, Value>]) -> Option<CallKind> {
    match str_field(item, "type")? {
        "function_call" => Some(CallKind::Function),
        "local_shell_call" => Some(CallKind::LocalShell),
        "shell_call" if is_local_shell_call(item, output) => Some(CallKind::Shell),
        "apply_patch_call" => Some(CallKind::ApplyPatch),
        "custom_tool_call" if !is_xai_server_search(item) => Some(CallKind::CustomTool),
        "tool_search_call" if str_field(item, "execution") == Some("client") => {
            Some(CallKind::ToolSearch)
        }
        "computer_call" => Some(CallKind::Computer),
        "mcp_approval_request" => Some(CallKind::McpApproval),
        _ => None,
    }
}

/// xAI runs its X search on its own side and streams each search as a `custom_tool_call` whose `call_id`
/// starts with `xs_call_` and whose item `id` is `ctc_..._xs_call_...`; the response goes on to answer.
/// Such an item is the assistant's content, not a call for the client. Both IDs must have that shape: a
/// client `custom_tool_call` (any other IDs) is still a call.
fn is_xai_server_search(item: &Map<String, Value>) -> bool {
    let call_id = str_field(item, "call_id").unwrap_or_default();
    let id = str_field(item, "id").unwrap_or_default();
    call_id.starts_with("xs_call_") && id.starts_with("ctc_") && id.contains("_xs_call_")
}

/// A `shell_call` runs on the client in a local environment; in a hosted container OpenAI runs it and the
/// response carries its `shell_call_output`.
fn is_local_shell_call(item: &Map<String, Value>, output: &[Map<String, Value>]) -> bool {
    let environment = item
        .get("environment")
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str);
    let answered = || {
        output.iter().any(|o| {
            str_field(o, "type") == Some("shell_call_output")
                && str_field(o, "call_id").is_some()
                && str_field(o, "call_id") == str_field(item, "call_id")
        })
    };
    match environment {
        Some("local") => true,
        Some(_) => false,
        None => !answered(),
    }
}

/// What a client item that is not a function call asks for, as text for the audit: its `arguments`,
/// `input`, `action`, `actions` or `operation`, whichever it has (strings as they are, anything else
/// serialized).
fn item_input(item: &Map<String, Value>) -> String {
    ["arguments", "input", "action", "actions", "operation"]
        .iter()
        .find_map(|key| item.get(*key).filter(|v| !v.is_null()))
        .map_or_else(String::new, |v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use crate::providers::decode;
    use crate::turn::{Provider, TurnStatus};

    fn ev(kind: &str, seq: u64, body: &str) -> String {
        format!("event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{seq}{body}}}\n\n")
    }

    fn stream(seqs: [u64; 4], terminal: &str, response: &str) -> String {
        let item = r#"{"id":"fc1","type":"function_call","status":"in_progress","arguments":"","call_id":"call1","name":"w"}"#;
        [
            ev(
                "response.created",
                seqs[0],
                r#","response":{"status":"in_progress","output":[]}"#,
            ),
            ev(
                "response.output_item.added",
                seqs[1],
                &format!(r#","output_index":0,"item":{item}"#),
            ),
            ev(
                "response.function_call_arguments.delta",
                seqs[2],
                r#","item_id":"fc1","output_index":0,"delta":"{}""#,
            ),
            ev(terminal, seqs[3], &format!(r#","response":{response}"#)),
        ]
        .concat()
    }

    #[test]
    fn classification() {
        let done = r#"{"status":"completed","output":[{"id":"fc1","type":"function_call","status":"completed","arguments":"{}","call_id":"call1","name":"w"}]}"#;
        let turn = decode(
            Provider::OpenAiResponses,
            stream([0, 1, 2, 3], "response.completed", done).as_bytes(),
        );
        assert_eq!(turn.ending.status, TurnStatus::Completed);
        assert_eq!(turn.calls[0].id.as_deref(), Some("call1"));
        assert_eq!(turn.calls[0].raw_input, "{}");
        let turn = decode(
            Provider::OpenAiResponses,
            stream([0, 1, 1, 3], "response.completed", done).as_bytes(),
        );
        assert_eq!(turn.ending.status, TurnStatus::Malformed);
        let cut = r#"{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}"#;
        let turn = decode(
            Provider::OpenAiResponses,
            stream([0, 1, 2, 3], "response.incomplete", cut).as_bytes(),
        );
        assert_eq!(turn.ending.status, TurnStatus::Truncated);
        assert_eq!(
            turn.ending.stop_reason.as_deref(),
            Some("max_output_tokens")
        );
        assert_eq!(
            turn.calls.len(),
            1,
            "streamed call kept when the output is empty"
        );
        // Cut short, the output may leave out a call still streaming, never one that was done.
        let left_out = r#"{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"id":"m","type":"message"}]}"#;
        let turn = decode(
            Provider::OpenAiResponses,
            stream([0, 1, 2, 3], "response.incomplete", left_out).as_bytes(),
        );
        assert_eq!(turn.ending.status, TurnStatus::Truncated);
        let done = ev(
            "response.output_item.done",
            3,
            r#","output_index":0,"item":{"id":"fc1","type":"function_call","status":"completed","arguments":"{}","call_id":"call1","name":"w"}"#,
        );
        let mut body = stream([0, 1, 2, 4], "response.incomplete", left_out);
        let at = body.find("event: response.incomplete").unwrap();
        body.insert_str(at, &done);
        let turn = decode(Provider::OpenAiResponses, body.as_bytes());
        assert_eq!(
            turn.ending.status,
            TurnStatus::Malformed,
            "{:?}",
            turn.ending
        );
        let failed =
            r#"{"status":"failed","error":{"code":"server_error","message":"x"},"output":[]}"#;
        let turn = decode(
            Provider::OpenAiResponses,
            stream([0, 1, 2, 3], "response.failed", failed).as_bytes(),
        );
        assert_eq!(turn.ending.status, TurnStatus::Errored);
    }
}
