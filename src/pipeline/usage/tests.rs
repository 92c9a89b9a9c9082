use super::*;
use crate::config::cost::UsageSource;

fn usage(reading: Reading, count: Count, cut: bool, reserve: u32) -> Usage {
    Usage { source: UsageSource::Body(reading), reserve, max: 1_000_000, expose: false, count, cut, price: None }
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
    "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"c\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":300,\"thoughtsTokenCount\":4,\"totalTokenCount\":312}}\n\n",
);

#[test]
fn gemini_takes_the_last_usage_metadata_from_sse_and_from_a_json_array() {
    for body in endings(GEMINI_STREAM) {
        assert_eq!(every_split(&GEMINI, Count::Total, SSE, &body), Some(312));
        assert_eq!(read(&GEMINI, Count::Output, SSE, &body), Some(304), "thoughts are billed as output");
    }
    let array = br#"[{"candidates":[],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":10}},{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":17,"totalTokenCount":20}}]"#;
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

/// An event over the old 64 KiB cap (a Gemini chunk
/// carrying an image, a Responses `response.completed` repeating a long
/// answer) was skipped, and an earlier, smaller report committed.
#[test]
fn an_event_or_body_of_any_size_is_read_in_full() {
    let image = "A".repeat(70_000);
    let gemini = format!(
        "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"a\"}}]}}}}],\"usageMetadata\":{{\"promptTokenCount\":10,\"candidatesTokenCount\":5,\"totalTokenCount\":15}}}}\r\n\r\n\
         data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"inlineData\":{{\"mimeType\":\"image/png\",\"data\":\"{image}\"}}}}]}},\"finishReason\":\"STOP\"}}],\"usageMetadata\":{{\"promptTokenCount\":10,\"candidatesTokenCount\":890,\"totalTokenCount\":900}}}}\r\n\r\n"
    );
    let chunks: Vec<usize> = (1..gemini.len() / 4_096).map(|i| i * 4_096).collect();
    assert_eq!(read_split(&GEMINI, Count::Total, SSE, gemini.as_bytes(), &chunks), Some(900), "not the first chunk's 15");
    let text = "word ".repeat(20_000);
    let completed = format!(
        "event: response.created\ndata: {{\"type\":\"response.created\",\"response\":{{\"id\":\"r\",\"usage\":null}}}}\n\n\
         event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"id\":\"r\",\"instructions\":\"{text}\",\"output\":[{{\"type\":\"message\",\"content\":[{{\"type\":\"output_text\",\"text\":\"{text}\"}}]}}],\"usage\":{{\"input_tokens\":20000,\"output_tokens\":20001,\"total_tokens\":40001}}}}}}\n\n"
    );
    assert_eq!(read(&OPENAI, Count::Total, SSE, completed.as_bytes()), Some(40_001), "not max, and no usage_missing");
    let path = Reading::Json("usage.total_tokens".into());
    let big = format!("data: {{\"pad\":\"{}\",\"usage\":{{\"total_tokens\":5}}}}\n\n", "x".repeat(200_000));
    assert_eq!(read(&path, Count::Total, SSE, big.as_bytes()), Some(5), "a json path on an event that also carries content");
    let body = format!("{{\"pad\":\"{}\",\"usage\":{{\"total_tokens\":5}}}}", "x".repeat(2 << 20));
    let chunks: Vec<usize> = (1..body.len() / 65_536).map(|i| i * 65_536).collect();
    assert_eq!(read_split(&OPENAI, Count::Total, JSON, body.as_bytes(), &chunks), Some(5), "a JSON body over 1 MiB");
}

/// The scanner keeps no copy of what it reads: a reader's size does not
/// grow with an event's.
#[test]
fn a_reader_holds_no_copy_of_an_event() {
    let u = usage(OPENAI, Count::Total, false, 1);
    let mut reader = UsageReader::new(&u, &OPENAI, SSE);
    reader.feed(b"data: {\"pad\":\"");
    for _ in 0..64 {
        reader.feed(&[b'x'; 65_536]);
    }
    reader.feed(b"\",\"usage\":{\"total_tokens\":3}}\n\n");
    let Framing::Sse(sse) = &reader.framing else { unreachable!() };
    assert!(sse.head.len() <= DONE.len() + 1 && sse.field.len() <= 4, "nothing of 4 MiB kept");
    reader.finish();
    assert_eq!(reader.units(), Some(3));
}

/// Figures a provider will still revise are not a
/// final report: an Anthropic stream without its `message_delta` (an
/// error after the text, or a clean end without it) was charged
/// `message_start`'s input + 1.
#[test]
fn figures_the_provider_still_revises_are_not_a_final_report() {
    let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n";
    let text = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n".repeat(30);
    let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    for body in [format!("{start}{text}{overloaded}"), format!("{start}{text}"), format!("{start}{text}event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n")] {
        for end in endings(&body) {
            assert_eq!(every_split_quick(&ANTHROPIC, &end), None, "{body:.80}…: charged max, not 101");
        }
    }
    let delta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":40}}\n\n";
    assert_eq!(read(&ANTHROPIC, Count::Total, SSE, format!("{start}{text}{delta}").as_bytes()), Some(140));
    assert_eq!(read(&ANTHROPIC, Count::Total, SSE, format!("{start}{text}{delta}{overloaded}").as_bytes()), None, "an error after the last report");
    let gemini_partial = GEMINI_STREAM.replace(",\"finishReason\":\"STOP\"", "");
    assert_eq!(read(&GEMINI, Count::Total, SSE, gemini_partial.as_bytes()), None, "a Gemini stream without its last chunk");
    let after = GEMINI_STREAM.replace(",\"finishReason\":\"STOP\"", "")
        + "data: {\"candidates\":[{\"content\":{\"parts\":[]},\"finishReason\":\"STOP\"}]}\n\n"
        + "data: {\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":301,\"totalTokenCount\":309}}\n\n";
    assert_eq!(read(&GEMINI, Count::Total, SSE, after.as_bytes()), Some(312), "usage in a chunk after the finishReason's is final; the largest figures");
    let blocked = br#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7}}"#;
    assert_eq!(read(&GEMINI, Count::Total, JSON, blocked), Some(7), "a blocked prompt is a final answer");
    let with_error = format!("{}data: {{\"error\":{{\"code\":500,\"message\":\"x\",\"status\":\"INTERNAL\"}}}}\n\n", GEMINI_STREAM);
    assert_eq!(read(&GEMINI, Count::Total, SSE, with_error.as_bytes()), None);
}

/// `body` read whole and split in two at every 7th byte.
fn every_split_quick(reading: &Reading, body: &[u8]) -> Option<u64> {
    let whole = read(reading, Count::Total, SSE, body);
    for at in (0..=body.len()).step_by(7) {
        assert_eq!(read_split(reading, Count::Total, SSE, body, &[at]), whole, "split at {at}");
    }
    whole
}

/// What a body commits is what it reported, above
/// `max` too; with no final report, `max`, or the figures read when they
/// pass it.
#[test]
fn a_report_above_max_commits_in_full() {
    let u = Usage { max: 1_000, ..usage(OPENAI, Count::Total, false, 1_000) };
    let report = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":200,\"completion_tokens\":1000,\"total_tokens\":1200}}\n\ndata: [DONE]\n\n";
    for (end, tokens) in [(End::Ended, Some(1_200)), (End::Cancelled, Some(1_200)), (End::Failed, Some(1_200))] {
        let mut body = BodyUsage::new([("ai", &u, &OPENAI)], SSE);
        assert_eq!(body.feed(report.as_bytes()), None);
        body.end(end);
        assert_eq!(body.tokens("ai"), tokens, "{end:?}");
    }
    assert_eq!(Usage::recorded(1_200), 1_200);
    assert_eq!(Usage::recorded(u64::MAX), u32::MAX);
    let running = "data: {\"candidates\":[],\"usageMetadata\":{\"totalTokenCount\":1500}}\n\n";
    let g = Usage { max: 1_000, ..usage(GEMINI, Count::Total, false, 1_000) };
    let mut body = BodyUsage::new([("ai", &g, &GEMINI)], SSE);
    body.feed(running.as_bytes());
    body.end(End::Ended);
    assert_eq!(body.tokens("ai"), Some(1_500), "not final, but past max: what was read");
    let mut body = BodyUsage::new([("ai", &g, &GEMINI)], SSE);
    body.feed(running.replace("1500", "500").as_bytes());
    body.end(End::Ended);
    assert_eq!(body.tokens("ai"), None, "not final, under max: max");
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
    let running = GEMINI_STREAM.replace(",\"finishReason\":\"STOP\"", "");
    let second_end = GEMINI_STREAM.match_indices("\n\n").nth(1).map(|(at, _)| at + 2).unwrap();
    for at in 0..=running.len() {
        let mut reading = BodyUsage::new([("ai", &u, &GEMINI)], SSE);
        let (first, rest) = running.as_bytes().split_at(at);
        let cut = reading.feed(first).map(|c| (0, c)).or_else(|| reading.feed(rest).map(|c| (at, c)));
        let (offset, cut) = cut.expect("the second report (208) stays under 250, the third (312, still running) passes it");
        assert_eq!(offset + cut.keep, running.len(), "split at {at}: up to the end of the event that passed");
        let event = String::from_utf8(cut.event).unwrap();
        assert!(event.starts_with("data: {\"error\":{\"code\":429,") && event.contains("RESOURCE_EXHAUSTED") && event.ends_with("\n\n"), "{event}");
        assert_eq!(reading.feed(b"data: {\"usageMetadata\":{\"totalTokenCount\":9999}}\n\n"), None, "nothing read after a cut");
        reading.end(End::Ended);
        assert_eq!(reading.tokens("ai"), None, "a cut commits max");
    }
    let _ = second_end;
    let mut reading = BodyUsage::new([("ai", &u, &GEMINI)], SSE);
    assert_eq!(reading.feed(body), None, "the chunk with its finishReason ends the answer: no cut");
    reading.end(End::Ended);
    assert_eq!(reading.tokens("ai"), Some(312));
    let json = usage(GEMINI, Count::Total, true, 1);
    assert_eq!(BodyUsage::new([("ai", &json, &GEMINI)], JSON).feed(br#"{"usageMetadata":{"totalTokenCount":9}}"#), None, "a JSON object is never cut");
}

/// A cut broke answers that ended normally (OpenAI's
/// usage at the end, Anthropic's last `message_delta`): the SDKs raised
/// although the whole text was delivered. A report that may be the last is
/// cut only once content follows it.
#[test]
fn an_answer_that_ended_normally_is_never_cut() {
    let openai = usage(OPENAI, Count::Total, true, 10);
    let anthropic = usage(ANTHROPIC, Count::Output, true, 20);
    for (u, reading, body) in [(&openai, &OPENAI, OPENAI_STREAM), (&anthropic, &ANTHROPIC, ANTHROPIC_STREAM)] {
        for end in endings(body) {
            let mut read = BodyUsage::new([("ai", u, reading)], SSE);
            assert_eq!(read.feed(&end), None, "{reading:?}");
            read.end(End::Ended);
            assert!(read.tokens("ai").is_some(), "{reading:?}: charged its usage");
        }
    }
    let responses = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":20,\"output_tokens\":30,\"total_tokens\":50}}}\n\n";
    assert_eq!(BodyUsage::new([("ai", &openai, &OPENAI)], SSE).feed(responses.as_bytes()), None);
    // Content after a report that passed: the stream still runs.
    let mid = ANTHROPIC_STREAM.replacen("\"usage\":{\"output_tokens\":10}", "\"usage\":{\"output_tokens\":30}", 1);
    let mut read = BodyUsage::new([("ai", &anthropic, &ANTHROPIC)], SSE);
    let content = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"more\"}}\n\n";
    let at = mid.find("event: message_delta").unwrap();
    let delta_end = at + mid[at..].find("\n\n").unwrap() + 2;
    let stream = format!("{}{content}{}", &mid[..delta_end], &mid[delta_end..]);
    let cut = read.feed(stream.as_bytes()).expect("content after output 30 > 20");
    assert_eq!(&stream[..cut.keep], format!("{}{content}", &mid[..delta_end]), "cut after the content's event");
    let event = String::from_utf8(cut.event).unwrap();
    assert!(event.starts_with("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\""), "{event}");
    let event_json: Value = serde_json::from_str(event.lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap();
    assert!(event_json["error"]["message"].as_str().unwrap().contains("20 tokens"));
    let off = usage(ANTHROPIC, Count::Output, false, 20);
    assert_eq!(BodyUsage::new([("ai", &off, &ANTHROPIC)], SSE).feed(stream.as_bytes()), None, "cut is opt-in");
    // A Responses stream is cut in that API's shape.
    let running = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n\
        data: {\"type\":\"response.output_text.delta\",\"usage\":{\"total_tokens\":50}}\n\n\
        data: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n";
    let cut = BodyUsage::new([("ai", &openai, &OPENAI)], SSE).feed(running.as_bytes()).expect("content after a report past 10");
    let event = String::from_utf8(cut.event).unwrap();
    assert!(event.starts_with("event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\""), "{event}");
}

/// A CRLF stream's blank line dispatches at its CR; the
/// cut event went before its LF (`…}\r\n\rdata: {"error"…`) and
/// @google/genai threw `SyntaxError`, losing the last chunk.
#[test]
fn a_crlf_stream_is_cut_after_its_whole_blank_line_and_in_crlf() {
    let u = usage(GEMINI, Count::Total, true, 250);
    let running = GEMINI_STREAM.replace(",\"finishReason\":\"STOP\"", "").replace('\n', "\r\n");
    for at in 0..=running.len() {
        let mut reading = BodyUsage::new([("ai", &u, &GEMINI)], SSE);
        let (first, rest) = running.as_bytes().split_at(at);
        let cut = reading.feed(first).map(|c| (0, c)).or_else(|| reading.feed(rest).map(|c| (at, c)));
        let (offset, cut) = cut.expect("passes 250");
        let mut client = running.as_bytes()[..offset + cut.keep].to_vec();
        client.extend_from_slice(&cut.event);
        let client = String::from_utf8(client).unwrap();
        assert!(client.starts_with(&running), "split at {at}: every byte of the origin's up to the event's end");
        let tail = &client[running.len()..];
        assert!(tail.starts_with("data: {\"error\":{\"code\":429,") && tail.ends_with("}}\r\n\r\n"), "split at {at}: {tail:?}");
    }
    // The blank line's CR ends the chunk: the event brings the LF.
    let at = running.len() - 1;
    let mut reading = BodyUsage::new([("ai", &u, &GEMINI)], SSE);
    let cut = reading.feed(&running.as_bytes()[..at]).expect("dispatched at the CR");
    assert_eq!(cut.keep, at);
    assert!(cut.event.starts_with(b"\ndata: "));
}

/// Gemini's stream without `alt=sse` (a JSON array
/// streamed element by element) was never cut.
#[test]
fn a_root_array_of_documents_is_cut_after_its_element_and_closed() {
    let u = usage(GEMINI, Count::Total, true, 250);
    let elements: Vec<String> = [100, 200, 300, 400]
        .iter()
        .map(|n| format!("{{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"x\"}}]}}}}],\"usageMetadata\":{{\"totalTokenCount\":{n}}}}}"))
        .collect();
    let body = format!("[{}]", elements.join("\n,\r\n"));
    let third_end = body.find("300").unwrap() + body[body.find("300").unwrap()..].find("}}").unwrap() + 2;
    for at in (0..=body.len()).step_by(3) {
        let mut reading = BodyUsage::new([("ai", &u, &GEMINI)], JSON);
        let (first, rest) = body.as_bytes().split_at(at);
        let cut = reading.feed(first).map(|c| (0, c)).or_else(|| reading.feed(rest).map(|c| (at, c)));
        let (offset, cut) = cut.expect("300 passes 250");
        assert_eq!(offset + cut.keep, third_end, "split at {at}");
        let mut client = body[..third_end].to_string();
        client.push_str(std::str::from_utf8(&cut.event).unwrap());
        let parsed: Value = serde_json::from_str(&client).expect("still a JSON array");
        assert_eq!(parsed[3]["error"]["status"], "RESOURCE_EXHAUSTED");
    }
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

/// Any JSON value, a few levels deep, with member names that collide with
/// the usage's own.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u32>().prop_map(|n| Value::from(u64::from(n))),
        (-1_000i64..1_000).prop_map(Value::from),
        (0.0f64..1e6).prop_map(Value::from),
        "[a-z\"\\\\{}:,]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        let name = prop_oneof![Just("usage".to_string()), Just("total_tokens".to_string()), Just("prompt_tokens".to_string()), Just("response".to_string()), "[a-z]{1,6}"];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((name, inner), 0..5).prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// What serde_json reads of OpenAI's usage in a document, as the reader
/// over serde_json did (the oracle).
fn oracle(value: &Value) -> Tokens {
    let whole = |v: &Value| v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19).map(|f| f as u64));
    let figure = |o: &Value, name: &str| o.get(name).and_then(whole);
    let mut tokens = Tokens::default();
    for usage in [value.get("usage"), value.get("response").and_then(|r| r.get("usage"))].into_iter().flatten().filter(|u| u.is_object()) {
        tokens.merge(Tokens {
            input: figure(usage, "prompt_tokens").or_else(|| figure(usage, "input_tokens")),
            output: figure(usage, "completion_tokens").or_else(|| figure(usage, "output_tokens")),
            total: figure(usage, "total_tokens"),
            ..Tokens::default()
        });
    }
    tokens
}

proptest! {
    /// The streaming scanner reads what a JSON parser reads, in any JSON
    /// document, written compact or pretty, as an SSE event or a body.
    #[test]
    fn the_scanner_reads_what_serde_json_reads(value in json_value(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&value).unwrap() } else { value.to_string() };
        let want = oracle(&value);
        let u = usage(OPENAI, Count::Total, false, 1);
        for (content_type, body) in [(SSE, format!("data: {}\n\n", text.replace('\n', "\ndata: "))), (JSON, text.clone())] {
            let mut reader = UsageReader::new(&u, &OPENAI, content_type);
            reader.feed(body.as_bytes());
            reader.finish();
            // A root array is read element by element as a body: compare
            // objects only there.
            if content_type == JSON && value.is_array() {
                continue;
            }
            prop_assert_eq!(reader.tokens, want, "{}", body);
        }
    }
}

mod priced;

/// The events a reader counts ([`UsageReader::events`], what the batched
/// watch decides a stream trickles by): each dispatched event once, however
/// the bytes are split; a comment alone is none.
#[test]
fn events_are_counted_once_at_every_split() {
    for body in endings(OPENAI_STREAM) {
        for at in 0..=body.len() {
            let u = usage(OPENAI, Count::Total, false, 1);
            let mut reader = UsageReader::new(&u, &OPENAI, SSE);
            assert_eq!(reader.feed(&body[..at]), None);
            assert_eq!(reader.feed(&body[at..]), None);
            assert_eq!(reader.events(), 4, "split at {at}");
        }
    }
}
