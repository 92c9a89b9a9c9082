//! What the data-driven case harnesses (`canon_cases.rs`, `key_cases.rs`)
//! share: the end of a run.

/// Prints the run's expected failures, malformed cases and unexpected
/// results, then fails the test if any case was malformed or gave an
/// unexpected result.
pub fn report(expected_failed: &[String], malformed: &[String], unexpected: &[String]) {
    for line in expected_failed {
        println!("  expected failure: {line}");
    }
    for line in malformed.iter().chain(unexpected) {
        println!("  {line}");
    }
    assert!(malformed.is_empty(), "{} malformed cases:\n{}", malformed.len(), malformed.join("\n"));
    assert!(
        unexpected.is_empty(),
        "{} unexpected results:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}
