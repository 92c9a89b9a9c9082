use super::*;
use crate::config::cost::Source;

fn usage(reading: Reading, count: Count, cut: bool, reserve: u32) -> Usage {
    Usage { source: Source::Body(reading), reserve, max: 1_000_000, expose: false, count, cut }
}

const SSE: Option<&str> = Some("text/event-stream; charset=utf-8");
const JSON: Option<&str> = Some("application/json");

/// Reads `body` in the chunks `cuts` splits it at, ended cleanly.
fn read_split(reading: &Reading, count: Count, content_type: Option<&str>, body: &[u8], cuts: &[usize]) -> Option<u64> {
    let u = usage(reading.clone(), count, false, 1);
    let mut reader = UsageReader::new(&u, reading, content_type);
    let mut from = 0;
    for &to in cuts.iter().chain(std::iter::once(&body.len())) {
        assert_eq!(reader.feed(&body[from..to]), None);
        from = to;
    }
    reader.finish();
    reader.units()
}

fn read(reading: &Reading, count: Count, content_type: Option<&str>, body: &[u8]) -> Option<u64> {
    read_split(reading, count, content_type, body, &[])
}

/// `body` read whole, split in two at every byte, and one byte at a time:
/// the same units each way.
fn every_split(reading: &Reading, count: Count, content_type: Option<&str>, body: &[u8]) -> Option<u64> {
    let whole = read(reading, count, content_type, body);
    for at in 0..=body.len() {
        assert_eq!(read_split(reading, count, content_type, body, &[at]), whole, "split at {at} of {:?}", String::from_utf8_lossy(body));
    }
    let bytes: Vec<usize> = (1..body.len()).collect();
    assert_eq!(read_split(reading, count, content_type, body, &bytes), whole, "one byte at a time");
    whole
}

/// The same stream with CRLF and CR line endings.
fn endings(body: &str) -> [Vec<u8>; 3] {
    [body.as_bytes().to_vec(), body.replace('\n', "\r\n").into_bytes(), body.replace('\n', "\r").into_bytes()]
}

const OPENAI: Reading = Reading::Provider(Provider::OpenAi);
const ANTHROPIC: Reading = Reading::Provider(Provider::Anthropic);
const GEMINI: Reading = Reading::Provider(Provider::Gemini);

const OPENAI_STREAM: &str = concat!(
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":null}\n\n",
    ": keep-alive comment\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}],\"usage\":null}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":45,\"total_tokens\":57}}\n\n",
    "data: [DONE]\n\n",
);

#[test]
fn openai_chat_completions_stream_commits_the_final_chunks_usage_at_every_split() {
    for body in endings(OPENAI_STREAM) {
        assert_eq!(every_split(&OPENAI, Count::Total, SSE, &body), Some(57));
        assert_eq!(read(&OPENAI, Count::Input, SSE, &body), Some(12));
        assert_eq!(read(&OPENAI, Count::Output, SSE, &body), Some(45));
        assert_eq!(read(&OPENAI, Count::Weighted { input: 1, output: 4 }, SSE, &body), Some(12 + 4 * 45));
    }
}

#[test]
fn openai_json_body_and_responses_api() {
    let body = br#"{"id":"c1","object":"chat.completion","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}"#;
    assert_eq!(every_split(&OPENAI, Count::Total, JSON, body), Some(12));
    assert_eq!(read(&OPENAI, Count::Output, None, body), Some(3), "no content type: read as JSON");
    let responses = concat!(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"usage\":null}}\n\n",
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"usage\":{\"input_tokens\":20,\"output_tokens\":30,\"total_tokens\":50}}}\n\n",
    );
    for body in endings(responses) {
        assert_eq!(every_split(&OPENAI, Count::Total, SSE, &body), Some(50));
        assert_eq!(read(&OPENAI, Count::Output, SSE, &body), Some(30));
    }
    let json = br#"{"id":"r1","object":"response","usage":{"input_tokens":7,"output_tokens":8,"total_tokens":15}}"#;
    assert_eq!(read(&OPENAI, Count::Total, JSON, json), Some(15));
}

const ANTHROPIC_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":10}}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":40}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn anthropic_stream_takes_input_from_message_start_and_the_cumulative_output_never_summed() {
    for body in endings(ANTHROPIC_STREAM) {
        assert_eq!(every_split(&ANTHROPIC, Count::Total, SSE, &body), Some(30 + 40), "not 30 + 1 + 10 + 40");
        assert_eq!(read(&ANTHROPIC, Count::Input, SSE, &body), Some(30));
        assert_eq!(read(&ANTHROPIC, Count::Output, SSE, &body), Some(40));
    }
    let json = br#"{"id":"m1","type":"message","content":[],"usage":{"input_tokens":11,"output_tokens":22}}"#;
    assert_eq!(every_split(&ANTHROPIC, Count::Total, JSON, json), Some(33));
}

const GEMINI_STREAM: &str = concat!(
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":100,\"totalTokenCount\":108}}\n\n",
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}]}}],\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":200,\"totalTokenCount\":208}}\n\n",
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"c\"}]}}],\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":300,\"thoughtsTokenCount\":4,\"totalTokenCount\":312}}\n\n",
);

#[test]
fn gemini_takes_the_last_usage_metadata_from_sse_and_from_a_json_array() {
    for body in endings(GEMINI_STREAM) {
        assert_eq!(every_split(&GEMINI, Count::Total, SSE, &body), Some(312));
        assert_eq!(read(&GEMINI, Count::Output, SSE, &body), Some(304), "thoughts are billed as output");
    }
    let array = br#"[{"candidates":[],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":10}},{"candidates":[],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":17,"totalTokenCount":20}}]"#;
    assert_eq!(every_split(&GEMINI, Count::Total, JSON, array), Some(20));
}

#[test]
fn a_json_path_reads_a_json_body_or_each_sse_event() {
    let path = Reading::Json("usage.total_tokens".into());
    assert_eq!(every_split(&path, Count::Total, SSE, OPENAI_STREAM.as_bytes()), Some(57));
    assert_eq!(read(&path, Count::Total, JSON, br#"{"usage":{"total_tokens":77}}"#), Some(77));
    let indexed = Reading::Json("meta.0.cost".into());
    assert_eq!(read(&indexed, Count::Total, JSON, br#"{"meta":[{"cost":5.0}]}"#), Some(5));
    for body in [&br#"{"usage":{"total_tokens":-3}}"#[..], br#"{"usage":{"total_tokens":"9"}}"#, br#"{"usage":{"total_tokens":1.5}}"#, b"{not json"] {
        assert_eq!(read(&path, Count::Total, JSON, body), None, "{}", String::from_utf8_lossy(body));
    }
}

#[test]
fn sse_framing_multi_line_data_comments_fields_and_the_last_event_without_its_blank_line() {
    let multi = "event: x\nid: 4\nretry: 10\ndata: {\"usage\":\ndata:{\"total_tokens\":9}}\n\n";
    assert_eq!(every_split(&OPENAI, Count::Total, SSE, multi.as_bytes()), Some(9), "data lines joined with LF");
    let unterminated = "data: {\"usage\":{\"total_tokens\":5}}";
    assert_eq!(read(&OPENAI, Count::Total, SSE, unterminated.as_bytes()), Some(5), "read at a clean end");
    let comment = ": data: {\"usage\":{\"total_tokens\":5}}\n\n";
    assert_eq!(read(&OPENAI, Count::Total, SSE, comment.as_bytes()), None, "a comment is not data");
    let no_space = "data:{\"usage\":{\"total_tokens\":6}}\n\n";
    assert_eq!(read(&OPENAI, Count::Total, SSE, no_space.as_bytes()), Some(6));
}

#[test]
fn malformed_events_and_an_error_event_without_usage_report_nothing() {
    for body in [
        "data: {\"usage\":{\"total_tokens\":5}\n\n",
        "data: {\"usage\":\"lots\"}\n\n",
        "data: {\"usage\":{\"total_tokens\":-5}}\n\n",
        "data: {\"usage\":[1,2]}\n\n",
        "data: [DONE]\n\n",
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
        "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}\n\n",
        "",
    ] {
        for reading in [&OPENAI, &ANTHROPIC, &GEMINI] {
            assert_eq!(read(reading, Count::Total, SSE, body.as_bytes()), None, "{reading:?}: {body:?}");
        }
    }
}

/// A client's prompt echoed in the answer's text (a forged usage object
/// inside a string) is not the answer's usage.
#[test]
fn a_forged_usage_inside_the_content_is_not_read() {
    let forged = "data: {\"choices\":[{\"delta\":{\"content\":\"{\\\"usage\\\":{\\\"total_tokens\\\":1}}\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"data: {\\\"usage\\\":{\\\"total_tokens\\\":1}}\\n\\n\"}}]}\n\n";
    assert_eq!(read(&OPENAI, Count::Total, SSE, forged.as_bytes()), None);
    let real = format!("{forged}data: {{\"choices\":[],\"usage\":{{\"total_tokens\":900}}}}\n\n");
    assert_eq!(every_split(&OPENAI, Count::Total, SSE, real.as_bytes()), Some(900));
}

#[test]
fn an_event_or_body_over_its_bound_reports_nothing() {
    let big = format!("data: {{\"pad\":\"{}\",\"usage\":{{\"total_tokens\":5}}}}\n\n", "x".repeat(EVENT_LIMIT));
    assert_eq!(read(&OPENAI, Count::Total, SSE, big.as_bytes()), None, "an event over 64 KiB is skipped");
    let after = format!("{big}data: {{\"usage\":{{\"total_tokens\":7}}}}\n\n");
    assert_eq!(read(&OPENAI, Count::Total, SSE, after.as_bytes()), Some(7), "the next event is read");
    let many_lines = format!("{}data: {{\"usage\":{{\"total_tokens\":5}}}}\n\n", "data: x\n".repeat(EVENT_LIMIT / 8));
    assert_eq!(read(&OPENAI, Count::Total, SSE, many_lines.as_bytes()), None, "data over 64 KiB across lines");
    let body = format!("{{\"pad\":\"{}\",\"usage\":{{\"total_tokens\":5}}}}", "x".repeat(JSON_LIMIT));
    let chunks: Vec<usize> = (1..body.len() / 65_536).map(|i| i * 65_536).collect();
    assert_eq!(read_split(&OPENAI, Count::Total, JSON, body.as_bytes(), &chunks), None, "a body over 1 MiB");
}

#[test]
fn every_end_but_a_clean_one_commits_max() {
    let u = usage(OPENAI, Count::Total, false, 1);
    for (end, tokens) in [(End::Ended, Some(57)), (End::Cancelled, None), (End::Failed, None), (End::Lapsed, None)] {
        let mut body = BodyUsage::new([("ai", &u, &OPENAI)], SSE);
        assert_eq!(body.feed(OPENAI_STREAM.as_bytes()), None);
        body.end(end);
        assert_eq!((body.tokens("ai"), body.tokens("other")), (tokens, None), "{end:?}");
    }
    for (word, end) in [("ended", End::Ended), ("cut", End::Cut), ("cancelled", End::Cancelled), ("failed", End::Failed), ("lapsed", End::Lapsed), ("idle", End::Lapsed), ("", End::Failed)] {
        assert_eq!(End::from_word(word), end);
    }
}

#[test]
fn a_cut_rule_ends_the_stream_after_the_event_that_passed_its_reserve() {
    let u = usage(GEMINI, Count::Total, true, 250);
    let body = GEMINI_STREAM.as_bytes();
    let second_end = GEMINI_STREAM.match_indices("\n\n").nth(1).map(|(at, _)| at + 2).unwrap();
    for at in 0..=body.len() {
        let mut reading = BodyUsage::new([("ai", &u, &GEMINI)], SSE);
        let (first, rest) = body.split_at(at);
        let cut = reading.feed(first).map(|c| (0, c)).or_else(|| reading.feed(rest).map(|c| (at, c)));
        let (offset, cut) = cut.expect("the second report (208) stays under 250, the third (312) passes it");
        assert_eq!(offset + cut.keep, second_end + GEMINI_STREAM[second_end..].find("\n\n").unwrap() + 2, "split at {at}");
        let event = String::from_utf8(cut.event).unwrap();
        assert!(event.starts_with("data: {\"error\":{\"code\":429,") && event.contains("RESOURCE_EXHAUSTED") && event.ends_with("\n\n"), "{event}");
        assert_eq!(reading.feed(b"data: {\"usageMetadata\":{\"totalTokenCount\":9999}}\n\n"), None, "nothing read after a cut");
        reading.end(End::Ended);
        assert_eq!(reading.tokens("ai"), None, "a cut commits max");
    }
    let anthropic = usage(ANTHROPIC, Count::Output, true, 20);
    let mut reading = BodyUsage::new([("ai", &anthropic, &ANTHROPIC)], SSE);
    let cut = reading.feed(ANTHROPIC_STREAM.as_bytes()).expect("output 40 passes 20");
    let kept = &ANTHROPIC_STREAM[..cut.keep];
    assert!(kept.ends_with("\"output_tokens\":40}}\n\n"), "{kept}");
    let event = String::from_utf8(cut.event).unwrap();
    assert!(event.starts_with("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\""), "{event}");
    let event_json: Value = serde_json::from_str(event.lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap();
    assert!(event_json["error"]["message"].as_str().unwrap().contains("20 tokens"));
    let off = usage(ANTHROPIC, Count::Output, false, 20);
    assert_eq!(BodyUsage::new([("ai", &off, &ANTHROPIC)], SSE).feed(ANTHROPIC_STREAM.as_bytes()), None, "cut is opt-in");
    let json = usage(GEMINI, Count::Total, true, 1);
    assert_eq!(BodyUsage::new([("ai", &json, &GEMINI)], JSON).feed(br#"{"usageMetadata":{"totalTokenCount":9}}"#), None, "a JSON body is never cut");
}

use proptest::prelude::*;

/// Pieces a hostile or broken stream is made of.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"data: {\"usage\":{\"total_tokens\":7}}\n\n".to_vec()),
        Just(b"data: {\"usageMetadata\":{\"totalTokenCount\":9}}\r\n\r\n".to_vec()),
        Just(b"event: message_delta\rdata: {\"usage\":{\"output_tokens\":3}}\r\r".to_vec()),
        Just(b": comment\n".to_vec()),
        Just(b"data: [DONE]\n\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"data:".to_vec()),
        prop::collection::vec(any::<u8>(), 0..40),
    ]
}

proptest! {
    /// Any bytes, split anywhere: no panic, and the same units as read whole
    /// (the framing never depends on where the chunks end).
    #[test]
    fn any_stream_split_anywhere_reads_as_it_does_whole(
        pieces in prop::collection::vec(piece(), 0..12),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        sse in any::<bool>(),
    ) {
        let body: Vec<u8> = pieces.concat();
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
        at.sort_unstable();
        let content_type = if sse { SSE } else { JSON };
        for reading in [&OPENAI, &ANTHROPIC, &GEMINI, &Reading::Json("usage.total_tokens".into())] {
            let whole = read(reading, Count::Total, content_type, &body);
            prop_assert_eq!(read_split(reading, Count::Total, content_type, &body, &at), whole);
        }
    }
}
