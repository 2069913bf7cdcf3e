//! Table-driven tests over every recorded and constructed stream.

mod common;

use std::collections::BTreeSet;

use common::streams::{all_fixtures, decode_chunked, decode_whole, read_fixture};
use serde_json::json;
use turngate::providers::{DecoderOptions, TurnDecoder, decode, decode_with};
use turngate::turn::{Provider, Turn, TurnStatus};

use Provider::{Anthropic, Gemini, OpenAiChat, OpenAiResponses};
use TurnStatus::{Completed, Errored, Filtered, Incomplete, Malformed, Refused, Truncated};

/// Decodes a fixture whole, then in every chunk size 1..=7 (1 is byte by byte) and in uneven chunkings, and
/// checks every decoding gives the identical turn and echoes exactly `turn.text`.
fn check(file: &str, provider: Provider) -> Turn {
    check_with(file, provider, DecoderOptions::default())
}

fn check_with(file: &str, provider: Provider, options: DecoderOptions) -> Turn {
    let body = read_fixture(file);
    let (whole, echoed) = decode_chunked(provider, options, &body, &[usize::MAX]);
    assert_eq!(
        echoed, whole.text,
        "{file}: echoed text differs from turn.text"
    );
    let chunkings: Vec<Vec<usize>> = (1..=7)
        .map(|n| vec![n])
        .chain([vec![3, 1, 4, 1, 5, 9, 2, 6], vec![64, 1], vec![1000, 7]])
        .collect();
    for sizes in chunkings {
        let (turn, echoed) = decode_chunked(provider, options, &body, &sizes);
        assert_eq!(
            turn, whole,
            "{file}: chunk sizes {sizes:?} give a different turn"
        );
        assert_eq!(
            echoed, whole.text,
            "{file}: chunk sizes {sizes:?} echo different text"
        );
    }
    whole
}

type Call = (Option<&'static str>, &'static str, &'static str);

struct Case {
    file: &'static str,
    provider: Provider,
    forced: bool,
    status: TurnStatus,
    stop: Option<&'static str>,
    calls: &'static [Call],
}

const fn case(
    file: &'static str,
    provider: Provider,
    status: TurnStatus,
    stop: Option<&'static str>,
    calls: &'static [Call],
) -> Case {
    Case {
        file,
        provider,
        forced: false,
        status,
        stop,
        calls,
    }
}

const fn forced(mut c: Case) -> Case {
    c.forced = true;
    c
}

const W1: Call = (
    Some("toolu_CONSTRUCTED_w1"),
    "write_file",
    r#"{"path":"notes.txt","content":"hello"}"#,
);
const C1: Call = (
    Some("call_CONSTRUCTED_1"),
    "write_file",
    r#"{"path":"notes.txt","content":"hi"}"#,
);
const R1: Call = (
    Some("call_CONSTRUCTED_r1"),
    "write_file",
    r#"{"path":"notes.txt","content":"hi"}"#,
);
const ADD12: Call = (None, "add", r#"{"a":1,"b":2}"#);
const MISTRAL_WRITE: Call = (
    Some("CONSTRUCT1"),
    "write_file",
    r#"{"path": "notes.txt", "content": "hi"}"#,
);
/// The calls of `openai_responses_client_items.sse`: every item the client must answer, in output order
/// (the hosted items before them are not calls), then a function call.
const CLIENT_ITEMS: &[Call] = &[
    (
        Some("call_CONSTRUCTED_ls"),
        "local_shell_call",
        r#"{"command":["ls","-la"],"env":{},"timeout_ms":null,"type":"exec","user":null,"working_directory":null}"#,
    ),
    (
        Some("call_CONSTRUCTED_sh"),
        "shell_call",
        r#"{"commands":["cat notes.txt"],"max_output_length":null,"timeout_ms":null}"#,
    ),
    (
        Some("call_CONSTRUCTED_ap"),
        "apply_patch_call",
        r#"{"diff":"@@\n-Original notes\n+Patched notes\n","path":"notes.txt","type":"update_file"}"#,
    ),
    (Some("call_CONSTRUCTED_ct"), "run_sql", "SELECT 1"),
    (
        Some("call_CONSTRUCTED_ts"),
        "tool_search_call",
        r#"{"paths":["crm"]}"#,
    ),
    (
        Some("call_CONSTRUCTED_cu"),
        "computer_call",
        r#"{"type":"screenshot"}"#,
    ),
    (
        Some("mcpr_CONSTRUCTED"),
        "ask_question",
        r#"{"repoName":"octo/repo","question":"What is it?"}"#,
    ),
    R1,
];

const CASES: &[Case] = &[
    // ---- recorded / SDK fixtures / constructed by the research (streams/README.md) ----
    case(
        "anthropic_tool_use_complete.sse",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[(
            Some("toolu_01N2eM4V43kGCDkq2Lw7ChWQ"),
            "weather",
            r#"{"location": "Florence,Italy"}"#,
        )],
    ),
    case(
        "anthropic_parallel_tool_use_complete.sse",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[
            (
                Some("toolu_01UYxUYC2zRPY8wiutnF48eP"),
                "add",
                r#"{"a": 2, "b": 3}"#,
            ),
            (
                Some("toolu_01VaRx1jpWCvPhi7L4kywAcd"),
                "multiply",
                r#"{"a": 2, "b": 3}"#,
            ),
        ],
    ),
    case(
        "anthropic_tool_use_empty_input.sse",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[(
            Some("toolu_01QE1WLsSVp5hy5Q3GmGTmjP"),
            "updateIssueList",
            "{}",
        )],
    ),
    // message_stop is the last line without a blank line: never dispatched.
    case(
        "anthropic_max_tokens_mid_tool_input.sse",
        Anthropic,
        Incomplete,
        Some("max_tokens"),
        &[(
            Some("toolu_01EKqbqmZrGRXy18eN7m9kvY"),
            "make_file",
            "{\"filename\": \"taxes.txt\", \"lines_of_text\": [\n\"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s\",\n\"\",\n\"## INTRODUCTION\",\n\"\",\n\"Filing taxes",
        )],
    ),
    case(
        "anthropic_refusal.sse",
        Anthropic,
        Incomplete,
        Some("refusal"),
        &[],
    ),
    case(
        "anthropic_refusal_after_server_tool_use.sse",
        Anthropic,
        Refused,
        Some("refusal"),
        &[],
    ),
    case(
        "anthropic_error_mid_stream.sse",
        Anthropic,
        Errored,
        None,
        &[(
            Some("toolu_CONSTRUCTED_01"),
            "weather",
            r#"{"location": "Florence"}"#,
        )],
    ),
    case(
        "openai_chat_tool_call_complete.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[(
            Some("call_7kE4IjtnwXcGbX6hDM7xFu8T"),
            "weather",
            r#"{"location":"Florence, Italy"}"#,
        )],
    ),
    case(
        "openai_chat_tool_call_complete_sdk_fixture.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[(
            Some("call_c91SqDXlYFuETYv8mUHzz6pp"),
            "GetWeatherArgs",
            r#"{"city":"Edinburgh","country":"UK","units":"c"}"#,
        )],
    ),
    case(
        "openai_chat_parallel_tool_calls.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[
            (
                Some("call_JMW1whyEaYG438VE1OIflxA2"),
                "GetWeatherArgs",
                r#"{"city": "Edinburgh", "country": "GB", "units": "c"}"#,
            ),
            (
                Some("call_DNYTawLBoN8fj3KN6qU9N1Ou"),
                "get_stock_price",
                r#"{"ticker": "AAPL", "exchange": "NASDAQ"}"#,
            ),
        ],
    ),
    case(
        "openai_chat_length_truncated_content.sse",
        OpenAiChat,
        Truncated,
        Some("length"),
        &[],
    ),
    case(
        "openai_chat_length_mid_tool_args.sse",
        OpenAiChat,
        Truncated,
        Some("length"),
        &[(
            Some("call_CONSTRUCTED01"),
            "write_file",
            r#"{"path":"notes.txt","content":"Line one of"#,
        )],
    ),
    case(
        "openai_chat_refusal.sse",
        OpenAiChat,
        Refused,
        Some("stop"),
        &[],
    ),
    case(
        "openai_chat_content_filter.sse",
        OpenAiChat,
        Filtered,
        Some("content_filter"),
        &[],
    ),
    case(
        "openai_chat_error_mid_stream.sse",
        OpenAiChat,
        Errored,
        None,
        &[(
            Some("call_CONSTRUCTED03"),
            "weather",
            r#"{"location":"Florence"}"#,
        )],
    ),
    case(
        "openai_responses_function_call_complete.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[(
            Some("call_PRiJm2RVAvt7IoRvjxIXxFVF"),
            "weather",
            r#"{"location":"Florence, Italy"}"#,
        )],
    ),
    case(
        "openai_responses_parallel_function_calls.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[
            (
                Some("call_NnEvpiwdL8XrZ6F3T9VJyVw7"),
                "add",
                r#"{"a":2,"b":3}"#,
            ),
            (
                Some("call_TQ8336oa6YnuT2leYzRDBBLz"),
                "multiply",
                r#"{"a":2,"b":3}"#,
            ),
        ],
    ),
    case(
        "openai_responses_incomplete_mid_function_call.sse",
        OpenAiResponses,
        Truncated,
        Some("max_output_tokens"),
        &[(
            Some("call_CONSTRUCTED01"),
            "write_file",
            r#"{"path":"notes.txt","content":"Line one of"#,
        )],
    ),
    case(
        "openai_responses_refusal.sse",
        OpenAiResponses,
        Refused,
        Some("completed"),
        &[],
    ),
    case(
        "openai_responses_error.sse",
        OpenAiResponses,
        Errored,
        Some("failed"),
        &[],
    ),
    case(
        "gemini_function_call_complete.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[(None, "weather", r#"{"location": "Florence,Italy"}"#)],
    ),
    case(
        "gemini_parallel_function_calls.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[
            (None, "add", r#"{"b": 3,"a": 2}"#),
            (None, "multiply", r#"{"a": 2,"b": 3}"#),
        ],
    ),
    case(
        "vertex_streamed_function_call_args.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[
            (None, "getWeather", r#"{"location":"Boston"}"#),
            (None, "getWeather", r#"{"location":"San Francisco"}"#),
        ],
    ),
    case(
        "gemini_max_tokens.sse",
        Gemini,
        Truncated,
        Some("MAX_TOKENS"),
        &[(None, "add", r#"{"a":2,"b":3}"#)],
    ),
    case(
        "gemini_max_tokens_mid_function_call_vertex.sse",
        Gemini,
        Truncated,
        Some("MAX_TOKENS"),
        &[(
            None,
            "write_file",
            r#"{"path":"notes.txt","content":"Line one of"}"#,
        )],
    ),
    case("gemini_safety.sse", Gemini, Filtered, Some("SAFETY"), &[]),
    case(
        "gemini_prompt_blocked.sse",
        Gemini,
        Filtered,
        Some("SAFETY"),
        &[],
    ),
    case(
        "gemini_malformed_function_call.sse",
        Gemini,
        Malformed,
        Some("MALFORMED_FUNCTION_CALL"),
        &[],
    ),
    case(
        "gemini_error_mid_stream.sse",
        Gemini,
        Errored,
        None,
        &[(None, "add", r#"{"a":2,"b":3}"#)],
    ),
    // ---- constructed here ----
    case(
        "constructed/anthropic_crlf.sse",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_cr.sse",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_delta_unknown_index.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_stop_unknown_index.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_duplicate_block_start.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_event_name_mismatch.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_tool_use_never_stopped.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_event_after_message_stop.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_unparseable_json.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[(
            Some("toolu_CONSTRUCTED_w1"),
            "write_file",
            r#""notes.txt","content":"x"}"#,
        )],
    ),
    case(
        "constructed/anthropic_stray_line.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_delta_after_block_stop.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_max_tokens_json_parses.sse",
        Anthropic,
        Truncated,
        Some("max_tokens"),
        &[(
            Some("toolu_CONSTRUCTED_mt"),
            "write_file",
            r#"{"path":"notes.txt","content":"Fil"}"#,
        )],
    ),
    case(
        "constructed/anthropic_context_window_exceeded.sse",
        Anthropic,
        Truncated,
        Some("model_context_window_exceeded"),
        &[(
            Some("toolu_CONSTRUCTED_cw"),
            "write_file",
            r#"{"path":"a.txt","content":"x"}"#,
        )],
    ),
    case(
        "constructed/anthropic_unterminated_message_stop.sse",
        Anthropic,
        Incomplete,
        Some("tool_use"),
        &[W1],
    ),
    case(
        "constructed/anthropic_pause_turn.sse",
        Anthropic,
        Incomplete,
        Some("pause_turn"),
        &[],
    ),
    case(
        "constructed/anthropic_unknown_stop_reason.sse",
        Anthropic,
        Incomplete,
        Some("something_new"),
        &[W1],
    ),
    case(
        "constructed/anthropic_end_turn_text.sse",
        Anthropic,
        Completed,
        Some("end_turn"),
        &[],
    ),
    case(
        "constructed/anthropic_end_turn_with_tool_use.sse",
        Anthropic,
        Malformed,
        Some("end_turn"),
        &[W1],
    ),
    case(
        "constructed/anthropic_tool_use_without_tool_block.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[],
    ),
    case(
        "constructed/anthropic_thinking_signature.sse",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[
            (
                Some("toolu_CONSTRUCTED_th"),
                "write_file",
                r#"{"path":"notes.txt","content":"hi"}"#,
            ),
            (Some("toolu_CONSTRUCTED_na"), "list_files", "{}"),
        ],
    ),
    case(
        "constructed/openai_chat_missing_id.sse",
        OpenAiChat,
        Malformed,
        Some("tool_calls"),
        &[(None, "write_file", r#"{"path":"notes.txt","content":"hi"}"#)],
    ),
    case(
        "constructed/openai_chat_missing_name.sse",
        OpenAiChat,
        Malformed,
        Some("tool_calls"),
        &[(Some("call_CONSTRUCTED_nn"), "", "{}")],
    ),
    case(
        "constructed/openai_chat_id_changed.sse",
        OpenAiChat,
        Malformed,
        Some("tool_calls"),
        &[C1],
    ),
    case(
        "constructed/openai_chat_forced_tool_stop.sse",
        OpenAiChat,
        Malformed,
        Some("stop"),
        &[C1],
    ),
    forced(case(
        "constructed/openai_chat_forced_tool_stop.sse",
        OpenAiChat,
        Completed,
        Some("stop"),
        &[C1],
    )),
    case(
        "constructed/openai_chat_tool_calls_stop_refusal.sse",
        OpenAiChat,
        Refused,
        Some("stop"),
        &[C1],
    ),
    forced(case(
        "constructed/openai_chat_tool_calls_stop_refusal.sse",
        OpenAiChat,
        Refused,
        Some("stop"),
        &[C1],
    )),
    case(
        "constructed/openai_chat_missing_done.sse",
        OpenAiChat,
        Incomplete,
        Some("tool_calls"),
        &[C1],
    ),
    case(
        "constructed/openai_chat_deprecated_function_call.sse",
        OpenAiChat,
        Incomplete,
        Some("function_call"),
        &[],
    ),
    case(
        "constructed/openai_chat_unknown_finish_reason.sse",
        OpenAiChat,
        Incomplete,
        Some("tool_use"),
        &[C1],
    ),
    case(
        "constructed/openai_chat_tool_calls_without_calls.sse",
        OpenAiChat,
        Malformed,
        Some("tool_calls"),
        &[],
    ),
    case(
        "constructed/openai_chat_data_after_done.sse",
        OpenAiChat,
        Malformed,
        Some("tool_calls"),
        &[C1],
    ),
    case(
        "constructed/openai_chat_done_unterminated.sse",
        OpenAiChat,
        Incomplete,
        Some("tool_calls"),
        &[C1],
    ),
    case(
        "constructed/openai_chat_text_stop_cr.sse",
        OpenAiChat,
        Completed,
        Some("stop"),
        &[],
    ),
    case(
        "constructed/openai_chat_parallel_crlf.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[
            C1,
            (
                Some("call_CONSTRUCTED_2"),
                "read_file",
                r#"{"path":"a.txt"}"#,
            ),
        ],
    ),
    case(
        "constructed/openai_responses_sequence_decrease.sse",
        OpenAiResponses,
        Malformed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_responses_event_type_mismatch.sse",
        OpenAiResponses,
        Malformed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_responses_content_filter.sse",
        OpenAiResponses,
        Filtered,
        Some("content_filter"),
        &[],
    ),
    case(
        "constructed/openai_responses_no_terminal.sse",
        OpenAiResponses,
        Incomplete,
        None,
        &[R1],
    ),
    case(
        "constructed/openai_responses_completed_unterminated.sse",
        OpenAiResponses,
        Incomplete,
        None,
        &[R1],
    ),
    case(
        "constructed/openai_responses_error_flat.sse",
        OpenAiResponses,
        Errored,
        None,
        &[R1],
    ),
    case(
        "constructed/openai_responses_args_mismatch.sse",
        OpenAiResponses,
        Malformed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_responses_reasoning_text_call.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_responses_flat_no_event_names.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/gemini_with_ids.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[
            (
                Some("CONSTRUCTED_gid_1"),
                "write_file",
                r#"{"path":"a.txt","content":"x"}"#,
            ),
            (
                Some("CONSTRUCTED_gid_2"),
                "read_file",
                r#"{"path":"b.txt"}"#,
            ),
        ],
    ),
    case(
        "constructed/gemini_stray_lines_not_error.sse",
        Gemini,
        Malformed,
        None,
        &[ADD12],
    ),
    case(
        "constructed/gemini_error_chunk.sse",
        Gemini,
        Errored,
        None,
        &[ADD12],
    ),
    case(
        "constructed/gemini_no_finish_reason.sse",
        Gemini,
        Incomplete,
        None,
        &[ADD12],
    ),
    case(
        "constructed/gemini_vertex_open_at_stop.sse",
        Gemini,
        Incomplete,
        Some("STOP"),
        &[(None, "write_file", r#"{"path":"notes.txt"}"#)],
    ),
    case(
        "constructed/gemini_thought_signature.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[(None, "write_file", r#"{"path":"notes.txt","content":"hi"}"#)],
    ),
    case(
        "constructed/gemini_duplicate_keys_args.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[(
            None,
            "write_file",
            r#"{"path":"a.txt","path":"../escape.txt", "content" : "x"}"#,
        )],
    ),
    case(
        "constructed/gemini_unexpected_tool_call.sse",
        Gemini,
        Malformed,
        Some("UNEXPECTED_TOOL_CALL"),
        &[],
    ),
    case(
        "constructed/gemini_recitation.sse",
        Gemini,
        Filtered,
        Some("RECITATION"),
        &[],
    ),
    case(
        "constructed/gemini_other.sse",
        Gemini,
        Incomplete,
        Some("OTHER"),
        &[ADD12],
    ),
    case(
        "constructed/gemini_vertex_nested_args.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[(
            None,
            "writeItems",
            r#"{"operations":[{"action":"add","price":0.5,"ok":true},{"action":"remove","note":null}],"dryRun":false}"#,
        )],
    ),
    case(
        "constructed/gemini_unterminated_last_event.sse",
        Gemini,
        Incomplete,
        None,
        &[],
    ),
    case(
        "constructed/gemini_lf_only.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[ADD12],
    ),
    // ---- real provider turns (issue 8): shapes from the providers' documentation, see constructed/README.md ----
    case(
        "constructed/anthropic_message_start_content.sse",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[(
            Some("toolu_CONSTRUCTED_pt"),
            "write_file",
            r#"{"content":"hello","path":"notes.txt"}"#,
        )],
    ),
    case(
        "constructed/anthropic_duplicate_tool_use_id.sse",
        Anthropic,
        Malformed,
        Some("tool_use"),
        &[
            W1,
            (
                Some("toolu_CONSTRUCTED_w1"),
                "write_file",
                r#"{"path":"b.txt","content":"x"}"#,
            ),
        ],
    ),
    case(
        "constructed/openai_responses_program_function_call.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[(
            Some("call_CONSTRUCTED_p"),
            "write_file",
            r#"{"path":"notes.txt","content":"hi"}"#,
        )],
    ),
    case(
        "constructed/openai_responses_program_call_args_open.sse",
        OpenAiResponses,
        Malformed,
        Some("completed"),
        &[(
            Some("call_CONSTRUCTED_p"),
            "write_file",
            r#"{"path":"notes.txt","content":"hi"}"#,
        )],
    ),
    case(
        "constructed/openai_responses_client_items.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        CLIENT_ITEMS,
    ),
    case(
        "constructed/openai_responses_incomplete_item_left_out.sse",
        OpenAiResponses,
        Truncated,
        Some("max_output_tokens"),
        &[(
            Some("call_CONSTRUCTED_r1"),
            "write_file",
            r#"{"path":"notes.txt","content":"Fil"}"#,
        )],
    ),
    case(
        "constructed/openai_responses_item_id_per_event.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_responses_item_id_contradiction.sse",
        OpenAiResponses,
        Malformed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_responses_duplicate_call_id.sse",
        OpenAiResponses,
        Malformed,
        Some("completed"),
        &[
            R1,
            (
                Some("call_CONSTRUCTED_r1"),
                "write_file",
                r#"{"path":"b.txt","content":"x"}"#,
            ),
        ],
    ),
    case(
        "constructed/openai_chat_mistral_whole_calls.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[
            MISTRAL_WRITE,
            (Some("CONSTRUCT2"), "read_file", r#"{"path": "a.txt"}"#),
        ],
    ),
    case(
        "constructed/openai_chat_magistral_thinking_chunks.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[MISTRAL_WRITE],
    ),
    case(
        "constructed/openai_chat_deepseek_reasoning_content.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[C1],
    ),
    case(
        "constructed/openai_chat_xai_reasoning_content.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[C1],
    ),
    case(
        "constructed/openai_chat_duplicate_call_id.sse",
        OpenAiChat,
        Malformed,
        Some("tool_calls"),
        &[
            C1,
            (
                Some("call_CONSTRUCTED_1"),
                "read_file",
                r#"{"path":"a.txt"}"#,
            ),
        ],
    ),
    case(
        "constructed/gemini_duplicate_ids.sse",
        Gemini,
        Malformed,
        Some("STOP"),
        &[
            (
                Some("CONSTRUCTED_gid_1"),
                "write_file",
                r#"{"path":"a.txt","content":"x"}"#,
            ),
            (
                Some("CONSTRUCTED_gid_1"),
                "read_file",
                r#"{"path":"b.txt"}"#,
            ),
        ],
    ),
    // ---- whole JSON bodies (non-streamed answers), and the streamed twins they must equal ----
    case(
        "constructed/anthropic_whole_tool_use.json",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[A_WHOLE],
    ),
    case(
        "constructed/anthropic_whole_tool_use_streamed.sse",
        Anthropic,
        Completed,
        Some("tool_use"),
        &[A_WHOLE],
    ),
    case(
        "constructed/anthropic_whole_max_tokens.json",
        Anthropic,
        Truncated,
        Some("max_tokens"),
        &[(
            Some("toolu_CONSTRUCTED_whole"),
            "write_file",
            r#"{"content":"Fil","path":"notes.txt"}"#,
        )],
    ),
    case(
        "constructed/anthropic_whole_refusal.json",
        Anthropic,
        Refused,
        Some("refusal"),
        &[],
    ),
    case(
        "constructed/anthropic_whole_duplicate_key.json",
        Anthropic,
        Malformed,
        None,
        &[],
    ),
    case(
        "constructed/anthropic_whole_trailing_data.json",
        Anthropic,
        Malformed,
        None,
        &[],
    ),
    case(
        "constructed/openai_chat_whole_tool_calls.json",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[C_WHOLE],
    ),
    case(
        "constructed/openai_chat_whole_tool_calls_streamed.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[C_WHOLE],
    ),
    case(
        "constructed/openai_chat_whole_length.json",
        OpenAiChat,
        Truncated,
        Some("length"),
        &[C_WHOLE_CUT],
    ),
    case(
        "constructed/openai_chat_whole_refusal.json",
        OpenAiChat,
        Refused,
        Some("stop"),
        &[],
    ),
    case(
        "constructed/openai_chat_whole_bad_arguments.json",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[C_WHOLE_CUT],
    ),
    case(
        "constructed/openai_responses_whole_function_call.json",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[R_WHOLE],
    ),
    case(
        "constructed/openai_responses_whole_function_call_streamed.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[R_WHOLE],
    ),
    case(
        "constructed/openai_responses_whole_incomplete.json",
        OpenAiResponses,
        Truncated,
        Some("max_output_tokens"),
        &[(
            Some("call_CONSTRUCTED_rw"),
            "write_file",
            r#"{"path":"notes.txt","content":"Fil"#,
        )],
    ),
    case(
        "constructed/openai_responses_whole_refusal.json",
        OpenAiResponses,
        Refused,
        Some("completed"),
        &[],
    ),
    case(
        "constructed/gemini_whole_generate_content.json",
        Gemini,
        Completed,
        Some("STOP"),
        &[G_WHOLE],
    ),
    case(
        "constructed/gemini_whole_generate_content_streamed.sse",
        Gemini,
        Completed,
        Some("STOP"),
        &[G_WHOLE],
    ),
    case(
        "constructed/gemini_whole_stream_array.json",
        Gemini,
        Completed,
        Some("STOP"),
        &[G_WHOLE],
    ),
    case(
        "constructed/gemini_whole_max_tokens.json",
        Gemini,
        Truncated,
        Some("MAX_TOKENS"),
        &[(
            None,
            "write_file",
            r#"{"path":"notes.txt","content":"Fil"}"#,
        )],
    ),
    case(
        "constructed/gemini_whole_safety.json",
        Gemini,
        Filtered,
        Some("SAFETY"),
        &[],
    ),
    case(
        "constructed/gemini_whole_prompt_blocked.json",
        Gemini,
        Filtered,
        Some("SAFETY"),
        &[],
    ),
    case(
        "constructed/gemini_whole_array_trailing_comma.json",
        Gemini,
        Malformed,
        None,
        &[],
    ),
    // ---- gateways as they really stream; xAI's server-run search items ----
    case(
        "constructed/openai_responses_openrouter_done.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_responses_event_after_done.sse",
        OpenAiResponses,
        Malformed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_responses_done_twice.sse",
        OpenAiResponses,
        Malformed,
        Some("completed"),
        &[R1],
    ),
    case(
        "constructed/openai_chat_openrouter_reasoning_details.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[(
            Some("toolu_CONSTRUCTED_or"),
            "write_file",
            r#"{"path":"notes.txt","content":"hi"}"#,
        )],
    ),
    case(
        "constructed/openai_responses_xai_search.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[],
    ),
    case(
        "constructed/openai_responses_xai_search_and_client_custom_tool.sse",
        OpenAiResponses,
        Completed,
        Some("completed"),
        &[(Some("call_CONSTRUCTED_ctc"), "lookup", "notes.txt")],
    ),
    // ---- cut at the output limit but reported as finished (decoded without a limit here) ----
    case(
        "constructed/openai_chat_vllm_tool_calls_at_limit.sse",
        OpenAiChat,
        Completed,
        Some("tool_calls"),
        &[(
            Some("chatcmpl-tool-CONSTRUCTED"),
            "write_file",
            r#"{"path": "notes.txt", "content": "Fil"}"#,
        )],
    ),
];

const A_WHOLE: Call = (
    Some("toolu_CONSTRUCTED_whole"),
    "write_file",
    r#"{"content":"hello","path":"notes.txt"}"#,
);
const C_WHOLE: Call = (
    Some("call_CONSTRUCTED_whole"),
    "write_file",
    r#"{"path":"notes.txt","content":"hello"}"#,
);
const C_WHOLE_CUT: Call = (
    Some("call_CONSTRUCTED_whole"),
    "write_file",
    r#"{"path":"notes.txt","content":"Fil"#,
);
const R_WHOLE: Call = (
    Some("call_CONSTRUCTED_rw"),
    "write_file",
    r#"{"path":"notes.txt","content":"hello"}"#,
);
const G_WHOLE: Call = (
    Some("CONSTRUCTED_gw"),
    "write_file",
    r#"{"path":"notes.txt","content":"hello"}"#,
);

/// A whole JSON body decodes to the same turn as the same answer streamed: assistant content (thinking
/// and signatures, reasoning, every item), calls, ending and text.
#[test]
fn a_whole_json_body_is_the_same_turn_as_its_stream() {
    for (whole, streamed, provider) in [
        (
            "constructed/anthropic_whole_tool_use.json",
            "constructed/anthropic_whole_tool_use_streamed.sse",
            Anthropic,
        ),
        (
            "constructed/openai_chat_whole_tool_calls.json",
            "constructed/openai_chat_whole_tool_calls_streamed.sse",
            OpenAiChat,
        ),
        (
            "constructed/openai_responses_whole_function_call.json",
            "constructed/openai_responses_whole_function_call_streamed.sse",
            OpenAiResponses,
        ),
        (
            "constructed/gemini_whole_generate_content.json",
            "constructed/gemini_whole_generate_content_streamed.sse",
            Gemini,
        ),
    ] {
        let a = check(whole, provider);
        let b = check(streamed, provider);
        assert_eq!(a.ending.status, Completed, "{whole}: {}", a.ending.detail);
        assert_eq!(a.assistant, b.assistant, "{whole}");
        assert_eq!(a.calls, b.calls, "{whole}");
        assert_eq!(a.ending, b.ending, "{whole}");
        assert!(!a.text.is_empty(), "{whole}");
        assert_eq!(a.text, b.text, "{whole}");
    }
    // Gemini's streamGenerateContent without alt=sse: a pretty-printed JSON array of the same chunks.
    let array = check("constructed/gemini_whole_stream_array.json", Gemini);
    assert_eq!(array.text, "Writing the file.");
    assert_eq!(
        array.assistant["parts"][2]["thoughtSignature"],
        "CONSTRUCTED_gsig=="
    );
}

/// Whitespace before a whole body is allowed, and a body that starts like JSON but is not one strict value
/// is malformed, whatever the provider.
#[test]
fn a_whole_body_is_told_apart_by_its_first_byte_and_parsed_strictly() {
    let body = read_fixture("constructed/anthropic_whole_tool_use.json");
    let mut spaced = b" \r\n\t".to_vec();
    spaced.extend_from_slice(&body);
    assert_eq!(decode(Anthropic, &spaced), decode(Anthropic, &body));
    for provider in Provider::ALL {
        for bad in [
            &b"{"[..],
            b"[1,",
            b"{\"a\":1}x",
            b"{\"a\":1,\"a\":2}",
            b"[] []",
            b"\n{\xff}",
        ] {
            let turn = decode(provider, bad);
            assert_eq!(turn.ending.status, Malformed, "{provider} {bad:?}");
        }
    }
    let turn = decode(Anthropic, &body[..body.len() - 1]);
    assert_eq!(turn.ending.status, Malformed);
    assert!(
        turn.ending.detail.contains("strict JSON"),
        "{}",
        turn.ending.detail
    );
    // The byte budget holds for a whole body as for a stream.
    let budget = |max_turn_bytes| DecoderOptions {
        max_turn_bytes,
        ..DecoderOptions::default()
    };
    let turn = check_bytes_with(Anthropic, budget(body.len() - 1), &body);
    assert_eq!(turn.ending.status, Malformed);
    assert!(
        turn.ending.detail.contains("byte limit"),
        "{}",
        turn.ending.detail
    );
    assert_eq!(
        check_bytes_with(Anthropic, budget(body.len()), &body)
            .ending
            .status,
        Completed
    );
}

#[test]
fn every_fixture_has_the_expected_turn() {
    let mut failures = Vec::new();
    for c in CASES {
        let options = DecoderOptions {
            forced_tool_choice: c.forced,
            ..DecoderOptions::default()
        };
        let turn = check_with(c.file, c.provider, options);
        let calls: Vec<(Option<&str>, &str, &str)> = turn
            .calls
            .iter()
            .map(|k| (k.id.as_deref(), k.name.as_str(), k.raw_input.as_str()))
            .collect();
        if turn.ending.status != c.status
            || turn.ending.stop_reason.as_deref() != c.stop
            || calls != c.calls
            || turn.provider != c.provider
        {
            failures.push(format!(
                "{} (forced={}): expected {:?} {:?} {:?}\n   got {:?} {:?} {:?} ({})",
                c.file,
                c.forced,
                c.status,
                c.stop,
                c.calls,
                turn.ending.status,
                turn.ending.stop_reason,
                calls,
                turn.ending.detail
            ));
        }
        // Whatever the ending, a call's index points at its entry in `assistant`.
        for call in &turn.calls {
            let entry = match c.provider {
                Anthropic => &turn.assistant["content"][call.index],
                OpenAiChat => &turn.assistant["tool_calls"][call.index],
                OpenAiResponses => &turn.assistant[call.index],
                Gemini => &turn.assistant["parts"][call.index],
            };
            assert!(
                !entry.is_null(),
                "{}: call index {} not in assistant",
                c.file,
                call.index
            );
        }
        assert!(!turn.ending.detail.is_empty(), "{}: empty detail", c.file);
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_fixture_file_is_in_the_table() {
    let listed: BTreeSet<&str> = CASES.iter().map(|c| c.file).collect();
    let missing: Vec<String> = all_fixtures()
        .into_iter()
        .map(|(f, _)| f)
        .filter(|f| !listed.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "fixtures without an expected verdict: {missing:?}"
    );
    for c in CASES {
        assert_eq!(
            common::streams::provider_of(c.file.rsplit('/').next().unwrap()),
            c.provider,
            "{}",
            c.file
        );
    }
}

#[test]
fn recorded_verdicts_match_the_readme() {
    // streams/README.md: EXECUTE n calls, or REJECT.
    let execute: &[(&str, usize)] = &[
        ("anthropic_tool_use_complete.sse", 1),
        ("anthropic_parallel_tool_use_complete.sse", 2),
        ("anthropic_tool_use_empty_input.sse", 1),
        ("openai_chat_tool_call_complete.sse", 1),
        ("openai_chat_tool_call_complete_sdk_fixture.sse", 1),
        ("openai_chat_parallel_tool_calls.sse", 2),
        ("openai_responses_function_call_complete.sse", 1),
        ("openai_responses_parallel_function_calls.sse", 2),
        ("gemini_function_call_complete.sse", 1),
        ("gemini_parallel_function_calls.sse", 2),
        ("vertex_streamed_function_call_args.sse", 2),
    ];
    for (file, provider) in all_fixtures() {
        if file.starts_with("constructed/") {
            continue;
        }
        let turn = decode(provider, &read_fixture(&file));
        match execute.iter().find(|(f, _)| *f == file) {
            Some((_, n)) => {
                assert!(turn.is_completed(), "{file}: {:?}", turn.ending);
                assert_eq!(turn.calls.len(), *n, "{file}");
            }
            None => assert!(
                !turn.is_completed(),
                "{file} must be rejected: {:?}",
                turn.ending
            ),
        }
    }
}

#[test]
fn line_endings_do_not_change_the_turn() {
    let crlf = check("constructed/anthropic_crlf.sse", Anthropic);
    let cr = check("constructed/anthropic_cr.sse", Anthropic);
    assert_eq!(crlf, cr);
    let lf = String::from_utf8(read_fixture("constructed/anthropic_cr.sse"))
        .unwrap()
        .replace('\r', "\n");
    assert_eq!(decode(Anthropic, lf.as_bytes()), cr);
    assert_eq!(cr.text, "Writing the file.");
}

#[test]
fn anthropic_thinking_signature_is_preserved() {
    let turn = check("constructed/anthropic_thinking_signature.sse", Anthropic);
    let content = &turn.assistant["content"];
    assert_eq!(
        content[0],
        json!({"type":"thinking","thinking":"The user wants a file.","signature":"EqQBCkgIARABGAIiQL2CONSTRUCTEDsignatureAAAA=="})
    );
    assert_eq!(
        content[1],
        json!({"type":"redacted_thinking","data":"CONSTRUCTED_redacted_blob"})
    );
    assert_eq!(content[2], json!({"type":"text","text":"On it."}));
    assert_eq!(
        content[3],
        json!({"type":"tool_use","id":"toolu_CONSTRUCTED_th","name":"write_file","input":{"path":"notes.txt","content":"hi"}})
    );
    assert_eq!(content[4]["input"], json!({}));
    assert_eq!(turn.assistant["role"], "assistant");
    assert_eq!(turn.text, "On it.");
    assert_eq!(turn.calls[0].index, 3);
}

#[test]
fn anthropic_history_keeps_every_block_as_sent() {
    let turn = check("anthropic_refusal_after_server_tool_use.sse", Anthropic);
    let content = turn.assistant["content"].as_array().unwrap();
    assert_eq!(content.len(), 3);
    assert_eq!(content[0]["type"], "server_tool_use");
    assert_eq!(
        content[0]["input"],
        json!({"query": "solar eclipse viewing safety news 2026"})
    );
    assert_eq!(content[1]["type"], "web_search_tool_result");
    assert_eq!(content[1]["content"].as_array().unwrap().len(), 2);
    assert!(turn.calls.is_empty(), "server tools are not client calls");
    let turn = check("anthropic_tool_use_complete.sse", Anthropic);
    assert_eq!(
        turn.assistant["content"][1]["caller"],
        json!({"type":"direct"})
    );
    assert_eq!(
        turn.text,
        "I'll get the weather information for Florence, Italy for you."
    );
}

#[test]
fn anthropic_cut_tool_input_goes_to_history_as_empty_object() {
    let turn = check("anthropic_max_tokens_mid_tool_input.sse", Anthropic);
    assert_eq!(turn.assistant["content"][1]["input"], json!({}));
    assert!(
        turn.ending.detail.contains("not a JSON object"),
        "{}",
        turn.ending.detail
    );
    assert!(
        turn.ending.detail.contains("message_stop"),
        "{}",
        turn.ending.detail
    );
}

#[test]
fn anthropic_error_detail_names_the_error_type() {
    let turn = check("anthropic_error_mid_stream.sse", Anthropic);
    assert!(
        turn.ending.detail.contains("overloaded_error"),
        "{}",
        turn.ending.detail
    );
    assert!(
        turn.ending.detail.contains("Overloaded"),
        "{}",
        turn.ending.detail
    );
}

#[test]
fn openai_chat_history_shape() {
    let turn = check("openai_chat_parallel_tool_calls.sse", OpenAiChat);
    assert_eq!(
        turn.assistant["tool_calls"][1],
        json!({"id":"call_DNYTawLBoN8fj3KN6qU9N1Ou","type":"function","function":{"name":"get_stock_price","arguments":"{\"ticker\": \"AAPL\", \"exchange\": \"NASDAQ\"}"}})
    );
    assert_eq!(turn.assistant["content"], json!(null));
    let turn = check("openai_chat_refusal.sse", OpenAiChat);
    assert_eq!(
        turn.assistant["refusal"],
        "I'm sorry, I can't assist with that request."
    );
    assert!(turn.assistant.get("tool_calls").is_none());
    let turn = check("constructed/openai_chat_text_stop_cr.sse", OpenAiChat);
    assert_eq!(
        turn.assistant,
        json!({"role":"assistant","content":"Hello, world."})
    );
    assert_eq!(turn.text, "Hello, world.");
}

#[test]
fn openai_chat_forced_choice_only_matters_for_stop_with_calls() {
    let forced = DecoderOptions {
        forced_tool_choice: true,
        ..DecoderOptions::default()
    };
    for (file, status) in [
        ("openai_chat_tool_call_complete.sse", Completed),
        ("openai_chat_refusal.sse", Refused),
        ("openai_chat_length_mid_tool_args.sse", Truncated),
        ("constructed/openai_chat_text_stop_cr.sse", Completed),
    ] {
        assert_eq!(
            check_with(file, OpenAiChat, forced).ending.status,
            status,
            "{file}"
        );
    }
    let turn = check("constructed/openai_chat_forced_tool_stop.sse", OpenAiChat);
    assert!(
        turn.ending.detail.contains("did not force"),
        "{}",
        turn.ending.detail
    );
    let mut turn = TurnDecoder::forced_tool_choice(OpenAiChat, true);
    turn.feed(&read_fixture(
        "constructed/openai_chat_forced_tool_stop.sse",
    ));
    assert_eq!(turn.finish().ending.status, Completed);
}

#[test]
fn responses_history_prefers_final_output_and_fills_the_name() {
    let turn = check(
        "constructed/openai_responses_reasoning_text_call.sse",
        OpenAiResponses,
    );
    let items = turn.assistant.as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["type"], "reasoning");
    assert_eq!(
        items[0]["encrypted_content"],
        "gAAAAB_CONSTRUCTED_encrypted_reasoning=="
    );
    assert_eq!(items[1]["content"][0]["text"], "Saving now.");
    assert_eq!(
        items[2]["name"], "write_file",
        "name taken from output_item.added"
    );
    assert_eq!(items[2]["call_id"], "call_CONSTRUCTED_r1");
    assert_eq!(turn.calls[0].index, 2);
    assert_eq!(turn.text, "Saving now.");
    // Without a terminal output, the streamed items are the history.
    let turn = check(
        "constructed/openai_responses_no_terminal.sse",
        OpenAiResponses,
    );
    assert_eq!(
        turn.assistant[0]["arguments"],
        r#"{"path":"notes.txt","content":"hi"}"#
    );
    let turn = check("openai_responses_error.sse", OpenAiResponses);
    assert!(
        turn.ending.detail.contains("insufficient_quota"),
        "{}",
        turn.ending.detail
    );
}

#[test]
fn gemini_history_keeps_parts_signatures_and_ids() {
    let turn = check("constructed/gemini_thought_signature.sse", Gemini);
    assert_eq!(
        turn.assistant,
        json!({"role":"model","parts":[
            {"text":"Let me think about the file.","thought":true},
            {"text":"I will "},
            {"text":"write it."},
            {"functionCall":{"name":"write_file","args":{"path":"notes.txt","content":"hi"}},"thoughtSignature":"CONSTRUCTED_sig_T"}
        ]})
    );
    assert_eq!(turn.text, "I will write it.");
    let turn = check("constructed/gemini_with_ids.sse", Gemini);
    assert_eq!(
        turn.assistant["parts"][1]["functionCall"]["id"],
        "CONSTRUCTED_gid_1"
    );
    assert_eq!(
        turn.assistant["parts"][1]["thoughtSignature"],
        "CONSTRUCTED_sig_1"
    );
    let turn = check("vertex_streamed_function_call_args.sse", Gemini);
    let parts = turn.assistant["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "one part per streamed call");
    assert_eq!(
        parts[0]["functionCall"],
        json!({"name":"getWeather","args":{"location":"Boston"}})
    );
    assert!(
        parts[0]["thoughtSignature"]
            .as_str()
            .unwrap()
            .starts_with("CiMBjz1rX25K")
    );
    let turn = check("gemini_error_mid_stream.sse", Gemini);
    assert!(
        turn.ending.detail.contains("UNAVAILABLE"),
        "{}",
        turn.ending.detail
    );
}

#[test]
fn text_deltas_never_carry_tool_input() {
    for (file, provider) in all_fixtures() {
        let body = read_fixture(&file);
        let mut decoder = TurnDecoder::new(provider);
        let mut deltas = Vec::new();
        for b in &body {
            deltas.extend(decoder.feed(std::slice::from_ref(b)));
        }
        let turn = decoder.finish();
        for delta in &deltas {
            for call in &turn.calls {
                if call.raw_input.len() > 2 {
                    assert!(
                        !delta.text.contains(&call.raw_input),
                        "{file}: tool input echoed"
                    );
                }
            }
        }
    }
}

#[test]
fn turn_byte_limit_is_malformed() {
    let body = read_fixture("anthropic_tool_use_complete.sse");
    let small = DecoderOptions {
        max_turn_bytes: body.len() - 1,
        ..DecoderOptions::default()
    };
    let turn = decode_with(Anthropic, small, &body);
    assert_eq!(turn.ending.status, Malformed);
    assert!(
        turn.ending.detail.contains("byte limit"),
        "{}",
        turn.ending.detail
    );
    assert_eq!(turn.calls.len(), 1, "calls seen are still reported");
    let (chunked, _) = decode_chunked(Anthropic, small, &body, &[5]);
    assert_eq!(chunked, turn);
    let exact = DecoderOptions {
        max_turn_bytes: body.len(),
        ..DecoderOptions::default()
    };
    assert_eq!(
        decode_with(Anthropic, exact, &body).ending.status,
        Completed
    );
}

#[test]
fn oversized_line_is_malformed_and_bounded() {
    let mut body = read_fixture("anthropic_tool_use_complete.sse");
    let insert_at = body.len()
        - "event: message_stop\ndata: {\"type\":\"message_stop\"             }\n\n".len();
    let mut huge = b"data: ".to_vec();
    huge.resize(turngate::sse::MAX_LINE_BYTES + 10, b'x');
    huge.extend_from_slice(b"\n\n");
    body.splice(insert_at..insert_at, huge);
    let turn = decode_whole(Anthropic, DecoderOptions::default(), &body);
    assert_eq!(turn.ending.status, Malformed, "{}", turn.ending.detail);
    assert!(
        turn.ending.detail.contains("exceeds"),
        "{}",
        turn.ending.detail
    );
}

#[test]
fn invalid_utf8_is_malformed() {
    let mut body = read_fixture("openai_chat_tool_call_complete.sse");
    let at = body.iter().position(|&b| b == b'F').unwrap();
    body[at] = 0xff;
    let turn = check_bytes(OpenAiChat, &body);
    assert_eq!(turn.ending.status, Malformed);
    assert!(
        turn.ending.detail.contains("UTF-8"),
        "{}",
        turn.ending.detail
    );
}

fn check_bytes(provider: Provider, body: &[u8]) -> Turn {
    let whole = decode_whole(provider, DecoderOptions::default(), body);
    for n in 1..=7 {
        assert_eq!(
            decode_chunked(provider, DecoderOptions::default(), body, &[n]).0,
            whole
        );
    }
    whole
}

#[test]
fn empty_and_garbage_bodies_are_never_completed() {
    for provider in Provider::ALL {
        for body in [
            &b""[..],
            b"\n\n\n",
            b"data: [DONE]\n\n",
            b": only a comment\n\n",
            b"hello",
        ] {
            let turn = check_bytes(provider, body);
            assert!(
                !turn.is_completed(),
                "{provider} {body:?}: {:?}",
                turn.ending
            );
        }
    }
}

#[test]
fn status_and_provider_strings() {
    let turn = decode(Gemini, &read_fixture("gemini_safety.sse"));
    let v = serde_json::to_value(&turn).unwrap();
    assert_eq!(v["provider"], "gemini");
    assert_eq!(v["ending"]["status"], "filtered");
    assert_eq!(v["ending"]["stop_reason"], "SAFETY");
}

#[test]
fn hostile_volume_keeps_detail_bounded_and_reports_every_call() {
    let mut body = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[]}}\n\n",
    );
    for i in 0..1000 {
        body.push_str(&format!(
            "event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{i},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"t{i}\",\"name\":\"n\",\"input\":{{}}}}}}\n\n\
             event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{i},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"[{i}]\"}}}}\n\n"
        ));
    }
    body.push_str(&format!("event: {}\ndata: {{}}\n\n", "x".repeat(100_000)));
    let turn = decode(Anthropic, body.as_bytes());
    assert_eq!(turn.ending.status, Malformed);
    assert_eq!(turn.calls.len(), 1000);
    assert_eq!(turn.calls[999].raw_input, "[999]");
    assert!(
        turn.ending.detail.len() <= 4096,
        "{}",
        turn.ending.detail.len()
    );
    assert!(
        turn.ending.detail.contains("and 995 more"),
        "{}",
        turn.ending.detail
    );
}

#[test]
fn anthropic_content_carried_whole_in_message_start_is_the_message() {
    let turn = check("constructed/anthropic_message_start_content.sse", Anthropic);
    assert_eq!(
        turn.assistant["content"],
        json!([{"type": "tool_use", "id": "toolu_CONSTRUCTED_pt", "name": "write_file",
                "input": {"path": "notes.txt", "content": "hello"},
                "caller": {"type": "code_execution_20250825", "tool_id": "srvtoolu_CONSTRUCTED_1"}}])
    );
    assert_eq!(turn.calls[0].index, 0);
    assert!(
        turn.ending.detail.contains("1 tool call"),
        "{}",
        turn.ending.detail
    );
}

#[test]
fn responses_client_items_are_calls_of_their_kind_and_hosted_items_stay_in_the_turn() {
    use turngate::CallKind::*;
    let turn = check(
        "constructed/openai_responses_client_items.sse",
        OpenAiResponses,
    );
    let kinds: Vec<_> = turn.calls.iter().map(|c| c.kind).collect();
    assert_eq!(
        kinds,
        [
            LocalShell,
            Shell,
            ApplyPatch,
            CustomTool,
            ToolSearch,
            Computer,
            McpApproval,
            Function
        ]
    );
    let items = turn.assistant.as_array().unwrap();
    let types: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "web_search_call",
            "file_search_call",
            "code_interpreter_call",
            "mcp_list_tools",
            "mcp_call",
            "shell_call",
            "shell_call_output",
            "tool_search_call",
            "tool_search_output",
            "image_generation_call",
            "local_shell_call",
            "shell_call",
            "apply_patch_call",
            "custom_tool_call",
            "tool_search_call",
            "computer_call",
            "mcp_approval_request",
            "function_call"
        ],
        "every item stays in the assistant turn, hosted or not"
    );
    assert_eq!(
        turn.calls.iter().map(|c| c.index).collect::<Vec<_>>(),
        (10..18).collect::<Vec<_>>()
    );
    assert_eq!(
        turn.ending.detail,
        "response.completed: 1 function call(s), 7 other client item(s)"
    );
}

#[test]
fn responses_program_calls_are_accepted_only_with_their_arguments_done() {
    let turn = check(
        "constructed/openai_responses_program_function_call.sse",
        OpenAiResponses,
    );
    assert_eq!(
        turn.assistant[0]["type"], "program",
        "the program item stays"
    );
    assert_eq!(turn.assistant[1]["status"], "in_progress");
    assert_eq!(turn.assistant[1]["caller"]["type"], "program");
    assert_eq!(turn.calls[0].index, 1);
    let open = check(
        "constructed/openai_responses_program_call_args_open.sse",
        OpenAiResponses,
    );
    assert!(
        open.ending.detail.contains("in status in_progress"),
        "{}",
        open.ending.detail
    );
}

#[test]
fn responses_cut_at_the_limit_may_leave_a_streaming_call_out_of_its_output() {
    let turn = check(
        "constructed/openai_responses_incomplete_item_left_out.sse",
        OpenAiResponses,
    );
    assert_eq!(turn.ending.detail, "response.incomplete: max_output_tokens");
    // The streamed items stand in for the output, so the call's index points at it.
    assert_eq!(turn.assistant[1]["type"], "function_call");
    assert_eq!(turn.calls[0].index, 1);
}

#[test]
fn responses_events_are_matched_by_output_index_when_the_item_id_is_unknown() {
    let turn = check(
        "constructed/openai_responses_item_id_per_event.sse",
        OpenAiResponses,
    );
    assert_eq!(turn.text, "Saving now.");
    let contradiction = check(
        "constructed/openai_responses_item_id_contradiction.sse",
        OpenAiResponses,
    );
    assert!(
        contradiction
            .ending
            .detail
            .contains("item_id names the item at output_index 1, but output_index is 0"),
        "{}",
        contradiction.ending.detail
    );
}

#[test]
fn chat_keeps_magistral_thinking_chunks_and_reasoning_content_in_the_message() {
    let turn = check(
        "constructed/openai_chat_magistral_thinking_chunks.sse",
        OpenAiChat,
    );
    assert_eq!(
        turn.assistant["content"],
        json!([
            {"type": "thinking", "thinking": [{"type": "text", "text": "The user wants the notes saved."}]},
            {"type": "text", "text": "Saving the notes."}
        ])
    );
    assert_eq!(
        turn.text, "Saving the notes.",
        "thinking is not visible text"
    );
    for (file, reasoning) in [
        (
            "constructed/openai_chat_deepseek_reasoning_content.sse",
            "The user wants the notes saved.",
        ),
        (
            "constructed/openai_chat_xai_reasoning_content.sse",
            "Saving notes is a write.",
        ),
    ] {
        let turn = check(file, OpenAiChat);
        assert_eq!(turn.assistant["reasoning_content"], reasoning, "{file}");
        assert_eq!(turn.assistant["content"], "Saving the notes.", "{file}");
        assert_eq!(turn.text, "Saving the notes.", "{file}");
    }
    let turn = check(
        "constructed/openai_chat_mistral_whole_calls.sse",
        OpenAiChat,
    );
    assert_eq!(turn.assistant["tool_calls"][1]["id"], "CONSTRUCT2");
    assert_eq!(turn.assistant["content"], json!(null));
}

#[test]
fn repeated_call_ids_make_the_turn_malformed_for_every_provider() {
    for (file, provider) in [
        ("constructed/anthropic_duplicate_tool_use_id.sse", Anthropic),
        ("constructed/openai_chat_duplicate_call_id.sse", OpenAiChat),
        (
            "constructed/openai_responses_duplicate_call_id.sse",
            OpenAiResponses,
        ),
        ("constructed/gemini_duplicate_ids.sse", Gemini),
    ] {
        let turn = check(file, provider);
        assert_eq!(turn.ending.status, Malformed, "{file}");
        assert!(
            turn.ending.detail.contains("appears more than once"),
            "{file}: {}",
            turn.ending.detail
        );
    }
    // Gemini calls without ids are answered by order: not a repetition.
    assert_eq!(
        check("gemini_parallel_function_calls.sse", Gemini)
            .ending
            .status,
        Completed
    );
}

/// OpenRouter and Vercel send the upstream model's signed reasoning as `reasoning_details` fragments and
/// its plain text as `reasoning`: merged per index, they go back in the assistant message as they came.
#[test]
fn chat_keeps_gateway_reasoning_details_merged_per_index_in_the_message() {
    let turn = check(
        "constructed/openai_chat_openrouter_reasoning_details.sse",
        OpenAiChat,
    );
    assert_eq!(turn.ending.status, Completed, "{}", turn.ending.detail);
    assert_eq!(turn.assistant["reasoning"], "The user wants notes.");
    assert_eq!(
        turn.assistant["reasoning_details"],
        json!([
            {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0,
             "text": "The user wants notes.", "signature": "CONSTRUCTED_claude_sig=="},
            {"type": "reasoning.encrypted", "format": "anthropic-claude-v1", "index": 1,
             "data": "CONSTRUCTED_redacted=="},
        ])
    );
    assert_eq!(turn.text, "Saving.", "reasoning is not visible text");
    // A whole body carries them in the message as they are.
    let body = json!({"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "Hi.", "reasoning": "r",
                    "reasoning_details": [{"type": "reasoning.text", "text": "r", "signature": "s", "index": 0}]}}]});
    let whole = decode(OpenAiChat, body.to_string().as_bytes());
    assert_eq!(whole.ending.status, Completed);
    assert_eq!(
        whole.assistant["reasoning_details"],
        body["choices"][0]["message"]["reasoning_details"]
    );
    assert_eq!(whole.assistant["reasoning"], "r");
    for bad in [
        r#"{"reasoning":1}"#,
        r#"{"reasoning_details":{}}"#,
        r#"{"reasoning_details":[1]}"#,
        r#"{"reasoning_details":[{"type":"reasoning.text","index":-1}]}"#,
    ] {
        let body = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{bad},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
        );
        assert_eq!(
            decode(OpenAiChat, body.as_bytes()).ending.status,
            Malformed,
            "{bad}"
        );
    }
}

/// xAI runs its X search on the server and streams each search as a `custom_tool_call` (`xs_call_...`,
/// `ctc_..._xs_call_...`): kept in the assistant content, not a client call; a client `custom_tool_call`
/// in the same shape with other IDs still is one.
#[test]
fn xai_server_search_items_are_content_and_client_custom_tools_are_calls() {
    let turn = check(
        "constructed/openai_responses_xai_search.sse",
        OpenAiResponses,
    );
    assert_eq!(turn.ending.status, Completed, "{}", turn.ending.detail);
    assert!(turn.calls.is_empty());
    assert_eq!(turn.assistant[0]["call_id"], "xs_call_CONSTRUCTED_1");
    assert_eq!(turn.assistant[1]["type"], "custom_tool_call");
    assert_eq!(turn.text, "Here is what X says.");
    let both = check(
        "constructed/openai_responses_xai_search_and_client_custom_tool.sse",
        OpenAiResponses,
    );
    assert_eq!(both.calls.len(), 1);
    assert_eq!(both.calls[0].kind, turngate::turn::CallKind::CustomTool);
    assert_eq!(both.calls[0].index, 3);
    // The rule is narrow: either ID in another shape makes the item a client call.
    let body =
        String::from_utf8(read_fixture("constructed/openai_responses_xai_search.sse")).unwrap();
    for (from, to) in [
        (
            "\"call_id\":\"xs_call_CONSTRUCTED_1\"",
            "\"call_id\":\"call_CONSTRUCTED_1\"",
        ),
        (
            "\"id\":\"ctc_CONSTRUCTED1_xs_call_CONSTRUCTED_1\"",
            "\"id\":\"ctc_CONSTRUCTED1\"",
        ),
        (
            "\"id\":\"ctc_CONSTRUCTED1_xs_call_CONSTRUCTED_1\"",
            "\"id\":\"fc_CONSTRUCTED1_xs_call_CONSTRUCTED_1\"",
        ),
    ] {
        assert!(body.contains(from), "{from}");
        let turn = decode(OpenAiResponses, body.replace(from, to).as_bytes());
        assert_eq!(turn.calls.len(), 1, "{to}: {}", turn.ending.detail);
        assert_eq!(turn.calls[0].kind, turngate::turn::CallKind::CustomTool);
    }
}

fn with_limit(limit: u64) -> DecoderOptions {
    DecoderOptions {
        max_output_tokens: Some(limit),
        ..DecoderOptions::default()
    }
}

/// With the output limit known, a turn whose reported usage reached it is truncated whatever its finish
/// reason says; below the limit, or without one, the finish reason decides. Each provider's usage field.
#[test]
fn usage_that_reached_the_output_limit_truncates_the_turn() {
    for (file, provider, used) in [
        (
            "constructed/openai_chat_vllm_tool_calls_at_limit.sse",
            OpenAiChat,
            64,
        ),
        ("constructed/anthropic_crlf.sse", Anthropic, 20),
        ("constructed/anthropic_whole_tool_use.json", Anthropic, 20),
        (
            "constructed/openai_chat_whole_tool_calls.json",
            OpenAiChat,
            20,
        ),
        (
            "constructed/openai_responses_whole_function_call.json",
            OpenAiResponses,
            20,
        ),
        (
            "constructed/openai_responses_whole_function_call_streamed.sse",
            OpenAiResponses,
            20,
        ),
        ("constructed/gemini_whole_generate_content.json", Gemini, 5),
        ("constructed/gemini_whole_stream_array.json", Gemini, 5),
    ] {
        let free = check_with(file, provider, with_limit(used + 1));
        assert_eq!(
            free.ending.status, Completed,
            "{file}: {}",
            free.ending.detail
        );
        assert_eq!(
            check(file, provider),
            free,
            "{file}: a limit above the usage changes nothing"
        );
        for limit in [used, used - 1] {
            let cut = check_with(file, provider, with_limit(limit));
            assert_eq!(cut.ending.status, Truncated, "{file} at {limit}");
            assert_eq!(
                cut.ending.stop_reason, free.ending.stop_reason,
                "{file}: the raw reason stays"
            );
            assert!(
                cut.ending.detail.contains("output limit"),
                "{}",
                cut.ending.detail
            );
            assert_eq!(
                cut.calls, free.calls,
                "{file}: the calls are still reported"
            );
        }
    }
    // Gemini's limit covers thinking and answer together: thoughtsTokenCount counts.
    let body = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi."}]},
        "finishReason": "STOP"}], "usageMetadata": {"candidatesTokenCount": 3, "thoughtsTokenCount": 4}});
    let body = body.to_string();
    assert_eq!(
        decode_with(Gemini, with_limit(7), body.as_bytes())
            .ending
            .status,
        Truncated
    );
    assert_eq!(
        decode_with(Gemini, with_limit(8), body.as_bytes())
            .ending
            .status,
        Completed
    );
    // The usage never makes a turn completed, nor overrides a fault.
    let cut = check_with(
        "constructed/anthropic_max_tokens_json_parses.sse",
        Anthropic,
        with_limit(1_000_000),
    );
    assert_eq!(cut.ending.status, Truncated);
    let bad = check_with(
        "constructed/anthropic_stray_line.sse",
        Anthropic,
        with_limit(1),
    );
    assert_eq!(bad.ending.status, Malformed);
}

/// A `data: [DONE]` line after the Responses terminal event ends the stream; any other event after it
/// (or a second `[DONE]`) is still a violation.
#[test]
fn responses_done_line_after_the_terminal_event_ends_the_stream() {
    let turn = check(
        "constructed/openai_responses_openrouter_done.sse",
        OpenAiResponses,
    );
    assert_eq!(turn.ending.status, Completed, "{}", turn.ending.detail);
    for file in [
        "constructed/openai_responses_event_after_done.sse",
        "constructed/openai_responses_done_twice.sse",
    ] {
        let turn = check(file, OpenAiResponses);
        assert_eq!(turn.ending.status, Malformed, "{file}");
        assert!(
            turn.ending.detail.contains("after the terminal event"),
            "{}",
            turn.ending.detail
        );
    }
    // Before the terminal event, [DONE] is not a Responses event.
    let body = String::from_utf8(read_fixture(
        "constructed/openai_responses_openrouter_done.sse",
    ))
    .unwrap();
    let at = body.find("event: response.completed").unwrap();
    let early = format!("{}data: [DONE]\n\n{}", &body[..at], &body[at..]);
    assert_eq!(
        decode(OpenAiResponses, early.as_bytes()).ending.status,
        Malformed
    );
}

fn check_bytes_with(provider: Provider, options: DecoderOptions, body: &[u8]) -> Turn {
    let whole = decode_with(provider, options, body);
    for sizes in [vec![1], vec![7], vec![1000, 3]] {
        assert_eq!(
            decode_chunked(provider, options, body, &sizes).0,
            whole,
            "{sizes:?}"
        );
    }
    whole
}
