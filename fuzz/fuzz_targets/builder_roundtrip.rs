#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| klog_fuzz::builder_roundtrip(data));
