//! `scripts/test`'s skip report: a skipped test's reason reaches the file `KLOG_SKIP_REPORT` names,
//! with the test binary's and the test's name, since libtest keeps a passing test's stderr to itself.
//! Alone in its binary: it sets an environment variable of the process.

mod common;

#[test]
fn a_skip_is_written_to_the_report_with_the_tests_name() {
    let report = common::scratch_dir("skip_report").join("skipped.txt");
    std::env::set_var("KLOG_SKIP_REPORT", &report);
    common::skip("java is not installed, so real Kafka cannot judge");
    common::skip("a second reason");
    let text = std::fs::read_to_string(&report).expect("the skip report was written");
    let test = "skip_report::a_skip_is_written_to_the_report_with_the_tests_name";
    assert_eq!(
        text,
        format!(
            "{test}: java is not installed, so real Kafka cannot judge\n{test}: a second reason\n"
        )
    );
}
