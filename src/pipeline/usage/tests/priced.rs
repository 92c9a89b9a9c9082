//! A priced rule charges the tokens the answer reports at the
//! price of the model the answer names, in micro-units.

use super::*;
use crate::config::cost::Priced;
use crate::config::price::{Price, PriceTable, Unpriced};

/// Per million tokens, in millionths: gpt-4o-mini* 0.15 / 0.075 / 0.6,
/// gpt-4o* 2.5 / 1.25 / 10, claude-sonnet* 3 / 0.3 / 15 (writes 3.75),
/// gemini-2.5-flash* 0.3 / 0.075 / 2.5.
fn table(unpriced: Unpriced) -> PriceTable {
    let p = |input, cached_input, output, cache_write| Price { input, cached_input, output, cache_write };
    PriceTable {
        currency: "USD".into(),
        models: vec![
            ("gpt-4o-mini*".into(), p(150_000, 75_000, 600_000, 150_000)),
            ("gpt-4o*".into(), p(2_500_000, 1_250_000, 10_000_000, 2_500_000)),
            ("claude-sonnet*".into(), p(3_000_000, 300_000, 15_000_000, 3_750_000)),
            ("gemini-2.5-flash*".into(), p(300_000, 75_000, 2_500_000, 300_000)),
        ],
        unpriced,
    }
}

fn priced(reading: &Reading, unpriced: Unpriced, cut: bool, reserve_tokens: u32) -> Usage {
    let table = table(unpriced);
    let (reserve, max) = (table.reserve_units(reserve_tokens, 1).unwrap(), table.reserve_units(100_000, 1).unwrap());
    Usage { source: UsageSource::Body(reading.clone()), reserve, max, expose: false, count: Count::Total, cut, price: Some(Priced { table, name: None, reserve_tokens, max_tokens: 100_000, step: 1, unit: "micro-USD".into() }) }
}

/// The charge of `body`, read in the chunks `cuts` splits it at, and
/// whether (and where) it was cut.
fn charge_split(reading: &Reading, unpriced: Unpriced, content_type: Option<&str>, body: &[u8], cuts: &[usize]) -> (Option<u64>, Option<usize>) {
    let u = priced(reading, unpriced, false, 10_000);
    let mut usage = BodyUsage::new([("r", &u, reading)], content_type);
    let mut from = 0;
    for &to in cuts.iter().chain(std::iter::once(&body.len())) {
        if let Some(cut) = usage.feed(&body[from..to]) {
            usage.end(End::Ended);
            return (usage.tokens("r"), Some(from + cut.keep));
        }
        from = to;
    }
    usage.end(End::Ended);
    (usage.tokens("r"), None)
}

fn charge(reading: &Reading, content_type: Option<&str>, body: &str) -> Option<u64> {
    let whole = charge_split(reading, Unpriced::Highest, content_type, body.as_bytes(), &[]).0;
    let bytes: Vec<usize> = (1..body.len()).collect();
    assert_eq!(charge_split(reading, Unpriced::Highest, content_type, body.as_bytes(), &bytes).0, whole, "one byte at a time");
    whole
}

/// (input, cached, cache writes, output) at `price`, rounded up once.
fn exact(price: Price, input: u64, cached: u64, written: u64, output: u64) -> u64 {
    ((input - cached - written) * price.input + cached * price.cached_input + written * price.cache_write + output * price.output).div_ceil(1_000_000)
}

fn price_of(model: &str) -> Price {
    let t = table(Unpriced::Highest);
    t.models[t.pattern(model.as_bytes()).unwrap()].1
}

#[test]
fn openai_chat_is_charged_at_the_answers_model_with_its_cached_input() {
    let stream = concat!(
        "data: {\"id\":\"c\",\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n",
        "data: {\"id\":\"c\",\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[],\"usage\":{\"prompt_tokens\":3000,\"completion_tokens\":1024,\"total_tokens\":4024,\"prompt_tokens_details\":{\"cached_tokens\":1024}}}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(charge(&OPENAI, SSE, stream), Some(exact(price_of("gpt-4o-mini"), 3_000, 1_024, 0, 1_024)));
    let body = r#"{"id":"c","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"message":{"content":"the model is gpt-4o-mini"}}],"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}}"#;
    assert_eq!(charge(&OPENAI, JSON, body), Some(exact(price_of("gpt-4o"), 100, 0, 0, 50)), "the answer's model, not a name in its text");
    let responses = concat!(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-4o-mini\",\"usage\":null}}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-4o-mini\",\"usage\":{\"input_tokens\":500,\"input_tokens_details\":{\"cached_tokens\":100},\"output_tokens\":70,\"total_tokens\":570}}}\n\n",
    );
    assert_eq!(charge(&OPENAI, SSE, responses), Some(exact(price_of("gpt-4o-mini"), 500, 100, 0, 70)));
}

#[test]
fn anthropic_reads_the_model_from_message_start_and_prices_cache_reads_and_writes() {
    let stream = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":200,\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":3000,\"output_tokens\":1}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"Hi\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":800}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    assert_eq!(charge(&ANTHROPIC, SSE, stream), Some(exact(price_of("claude-sonnet"), 4_200, 3_000, 1_000, 800)));
    let body = r#"{"type":"message","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":10,"output_tokens":20}}"#;
    assert_eq!(charge(&ANTHROPIC, JSON, body), Some(exact(price_of("claude-sonnet"), 10, 0, 0, 20)));
}

#[test]
fn gemini_reads_model_version_in_a_stream_and_a_root_array() {
    let chunk = |finish: &str, out: u64| format!("{{\"candidates\":[{{\"content\":{{}}{finish}}}],\"usageMetadata\":{{\"promptTokenCount\":900,\"cachedContentTokenCount\":300,\"candidatesTokenCount\":{out},\"thoughtsTokenCount\":50}},\"modelVersion\":\"gemini-2.5-flash\"}}");
    let sse = format!("data: {}\n\ndata: {}\n\n", chunk("", 10), chunk(",\"finishReason\":\"STOP\"", 400));
    let want = Some(exact(price_of("gemini-2.5-flash"), 900, 300, 0, 450));
    assert_eq!(charge(&GEMINI, SSE, &sse), want);
    assert_eq!(charge(&GEMINI, JSON, &format!("[{},\n{}]", chunk("", 10), chunk(",\"finishReason\":\"STOP\"", 400))), want);
}

/// Attacker cases: an answer naming no model, a model the table does not
/// know, a name spelled to look like a cheaper one, a huge or escaped
/// name, two models in one answer, the model only in the last event: the
/// table's highest prices, never the cheaper match.
#[test]
fn a_model_the_table_cannot_price_is_charged_at_its_highest_prices() {
    let highest = table(Unpriced::Highest).highest();
    let body = |model: &str| format!("{{{model}\"choices\":[],\"usage\":{{\"prompt_tokens\":1000,\"completion_tokens\":100,\"total_tokens\":1100}}}}");
    let at_highest = Some(exact(highest, 1_000, 0, 0, 100));
    for model in ["", "\"model\":\"o3\",", "\"model\":\"gpt-4o-mini \",", "\"model\":\"gpt-4o-m\\u0131ni\",", "\"model\":null,", "\"model\":42,", &format!("\"model\":\"gpt-4o-mini{}\",", "x".repeat(100))] {
        assert_eq!(charge(&OPENAI, JSON, &body(model)), at_highest, "{model}");
    }
    assert_eq!(charge(&OPENAI, JSON, &body("\"model\":\"gpt-4o-m\\u0069ni\",")), Some(exact(price_of("gpt-4o-mini"), 1_000, 0, 0, 100)), "an escape decodes to the name");
    let two = "data: {\"model\":\"gpt-4o-mini\",\"choices\":[]}\n\ndata: {\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":100}}\n\n";
    assert_eq!(charge(&OPENAI, SSE, two), Some(exact(price_of("gpt-4o"), 1_000, 0, 0, 100)), "two models: the dearer");
    let late = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":100}}\n\ndata: {\"model\":\"gpt-4o\"}\n\ndata: [DONE]\n\n";
    assert_eq!(charge(&OPENAI, SSE, late), Some(exact(price_of("gpt-4o"), 1_000, 0, 0, 100)), "a model named late still prices the answer");
}

/// `unpriced = "refuse"`: a stream is cut at the event that names the
/// model, and charged at the highest prices (`max` when nothing was
/// reported); a JSON body has passed, and is charged.
#[test]
fn refuse_cuts_a_stream_at_the_event_naming_an_unpriced_model() {
    let first = "data: {\"model\":\"o3\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    let stream = format!("{first}data: {{\"model\":\"o3\",\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":10}}}}\n\ndata: [DONE]\n\n");
    let (charged, cut) = charge_split(&OPENAI, Unpriced::Refuse, SSE, stream.as_bytes(), &[]);
    let u = priced(&OPENAI, Unpriced::Refuse, false, 10_000);
    assert_eq!((charged, cut), (None, Some(first.len())), "cut after the first event; None commits max ({})", u.max);
    let priced_stream = stream.replace("o3", "gpt-4o");
    assert_eq!(charge_split(&OPENAI, Unpriced::Refuse, SSE, priced_stream.as_bytes(), &[]), (Some(exact(price_of("gpt-4o"), 10, 0, 0, 10)), None));
    let body = r#"{"model":"o3","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":10}}"#;
    assert_eq!(charge_split(&OPENAI, Unpriced::Refuse, JSON, body.as_bytes(), &[]), (Some(exact(table(Unpriced::Refuse).highest(), 10, 0, 0, 10)), None));
}

/// `cut = true` compares the charge with the reserve, both in micro-units.
#[test]
fn a_priced_cut_compares_money_with_the_reserve() {
    let u = priced(&OPENAI, Unpriced::Highest, true, 1_000);
    let mut usage = BodyUsage::new([("r", &u, &OPENAI)], SSE);
    // 2,000 input tokens of gpt-4o-mini cost 300 micro-USD; the reserve
    // is 1,000 tokens at the ceiling (15 per million): 15,000.
    let cheap = "data: {\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":0}}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"more\"}}]}\n\n";
    assert_eq!(usage.feed(cheap.as_bytes()), None, "2,000 cheap tokens cost less than 1,000 at the ceiling");
    let dear = "data: {\"model\":\"claude-sonnet-4\",\"choices\":[],\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":900}}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"more\"}}]}\n\n";
    let mut usage = BodyUsage::new([("r", &u, &OPENAI)], SSE);
    assert!(usage.feed(dear.as_bytes()).is_some(), "a report past the reserve's money, followed by content, is cut");
}

/// A rule counted in milli-units (a spend above 4294.967295): the same
/// charge, rounded up to the milli-unit once per answer.
#[test]
fn a_milli_unit_rule_is_charged_the_micro_charge_rounded_up() {
    let body = r#"{"id":"c","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":101,"completion_tokens":7,"total_tokens":108}}"#;
    let micro = exact(price_of("gpt-4o"), 101, 0, 0, 7);
    assert_ne!(micro % 1_000, 0, "a charge that is no whole milli-unit: {micro}");
    let mut u = priced(&OPENAI, Unpriced::Highest, false, 10_000);
    let p = u.price.as_mut().unwrap();
    (p.step, p.unit) = (1_000, "milli-USD".into());
    let mut usage = BodyUsage::new([("r", &u, &OPENAI)], JSON);
    assert!(usage.feed(body.as_bytes()).is_none());
    usage.end(End::Ended);
    assert_eq!(usage.tokens("r"), Some(micro.div_ceil(1_000)));
}

/// The label of `body`'s answer for the spend by model, read whole.
fn label(body: &str, content_type: Option<&str>) -> Option<String> {
    let u = priced(&OPENAI, Unpriced::Highest, false, 10_000);
    let mut usage = BodyUsage::new([("r", &u, &OPENAI)], content_type);
    usage.feed(body.as_bytes());
    assert_eq!(usage.model("r"), None, "none before the body ended");
    usage.end(End::Ended);
    usage.model("r")
}

/// An answer's spend is labelled by the table's pattern that priced
/// its model (the config's words, never the answer's): two patterns are
/// `(several)`, a model no pattern prices `(unpriced)`, none named
/// `(none named)`; a rule with no price has no label.
#[test]
fn the_spend_by_model_is_labelled_by_the_pattern_that_priced_it() {
    let usage = r#""usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}"#;
    let json = |model: &str| format!(r#"{{"model":{model},"choices":[],{usage}}}"#);
    assert_eq!(label(&json("\"gpt-4o-2024-08-06\""), JSON).as_deref(), Some("gpt-4o*"));
    assert_eq!(label(&json("\"gpt-4o-mini-2024-07-18\""), JSON).as_deref(), Some("gpt-4o-mini*"), "the longest prefix");
    assert_eq!(label(&json("\"o3-pro\""), JSON).as_deref(), Some("(unpriced)"));
    assert_eq!(label(&json("\"gpt-4o-m\u{131}ni\""), JSON).as_deref(), Some("(unpriced)"), "a look-alike spelling is no pattern's");
    assert_eq!(label(&json("null"), JSON).as_deref(), Some("(none named)"));
    let two = concat!(
        "data: {\"model\":\"gpt-4o-mini\",\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n",
        "data: {\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(label(two, SSE).as_deref(), Some("(several)"));
    let same = two.replace("\"gpt-4o\"", "\"gpt-4o-mini-2024\"");
    assert_eq!(label(&same, SSE).as_deref(), Some("gpt-4o-mini*"), "two names, one pattern");
    let plain = Usage { price: None, ..priced(&OPENAI, Unpriced::Highest, false, 10_000) };
    let mut usage = BodyUsage::new([("r", &plain, &OPENAI)], JSON);
    usage.feed(json("\"gpt-4o\"").as_bytes());
    usage.end(End::Ended);
    assert_eq!(usage.model("r"), None, "a rule with no price");
}

/// A table that refuses unpriced models may end the stream, so the driver
/// must read each byte before the client does (as for `cut`): a reader
/// behind the client would let a refused answer through whole.
#[test]
fn a_refusing_table_cuts_as_cut_does() {
    let reading = Reading::Provider(Provider::Anthropic);
    let sse = Some("text/event-stream");
    let said = |unpriced, cut| BodyUsage::new([("r", &priced(&reading, unpriced, cut, 1_000), &reading)], sse).cuts();
    assert!(said(Unpriced::Refuse, false), "refuse alone cuts");
    assert!(said(Unpriced::Highest, true), "cut alone cuts");
    assert!(!said(Unpriced::Highest, false), "neither: may be read behind the client");
}
